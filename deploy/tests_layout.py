"""Sort the test files into folders that mirror ``chazbot/`` (issue #49), with ``git mv``.

``tests/<package>/`` holds the tests of ``chazbot/<package>/`` (``tests/transports/web/`` those
of ``chazbot/transports/web/``), ``tests/matrix/`` every test that needs the real Synapse,
``tests/browser/`` the ones that drive chromium, ``tests/deploy/`` the install and image
tests, ``tests/support/`` what tests share (stand-ins, Synapse, waits, paths), and ``tests/``
itself the tests of the top-level modules and of the whole tree.

Run from the repository's root, on a clean work tree: ``python deploy/tests_layout.py``. It
is safe to run again (after a merge that brought new flat ``tests/test_*.py`` files or
``tests/*_support.py`` modules): what is already in place is left alone, a file the table
below does not name is placed by its name, then by what it uses (the Synapse fixtures, selenium,
the ``chazbot`` package it imports most), and the choice is printed. Afterwards every
``tests.<module>`` import and every ``tests/<file>`` path in the repository is rewritten to the
new place, ``Path(__file__)`` walks in moved files become ``tests.support.paths`` names, and
``ruff`` sorts the imports. What it could not rewrite is printed as ``CHECK``: look at it.
``--dry-run`` prints the moves only.

A merge that conflicts in a moved test file (both sides changed its imports: the other side
still says ``tests.support.waits``, this one ``tests.support.waits``): take the other side's text
(``git checkout --theirs FILE``, or keep its lines in the conflict), run this script again,
and it rewrites that file's imports and walks like every other.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"

SUPPORT = {
    "abuse_support.py": "support/abuse.py",
    "ledger_support.py": "support/ledger.py",
    "service_support.py": "support/service.py",
    "sync_support.py": "support/sync.py",
    "web_support.py": "support/web.py",
    "synapse.py": "support/synapse.py",
    "standin_base.py": "support/standin_base.py",
    "standin_chat.py": "support/standin_chat.py",
    "standin_embeddings.py": "support/standin_embeddings.py",
    "standin_llm.py": "support/standin_llm.py",
    "standin_speech.py": "support/standin_speech.py",
    "waits.py": "support/waits.py",
    "tls.py": "support/tls.py",
    "crash_writer.py": "support/crash_writer.py",
    "mcp_demo_server.py": "support/mcp_demo_server.py",
    "adversarial/harness.py": "support/adversarial.py",
}

FOLDERS: dict[str, list[str]] = {
    "agent": [
        "acknowledgement", "agent_turns", "answers", "capture", "capture_sources", "grounding",
        "llm", "local_llm_import", "model_fetch", "rt_words", "spoken", "words", "media",
        "undo_per_person", "forget_by_key",
    ],
    "agent/turn": ["turn_stages", "turn_small"],
    "backends": ["retry_policy"],
    "commands": [
        "command_tree", "commands", "agents_from_chat", "sharing_commands", "people",
        "nonadmin_limits",
    ],
    "ledger": [
        "ledger_auth", "ledger_entry", "ledger_local", "ledger_merge", "ledger_storage", "lock",
        "restore_trust", "auth_resolution", "feature_tables", "adversarial/convergence_property",
    ],
    "memory": [
        "audience", "bm25", "bm25_kernel", "current", "embedders", "fusion", "index_trust",
        "memory_engine", "query_bounds", "ranking_settings", "recall_inline", "relevance_floor",
        "row_index", "supply", "time_aware", "tokenize", "vectors", "vectors_owed",
        "vectors_text", "load", "rt_audience",
    ],
    "reminders": [
        "reminder_cap_race", "reminders", "reminders_family", "reminders_memory",
        "reminders_tools", "control_reminder_tools",
    ],
    "sync": [
        "abuse", "abuse_guard", "abuse_health", "abuse_many", "sync_hardening", "sync_probe",
        "sync_protocol", "sync_relay", "sync_replication", "sync_simulation", "sync_tls",
        "sync_wire", "tickets", "walkthrough", "adversarial/hostile_writer",
        "adversarial/sync_limits",
    ],
    "tools": ["tools_fetch", "tools_mcp", "tools_search", "tools_turns"],
    "transports": ["access", "matrix_rules"],
    "transports/matrix": ["matrix_revisions", "matrix_state", "media_fetch"],
    "transports/web": ["web", "web_link_room", "web_owed", "reminders_web", "web_hostile"],
    "matrix": [
        "access_matrix", "agents_matrix", "audience_matrix", "big_room_matrix", "health",
        "matrix", "matrix_crash", "matrix_redaction", "media_matrix", "reminders_matrix",
        "rt_audience_matrix", "stranger_dm_matrix", "tools_matrix", "trust_matrix",
        "voice_forget_matrix", "words_matrix", "capture_local",
    ],
    "browser": ["web_browser", "reminders_browser", "web_phone"],
    "deploy": ["docker", "install_lock", "local_run"],
}  # fmt: skip
TOP = [
    "cli", "config", "docs", "fuzz", "imports", "layout", "log_wording", "module_globals",
    "operations", "rt_input",
]  # fmt: skip
"""Tests of the top-level modules (``peer``, ``cli``, ``config``, ``operations``) and of the
whole tree (the import layers, the docs, fuzzing and red-teaming every input) stay in
``tests/``."""

# A new file's name, tried in this order before what it uses.
BY_NAME = [
    (r"_matrix$", "matrix"),
    (r"_browser$", "browser"),
    (r"^(sync|abuse|tickets)", "sync"),
    (r"^ledger", "ledger"),
    (r"^(bm25|memory|vectors?|recall|audience|embedder|tokeni|fusion|current)", "memory"),
    (r"^reminder", "reminders"),
    (r"^tools?_", "tools"),
    (r"^web", "transports/web"),
    (r"^turn", "agent/turn"),
    (r"^(words|answer|capture|grounding|agent)", "agent"),
    (r"^command", "commands"),
    (r"^(docker|install|local_run)", "deploy"),
]
SYNAPSE_FIXTURES = {"synapse", "humans", "matrix_user", "synapse_admin", "chazbot"}
PACKAGES = {
    "agent", "backends", "commands", "ledger", "memory", "reminders", "sync", "tools",
    "transports", "transports.matrix", "transports.web",
}  # fmt: skip
PATH_NAMES = ("ROOT", "TESTS", "DATA", "SUPPORT")


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def table() -> dict[str, str]:
    """Old path (under tests/) -> new path, for every file this layout has ever moved."""
    moves = dict(SUPPORT)
    for folder, names in FOLDERS.items():
        for name in names:
            sub, _, stem = name.rpartition("/")
            old = f"{sub}/test_{stem}.py" if sub else f"test_{stem}.py"
            moves[old] = f"{folder}/test_{stem}.py"
    return moves


def guess(path: Path) -> str:
    """Where a file the table does not name goes, by its name, then by what it uses."""
    stem = path.stem.removeprefix("test_")
    for pattern, folder in BY_NAME:
        if re.search(pattern, stem):
            return folder
    source = path.read_text()
    tree = ast.parse(source)
    args = {
        a.arg
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for a in node.args.args
    }
    if args & SYNAPSE_FIXTURES or "requires_synapse" in source:
        return "matrix"
    if "selenium" in source:
        return "browser"
    used: Counter[str] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("chazbot."):
            parts = node.module.split(".")[1:]
            for depth in (2, 1):
                name = ".".join(parts[:depth])
                if name in PACKAGES:
                    used[name] += 1
                    break
    if not used:
        return ""
    return used.most_common(1)[0][0].replace(".", "/")


def plan() -> dict[str, str]:
    """Old path -> new path (under tests/) for what still has to move."""
    known = table()
    moves = {old: new for old, new in known.items() if (TESTS / old).exists()}
    for path in sorted(TESTS.glob("*.py")):
        name = path.name
        if name in moves or name in {"__init__.py", "conftest.py"}:
            continue
        if name.removeprefix("test_").removesuffix(".py") in TOP:
            continue
        if name.startswith("test_"):
            folder = guess(path)
            if folder:
                moves[name] = f"{folder}/{name}"
                print(f"placed by name or use: tests/{name} -> tests/{folder}/{name}")
        else:
            new = f"support/{name.removesuffix('_support.py').removesuffix('.py')}.py"
            moves[name] = new
            print(f"placed as support: tests/{name} -> tests/{new}")
    return moves


def module(path: str) -> str:
    return "tests." + path.removesuffix(".py").replace("/", ".")


def ensure_packages(new: Path) -> None:
    folder = new.parent
    while folder != TESTS:
        init = folder / "__init__.py"
        if not init.exists():
            init.write_text("")
            git("add", str(init.relative_to(ROOT)))
        folder = folder.parent


def text_files() -> list[Path]:
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    suffixes = {".py", ".md", ".sh", ".toml", ".yaml", ".yml", ".txt", ".example", ".cfg"}
    out = []
    for name in listed:
        path = ROOT / name
        if not name or name.startswith("tests/data/") or not path.is_file():
            continue
        if path.suffix in suffixes or path.name in {"Dockerfile", ".gitignore", ".dockerignore"}:
            out.append(path)
    return out


def rewrite_references(moves: dict[str, str]) -> None:
    """Every ``tests.<module>`` and ``tests/<path>`` in the repository, to the new place."""
    dotted = {module(old): module(new) for old, new in moves.items()}
    slashed = {f"tests/{old}": f"tests/{new}" for old, new in moves.items()}
    slashed["tests/support/standin_*.py"] = "tests/support/standin_*.py"
    by_dot = re.compile(
        r"(?<![\w.])("
        + "|".join(re.escape(d) for d in sorted(dotted, key=len, reverse=True))
        + r")(?![\w])"
    )
    by_slash = re.compile(
        r"(?<![\w./-])("
        + "|".join(re.escape(s) for s in sorted(slashed, key=len, reverse=True))
        + r")(?![\w])"
    )
    for path in text_files():
        text = path.read_text()
        new = by_slash.sub(lambda m: slashed[m.group(1)], text)
        if path.suffix == ".py":
            new = by_dot.sub(lambda m: dotted[m.group(1)], new)
        if new != text:
            path.write_text(new)


FILE_WALKS = [
    (re.compile(r"^ROOT = Path\(__file__\)(?:\.resolve\(\))?\.parent\.parent\n", re.M), "", "ROOT"),
    (re.compile(r"Path\(__file__\)(?:\.resolve\(\))?\.parent\.parent"), "ROOT", "ROOT"),
    (re.compile(r"Path\(__file__\)(?:\.resolve\(\))?\.parent / \"data\""), "DATA", "DATA"),
    (
        re.compile(r"Path\(__file__\)(?:\.resolve\(\))?\.parent / \"screenshots\""),
        'TESTS / "screenshots"',
        "TESTS",
    ),
]


FINE_WALKS = ("HERE = Path(__file__).resolve().parent", "compose.__file__")
"""Walks that mean the file's own folder (a git cwd) or another package's: left as they are."""


def rewrite_file_walks(moves: dict[str, str]) -> list[Path]:
    """``Path(__file__)`` walks in the files below ``tests/``, as ``tests.support.paths`` names
    (every such file: a merge may bring an old walk into a file moved before)."""
    support_names = {Path(old).name: Path(new).name for old, new in SUPPORT.items()}
    support_names.update(
        {Path(o).name: Path(n).name for o, n in moves.items() if n.startswith("support/")}
    )
    with_name = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?\.with_name\(\"([\w.]+)\"\)")
    touched = []
    for path in sorted(TESTS.rglob("*.py")):
        if path == TESTS / "support/paths.py" or path.parent == TESTS:
            continue  # a walk from tests/ itself still finds the root
        new = path.relative_to(TESTS).as_posix()
        text = path.read_text()
        needed: set[str] = set()
        out = text
        for pattern, replacement, name in FILE_WALKS:
            out, n = pattern.subn(replacement, out)
            if n:
                needed.add(name)

        for match in with_name.finditer(out):
            needed.add("SUPPORT")
            moved = support_names.get(match.group(1), match.group(1))
            out = out.replace(match.group(0), f'SUPPORT / "{moved}"')
        if needed:
            names = ", ".join(sorted(needed))
            line = f"from tests.support.paths import {names}\n"
            anchor = "from __future__ import annotations\n"
            out = out.replace(anchor, anchor + line, 1) if anchor in out else line + out
        if out != text:
            path.write_text(out)
            touched.append(path)
        for number, row in enumerate(out.splitlines(), 1):
            if any(fine in row for fine in FINE_WALKS):
                continue
            if "__file__" in row or re.search(r"\bHERE\.parent\b", row):
                print(f"CHECK tests/{new}:{number}: {row.strip()}")
    return touched


def main() -> int:
    dry = "--dry-run" in sys.argv
    moves = plan()
    for old, new in sorted(moves.items(), key=lambda kv: kv[1]):
        print(f"tests/{old} -> tests/{new}")
    if dry:
        return 0
    for old, new in moves.items():
        target = TESTS / new
        target.parent.mkdir(parents=True, exist_ok=True)
        ensure_packages(target)
        git("mv", str((TESTS / old).relative_to(ROOT)), str(target.relative_to(ROOT)))
    if not (TESTS / "support/paths.py").exists():
        print("CHECK tests/support/paths.py is missing: the rewritten walks import it")
    leftover = TESTS / "adversarial"
    if leftover.is_dir() and {p.name for p in leftover.iterdir()} <= {"__init__.py", "__pycache__"}:
        git("rm", "-q", "-r", "--cached", "--ignore-unmatch", "tests/adversarial")
        for p in sorted(leftover.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        leftover.rmdir()
    rewrite_references(table() | moves)
    rewrite_file_walks(moves)
    ruff = str(ROOT / ".venv/bin/ruff")
    subprocess.run([ruff, "check", "-q", "--fix", "--select", "I,F401", "tests", "bench"], cwd=ROOT)
    subprocess.run([ruff, "format", "-q", "tests", "bench", "deploy"], cwd=ROOT)
    print(
        "done: rewrap what ruff check . calls too long (E501: the paths got longer), then run "
        "mypy and pytest --collect-only -q, and git add -A"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

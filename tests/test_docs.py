"""The generated reference pages are current, config.yaml.example is a valid config, and the
docs and benches cite only repository paths that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from chazbot.config import parse_config
from chazbot.docgen import DOCS, PAGES

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", sorted(PAGES))
def test_generated_docs_are_current(name: str) -> None:
    assert (DOCS / name).read_text(encoding="utf-8") == PAGES[name](), (
        f"docs/{name} is stale: run python -m chazbot.docgen"
    )


def test_config_example_is_valid_and_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("CHAZBOT_MATRIX_PASSWORD", "pw")
    data = yaml.safe_load((ROOT / "config.yaml.example").read_text())
    cfg = parse_config(data, "config.yaml.example")
    assert cfg.llm is not None and cfg.llm.api_key == "sk-test"
    # every key of every model appears in the example, at its depth
    from chazbot import config as c

    text = "\n" + (ROOT / "config.yaml.example").read_text()
    for name in c.Config.model_fields:
        assert f"\n{name}:" in text, name
    for model in (c.LLMConfig, c.EmbeddingConfig, c.MatrixConfig, c.LoggingConfig, c.ToolsConfig):
        for name in model.model_fields:
            assert f"\n  {name}:" in text, f"{model.__name__}.{name}"
    for name in c.AgentConfig.model_fields:
        assert f"\n  - {name}:" in text or f"\n    {name}:" in text, f"AgentConfig.{name}"
    for name in c.MCPServerConfig.model_fields:
        assert f"\n#  - {name}:" in text or f"\n#    {name}:" in text, f"MCPServerConfig.{name}"


LONG_MODULE_LINES = 500


def test_every_long_module_says_why_in_the_architecture_page() -> None:
    """A module over 500 lines is named in docs/architecture.md's "Modules over 500 lines"
    section, with its reason (issue 24)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    heading = "## Modules over 500 lines, and why"
    assert heading in text
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    long = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "chazbot").rglob("*.py"))
        if len(path.read_text(encoding="utf-8").splitlines()) > LONG_MODULE_LINES
    ]
    assert long, "no long module: the check would hold nothing"
    missing = [p for p in long if f"`{p}`" not in section]
    assert not missing, f"over {LONG_MODULE_LINES} lines, no reason in architecture.md: {missing}"


def test_every_metric_is_in_the_operations_guide() -> None:
    """docs/operations.md's table names every family /metrics serves, and no other."""
    import re
    from types import SimpleNamespace
    from typing import Any

    from chazbot.metrics import REGISTRY
    from chazbot.transports.http import GuardCollector, SyncCollector

    served = {family.name for family in REGISTRY.collect()}
    no_sync: Any = SimpleNamespace(
        counters=lambda: {"sent": 0}, requests_refused=lambda: {"auth": 0}, replicator=None
    )
    served |= {family.name for family in SyncCollector(no_sync).collect()}
    served |= {family.name for family in GuardCollector(list).collect()}
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    table = text.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(chazbot_\w+)`", table, re.MULTILINE))
    assert documented == served


# ---- paths the docs and benches cite exist ---------------------------------------------------

CITING = ("docs/*.md", "README.md", "bench/*.py")
ROOTED = re.compile(r"(?<![\w./-])((?:chazbot|bench|tests|docs|deploy)/[\w.*/-]*[\w*])")
"""A path from the repository's root: ``chazbot/peer.py``, ``tests/support/standin_*.py``,
``deploy/``."""
FILE_LIKE = re.compile(
    r"(?<![\w./:~-])((?:[\w-][\w.-]*/)+[\w.-]*\.(?:py|md|sh|ya?ml|toml|json|jsonl))\b"
)
"""Any other ``dir/file.ext``: a module cited from chazbot/ (``memory/view.py``), a note."""
NOT_PATHS = {
    ("bench/time_aware.py", "bench/random"): "a memory view's name, not a file",
    (
        "docs/web.md",
        "tests/screenshots",
    ): "written by tests/browser/test_web_browser.py, ignored by git",
    ("docs/architecture.md", "reminders/muted.py"): "the made-up table of the how-to walk",
}


def cited_paths(text: str) -> list[tuple[int, str]]:
    """(line, path) of every path-like reference in ``text``."""
    found: set[tuple[int, str]] = set()
    for pattern in (ROOTED, FILE_LIKE):
        for match in pattern.finditer(text):
            found.add((text.count("\n", 0, match.start()) + 1, match.group(1)))
    return sorted(found)


def exists(cited: str, where: Path) -> bool:
    """Whether ``cited`` names something in the repository: from its root, from chazbot/
    (how the docs name modules), or beside the citing file; a glob matches something."""
    for base in (ROOT, ROOT / "chazbot", where.parent):
        if "*" in cited:
            if any(base.glob(cited)):
                return True
        elif (base / cited).exists():
            return True
    return False


def test_the_path_finder_finds_paths() -> None:
    text = (
        "see `chazbot/peer.py`, memory/view.py and notes/gone.md;\n"
        "run bench/recall.py. https://example.org/a/b.md is no path\n"
    )
    assert cited_paths(text) == [
        (1, "chazbot/peer.py"),
        (1, "memory/view.py"),
        (1, "notes/gone.md"),
        (2, "bench/recall.py"),
    ]
    assert [p for _, p in cited_paths(text) if not exists(p, ROOT / "docs/x.md")] == [
        "notes/gone.md"
    ]


def test_docs_and_benches_cite_only_paths_that_exist() -> None:
    """docs/*.md, README.md and bench/*.py name no repository path that is not there (they
    cited notes/retrieval-measurements.md, never in the repository; #38)."""
    missing = []
    for pattern in CITING:
        for path in sorted(ROOT.glob(pattern)):
            shown = path.relative_to(ROOT).as_posix()
            for line, cited in cited_paths(path.read_text(encoding="utf-8")):
                if (shown, cited) not in NOT_PATHS and not exists(cited, path):
                    missing.append(f"{shown}:{line}: {cited}")
    assert missing == []

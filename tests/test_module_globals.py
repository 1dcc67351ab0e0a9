"""No module-level value is reassigned from outside its module (the house rule, #38).

Tuning is passed in (``RankingSettings``, ``RecallTuning``), never a module global that a
bench or another module flips: ``mod.NAME = …``, ``mod.NAME += …``, ``del mod.NAME``,
``setattr(mod, …)`` or ``delattr(mod, …)`` where ``mod`` is an imported module, anywhere in
``chazbot/``, ``bench/`` or ``tests/``. Read from the source with ``ast``, so a line that
never runs is caught too. In tests, pytest's ``monkeypatch.setattr`` (undone when the test
ends) may still swap a module's value for a stand-in, but not a tuning value that has moved
into a settings object: those are passed in like the product passes them.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREES = ("chazbot", "bench", "tests")
SETTINGS_FIELDS = frozenset(
    {
        # RankingSettings (chazbot/memory/view.py) and RecallTuning (chazbot/agent/recall.py)
        *("MIN_CANDIDATES", "CANDIDATES_PER_RESULT", "DENSE_WEIGHT", "TIME_AWARE"),
        *("DATE_WINDOW", "newest_first", "ONE_QUERY_VECTOR", "RECENT_MESSAGES"),
        *("QUERY_TOKENS", "FOCUS_DEPTH", "MAX_STATEMENT_WORDS"),
    }
)
"""Names a test may not monkeypatch on a module: they are fields of a settings object."""


def _is_module(dotted: str, here: Path) -> bool:
    """Whether ``dotted`` names a module, found on disk without importing anything: the
    repository's packages, the file's own directory (bench scripts import their neighbours),
    or an installed package's files."""
    parts = dotted.split(".")
    for base in (ROOT, here):
        path = base.joinpath(*parts)
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return True
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name: nothing is imported
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    if len(parts) == 1:
        return True
    for location in spec.submodule_search_locations or ():
        path = Path(location).joinpath(*parts[1:])
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return True
        if any(path.parent.glob(f"{path.name}.*.so")):
            return True
    return False


def module_names(tree: ast.AST, file: Path) -> set[str]:
    """The names the file binds to modules (``import a.b`` binds ``a``; ``import a.b as m``
    and ``from a import b`` where ``a.b`` is a module bind ``m`` and ``b``), in any scope."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if _is_module(f"{node.module}.{alias.name}", file.parent):
                    names.add(alias.asname or alias.name)
    return names


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(node: ast.AST) -> Iterator[ast.expr]:
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _flatten(target)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        yield node.target
    elif isinstance(node, ast.Delete):
        for target in node.targets:
            yield from _flatten(target)
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        yield from _flatten(node.target)
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        for item in node.items:
            if item.optional_vars is not None:
                yield from _flatten(item.optional_vars)


def _flatten(target: ast.expr) -> Iterator[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _flatten(element)
    elif isinstance(target, ast.Starred):
        yield from _flatten(target.value)
    else:
        yield target


def reassignments(source: str, file: Path) -> list[str]:
    """Every place ``source`` reassigns a value of an imported module, as ``line: text``."""
    tree = ast.parse(source, str(file))
    modules = module_names(tree, file)
    found: list[str] = []
    for node in ast.walk(tree):
        for target in _targets(node):
            if isinstance(target, ast.Attribute) and _root(target) in modules:
                found.append(f"{node.lineno}: {ast.unparse(target)} reassigned")
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func, first = node.func, node.args[0]
        if isinstance(func, ast.Name) and func.id in ("setattr", "delattr"):
            if _root(first) in modules:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(func, ast.Attribute)
            and func.attr == "setattr"
            and len(node.args) >= 2
            and _root(first) in modules
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in SETTINGS_FIELDS
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)} (a settings field: pass it in)")
    return found


def python_files() -> Iterator[Path]:
    for tree in TREES:
        yield from sorted((ROOT / tree).rglob("*.py"))


def test_no_module_value_is_reassigned_from_outside_its_module() -> None:
    offences = []
    for file in python_files():
        where = file.relative_to(ROOT)
        offences += [f"{where}:{line}" for line in reassignments(file.read_text("utf-8"), file)]
    assert not offences, "module values reassigned from outside:\n" + "\n".join(offences)


def test_the_check_catches_each_way_of_flipping_a_module_value(tmp_path: Path) -> None:
    here = ROOT / "bench" / "example.py"
    flips = {
        "import chazbot.memory.view as view_module\nview_module.DENSE_WEIGHT = 2.0": 1,
        "from chazbot.memory import view\nview.MIN_CANDIDATES += 1": 1,
        "import chazbot.agent.recall\nchazbot.agent.recall.ONE_QUERY_VECTOR = False": 1,
        "from chazbot.memory import view as v\nsaved, v.newest_first = v.newest_first, None": 1,
        "from chazbot.memory import current\ndef f():\n    current.MAX_STATEMENT_WORDS = 3": 1,
        "def f():\n    from chazbot.memory import view\n    setattr(view, 'TIME_AWARE', 0)": 1,
        "import numpy\ndel numpy.pi": 1,
        "import locomo\nlocomo.RRF_K = 1": 1,  # a bench's neighbour script
        "from chazbot.memory import view\nmonkeypatch.setattr(view, 'DATE_WINDOW', 1)": 1,
        # not a module: an object, a class, a local name, a read, a swapped stand-in
        "from chazbot.memory.view import MemoryView\nMemoryView.x = 1": 0,
        "from chazbot.memory.view import RRF_K\nk = RRF_K": 0,
        "import chazbot\npeer = chazbot.open\npeer.x = 1": 0,
        "from chazbot.memory import engine\nmonkeypatch.setattr(engine, 'TIMEOUT_S', 0.1)": 0,
        "embedder.embed_query = counted": 0,
    }
    for source, expected in flips.items():
        assert len(reassignments(source, here)) == expected, source

"""No module-level value is reassigned from outside its module (the house rule, #38).

Tuning is passed in (``RankingSettings``, ``RecallTuning``, ``HealthTiming``, ``BankLimits``,
``SearchTuning``, ``LayoutTuning``), never a module global that a
bench or another module flips: ``mod.NAME = …``, ``mod.NAME += …``, ``del mod.NAME``,
``setattr(mod, …)`` or ``delattr(mod, …)`` where ``mod`` names one of this repository's
modules in that scope (a library's own settings, ``numba.config``, are its interface),
anywhere in ``chazbot/``, ``bench/`` or ``tests/``. Read from the source with ``ast``, so a
line that never runs is caught too. In tests, pytest's ``monkeypatch.setattr`` (undone when the test
ends) may still swap a module's value for a stand-in, but not a tuning value that has moved
into a settings object: those are passed in like the product passes them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREES = ("chazbot", "bench", "tests")
SETTINGS_FIELDS = frozenset(
    {
        # RankingSettings (chazbot/memory/view.py) and RecallTuning (chazbot/agent/recall.py)
        *("MIN_CANDIDATES", "CANDIDATES_PER_RESULT", "DENSE_WEIGHT", "TIME_AWARE"),
        *("DATE_WINDOW", "newest_first", "ONE_QUERY_VECTOR", "RECENT_MESSAGES"),
        *("QUERY_TOKENS", "FOCUS_DEPTH", "MAX_STATEMENT_WORDS"),
        # HealthTiming (chazbot/transports/http.py)
        *("HEALTH_CACHE_S", "HEALTH_FAIL_CACHE_S", "LLM_CACHE_S", "MATRIX_STALE_S"),
        # BankLimits (chazbot/memory/banks.py), SearchTuning (chazbot/memory/bm25.py) and its
        # LayoutTuning (chazbot/memory/bm25_postings.py)
        *("BANKS_TOTAL", "BANKS_PER_PERSON", "MIN_DOCS", "_DIRECT_ALLOWED"),
        *("_COMPACT_MIN", "_DENSE_MIN", "_DENSE_SHARE", "_DENSE_BIG", "_U16_MAX"),
    }
)
"""Names a test may not monkeypatch on a module: they are fields of a settings object."""


SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _is_module(dotted: str, here: Path) -> bool:
    """Whether ``dotted`` names one of this repository's modules (``chazbot``, ``tests``, or
    a bench script's neighbour, as bench scripts import them), found on disk without
    importing anything. A library's own settings (``numba.config``, ``sys.argv``) are its
    interface, not our modules' values."""
    parts = dotted.split(".")
    for base in (ROOT, here):
        path = base.joinpath(*parts)
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return True
    return False


def _own(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``scope`` itself: nested functions and classes are scopes of their own
    (yielded, but not entered)."""
    for child in ast.iter_child_nodes(scope):
        yield child
        if not isinstance(child, SCOPES):
            yield from _own(child)


def _bindings(scope: ast.AST, file: Path) -> dict[str, bool]:
    """The names ``scope`` binds, each with whether it is bound to one of our modules
    (``import a.b`` binds ``a``; ``import a.b as m`` and ``from a import b``, where ``a.b``
    is a module, bind ``m`` and ``b``); another binding of a name (an argument, an
    assignment) shadows a module of an outer scope."""
    names: dict[str, bool] = {}
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
            if arg is not None:
                names[arg.arg] = False
    for node in _own(scope):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                name = alias.asname or top
                dotted = alias.name if alias.asname else top
                names[name] = names.get(name, False) or _is_module(dotted, file.parent)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}" if node.module else alias.name
                ours = node.level == 0 and _is_module(dotted, file.parent)
                name = alias.asname or alias.name
                names[name] = names.get(name, False) or ours
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.setdefault(node.id, False)
        elif isinstance(node, (*SCOPES[:2], ast.ClassDef, ast.ExceptHandler)) and node.name:
            names.setdefault(node.name, False)
    return names


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(node: ast.AST) -> Iterator[ast.expr]:
    if isinstance(node, (ast.Assign, ast.Delete)):
        for target in node.targets:
            yield from _flatten(target)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        yield node.target
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


def _offences(node: ast.AST, is_module: Callable[[str | None], bool]) -> Iterator[str]:
    for target in _targets(node):
        if isinstance(target, ast.Attribute) and is_module(_root(target)):
            yield f"{ast.unparse(target)} reassigned"
    if not isinstance(node, ast.Call) or not node.args:
        return
    func, first = node.func, node.args[0]
    if isinstance(func, ast.Name) and func.id in ("setattr", "delattr"):
        if is_module(_root(first)):
            yield ast.unparse(node)
    elif (
        isinstance(func, ast.Attribute)
        and func.attr == "setattr"
        and len(node.args) >= 2
        and is_module(_root(first))
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value in SETTINGS_FIELDS
    ):
        yield f"{ast.unparse(node)} (a settings field: pass it in)"


def reassignments(source: str, file: Path) -> list[str]:
    """Every place ``source`` reassigns a value of one of our modules, as ``line: what``."""
    found: list[str] = []

    def visit(scope: ast.AST, chain: list[dict[str, bool]]) -> None:
        chain = [_bindings(scope, file), *chain]

        def is_module(name: str | None) -> bool:
            bound = next((names[name] for names in chain if name in names), False)
            return name is not None and bound

        for node in _own(scope):
            if isinstance(node, SCOPES):
                visit(node, chain)
            else:
                line = getattr(node, "lineno", 0)
                found.extend(f"{line}: {o}" for o in _offences(node, is_module))

    visit(ast.parse(source, str(file)), [])
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


def test_the_check_catches_each_way_of_flipping_a_module_value() -> None:
    here = ROOT / "bench" / "example.py"
    flips = {
        "import chazbot.memory.view as view_module\nview_module.DENSE_WEIGHT = 2.0": 1,
        "from chazbot.memory import view\nview.MIN_CANDIDATES += 1": 1,
        "import chazbot.agent.recall\nchazbot.agent.recall.ONE_QUERY_VECTOR = False": 1,
        "from chazbot.memory import view as v\nsaved, v.newest_first = v.newest_first, None": 1,
        "from chazbot.memory import current\ndef f():\n    current.MAX_STATEMENT_WORDS = 3": 1,
        "def f():\n    from chazbot.memory import view\n    setattr(view, 'TIME_AWARE', 0)": 1,
        "import chazbot.memory.current as c\ndel c.SAME_SUBJECT": 1,
        "import locomo\nlocomo.RRF_K = 1": 1,  # a bench's neighbour script
        "from chazbot.memory import view\nmonkeypatch.setattr(view, 'DATE_WINDOW', 1)": 1,
        "from chazbot.memory import banks\nmonkeypatch.setattr(banks, 'BANKS_TOTAL', 5)": 1,
        "from chazbot.memory import bm25_kernel as k\nmp.setattr(k, 'MIN_DOCS', 0)": 1,
        # not a module: an object, a class, a local name, a read, a swapped stand-in
        "from chazbot.memory.view import MemoryView\nMemoryView.x = 1": 0,
        "from chazbot.memory.view import RRF_K\nk = RRF_K": 0,
        "import chazbot\npeer = chazbot.open\npeer.x = 1": 0,
        "from chazbot.memory import engine\nmonkeypatch.setattr(engine, 'TIMEOUT_S', 0.1)": 0,
        "embedder.embed_query = counted": 0,
        "from chazbot.memory import engine\ndef f(engine):\n    engine.snapshot_min_rows = 1": 0,
        "import numba\nnumba.config.CACHE_DIR = 'x'": 0,  # a library's own settings
    }
    for source, expected in flips.items():
        assert len(reassignments(source, here)) == expected, source

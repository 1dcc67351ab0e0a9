"""``tests/`` mirrors ``chazbot/`` (#49): a test file sits in the folder of the package it tests,
in ``tests/matrix/``, ``tests/browser/`` or ``tests/deploy/`` by what it needs, or at the top
when it tests a top-level module or the whole tree (``deploy/tests_layout.py``'s ``TOP``).
A branch that still adds flat files fails here: ``python deploy/tests_layout.py`` places them."""

from __future__ import annotations

import importlib.util
from typing import Any

from tests.support.paths import ROOT, TESTS

BY_NEED = {"matrix", "browser", "deploy", "support", "data"}


def layout() -> Any:
    spec = importlib.util.spec_from_file_location("tests_layout", ROOT / "deploy/tests_layout.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_the_tests_of_the_whole_tree_sit_at_the_top() -> None:
    top = {f"test_{name}.py" for name in layout().TOP}
    flat = {p.name for p in TESTS.glob("test_*.py")}
    assert flat <= top, f"run python deploy/tests_layout.py to place {sorted(flat - top)}"
    helpers = {p.name for p in TESTS.glob("*.py")} - flat - {"__init__.py", "conftest.py"}
    assert helpers == set(), f"shared helpers go to tests/support/: {sorted(helpers)}"


def test_every_folder_mirrors_a_package_or_says_what_its_tests_need() -> None:
    folders = {
        p.relative_to(TESTS).as_posix()
        for p in TESTS.rglob("*")
        if p.is_dir() and p.name not in {"__pycache__", "screenshots"} and p.name[0] != "."
    }
    mirrored = {f for f in folders if f.split("/")[0] not in BY_NEED}
    packages = {
        p.relative_to(ROOT / "chazbot").as_posix()
        for p in (ROOT / "chazbot").rglob("*")
        if (p / "__init__.py").exists()
    }
    assert mirrored <= packages, sorted(mirrored - packages)
    for folder in folders - {"data"}:
        assert (TESTS / folder / "__init__.py").exists(), folder

"""The repository's paths, for tests at any depth of ``tests/``."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
"""``tests/support/``: scripts the tests run (``mcp_demo_server.py``, ``crash_writer.py``)."""
TESTS = SUPPORT.parent
ROOT = TESTS.parent
DATA = TESTS / "data"
"""``tests/data/``: the sentence and answer sets the tests and ``bench/`` read."""

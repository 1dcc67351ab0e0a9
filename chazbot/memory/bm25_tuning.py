"""When a BM25 search takes which path, and the postings layout's size thresholds: measured
values, passed in (``BM25Index(tuning=)``), never module globals a test flips. Tests build
their own so a small index reaches every path (``tests/memory/test_bm25.py``, ``TINY``)."""

from __future__ import annotations

from dataclasses import dataclass

from chazbot.memory.bm25_kernel import MIN_DOCS


@dataclass(frozen=True)
class LayoutTuning:
    """The layout's size thresholds, passed in (``Postings(tuning)``, ``SearchTuning.layout``);
    tests shrink them so tiny corpora take every code path, never flip a module global."""

    compact_min: int = 4096
    """Tombstones (and moved-out regions, times 16) tolerated before compacting, whatever
    the size."""
    dense_min: int = 4096
    """A term gets a dense tf map once its list holds this many postings ..."""
    dense_share: int = 32
    """... and this share (one in ``dense_share``) of the slots."""
    dense_big: int = 255
    """The dense map's value meaning "tf >= this, read the postings" (at most 255: uint8)."""
    u16_max: int = 65535
    """Postings keep tf in 16 bits until some tf is larger (at most 65535)."""


DEFAULT_LAYOUT = LayoutTuning()


@dataclass(frozen=True)
class SearchTuning:
    """When a search takes which path: measured values, passed in (``BM25Index(tuning=)``);
    tests build their own to reach every path with a small index, never flip a module global."""

    direct_allowed: int = 2048
    """An ``allowed`` set this small is scored directly instead of through the postings."""
    compiled_from: int = MIN_DOCS
    """An index of this many documents uses the compiled loop (``bm25_kernel.loop``)."""
    layout: LayoutTuning = DEFAULT_LAYOUT
    """The postings layout's size thresholds (``bm25_postings.Postings``)."""


DEFAULT_SEARCH_TUNING = SearchTuning()

"""What the ledger's steps hand back, and the bounds a writer elsewhere is held to.

``Row`` is a materialised table row; ``Applied`` is what one write or ingest changed (handed
to listeners after commit); ``IngestResult`` says which arrivals were taken; ``KeptLimits``
bounds what a hostile or late writer can make a peer keep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chazbot.ledger.entry import Entry


@dataclass(frozen=True)
class KeptLimits:
    """What a hostile or late writer can make a peer keep: measured bounds, passed in
    (``Ledger.open(limits=)``), never a module global a test flips."""

    soft_failed: int = 1000
    """Entries soft-failed on arrival (their author's write was taken away before they came)
    that an entry of a key holding write builds on, kept per key, database and revocation
    (the auth entry deciding the key's current grant)."""
    soft_failed_bytes: int = 8 * 1024 * 1024
    """The same, in bytes."""
    limbo_bytes_per_key: int = 4 * 1024 * 1024
    """Refused soft-failed entries kept on disk a while, in case an entry built on one arrives
    later (a writer that had not yet heard of the revocation): per key…"""
    limbo_bytes: int = 32 * 1024 * 1024
    """…and in all."""
    limbo_rounds: int = 4
    """Rounds of taking in limbo entries whose author may write again, in one ingest."""


DEFAULT_LIMITS = KeptLimits()


@dataclass(frozen=True)
class Row:
    """A materialised table row."""

    n: int
    db: str
    store: str
    row_id: str
    entry_id: str
    author: str
    ts: int
    height: int
    data: dict[str, Any]


@dataclass
class Applied:
    """What one write or ingest changed, handed to listeners (indexes) after commit.

    ``reset_dbs``: databases where rows were hidden or shown again (a revocation, or a grant
    that undid one); a view of such a database must be rebuilt from ``Ledger.rows``.
    """

    entries: list[Entry] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    fields: list[tuple[str, str, str]] = field(default_factory=list)  # (db, store, field)
    auth_dbs: set[str] = field(default_factory=set)
    reset_dbs: set[str] = field(default_factory=set)


@dataclass
class IngestResult:
    accepted: list[str] = field(default_factory=list)
    duplicates: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (entry id or "?", reason)
    soft_failed: int = 0


Undo = Callable[[], object]
"""Takes back one in-memory effect of a step whose transaction is rolled back."""

"""The entry log as sync reads it: heads, entries after a local seq, which ids are known.

Local seq order is topological (an entry is stored only after its parents), so a remote
that reads ``seq > cursor`` in order never meets an entry before its parents. These run on
the ledger's thread (``await ledger.run(read_after, db, …)``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from chazbot.errors import NotFound
from chazbot.ledger.core import LedgerCore


@dataclass(frozen=True)
class Heads:
    """A database's tips, entry count and highest local seq, read in one snapshot."""

    db: str
    tips: list[str]
    count: int
    max_seq: int


def read_heads(core: LedgerCore, db: str, before: Heads | None = None) -> Heads:
    """The heads of ``db``; with ``before`` (an earlier answer) only newer entries are counted."""
    tips = sorted(core.tips.of(db))
    if not tips:
        raise NotFound(f"no database {db}")
    since, base = (before.max_seq, before.count) if before is not None else (0, 0)
    count, max_seq = core.conn.execute(
        "SELECT count(*), coalesce(max(seq), ?) FROM entries WHERE db = ? AND seq > ?",
        (since, db, since),
    ).fetchone()
    return Heads(db, tips, base + int(count), int(max_seq))


def read_after(
    core: LedgerCore, db: str, after: int, limit: int, max_bytes: int
) -> tuple[list[tuple[int, str, bytes]], bool]:
    """Entries (seq, id, data) of ``db`` with ``seq > after`` in seq order, and whether more.

    Stops at ``limit`` entries or once ``max_bytes`` of data are taken (at least one entry).
    Local seq order is topological: an entry is stored only after its parents.
    """
    cur = core.conn.execute(
        "SELECT seq, id, data FROM entries WHERE db = ? AND seq > ? ORDER BY seq LIMIT ?",
        (db, after, limit + 1),
    )
    out: list[tuple[int, str, bytes]] = []
    size = 0
    for seq, eid, data in cur:
        if len(out) >= limit or (out and size + len(data) > max_bytes):
            return out, True
        out.append((int(seq), str(eid), bytes(data)))
        size += len(data)
    return out, False


def read_ids_after(core: LedgerCore, db: str, after: int, limit: int) -> list[tuple[int, str]]:
    cur = core.conn.execute(
        "SELECT seq, id FROM entries WHERE db = ? AND seq > ? ORDER BY seq LIMIT ?",
        (db, after, limit),
    )
    return [(int(seq), str(eid)) for seq, eid in cur]


def read_known(core: LedgerCore, db: str, ids: list[str]) -> set[str]:
    """Which of ``ids`` are stored entries of ``db``."""
    cur = core.conn.execute(
        "SELECT id FROM entries WHERE db = ? AND id IN (SELECT value FROM json_each(?))",
        (db, json.dumps(ids)),
    )
    return {str(row[0]) for row in cur}

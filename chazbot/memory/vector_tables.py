"""The vector queue's own peer-local tables (never synced) and their typed store.

- ``vectors_owed``: a database that owes vectors for the rows stored after row number
  ``after``, written by the key ``by`` (a mark ``OwedMarks`` sets before the first such row
  is stored, so a crash leaves them owed);
- ``vectors_owed_text``: the text of a row still waiting at a stop, by database and row id;
- ``vectors_text``: per database, the text version (``EMBED_TEXT_VERSION``) its vectors were
  all rewritten to (or found at);
- ``vectors_text_since``: one row, since which row number this peer's vectors are of which
  text version.

Declared as one ``LocalTable`` (``VECTORS``) that the ledger brings up to date on its
connection and thread; every method is one step there. Up to this table these records lived
in the ledger's untyped ``local_kv`` (``vectors-owed/<db>``, ``vectors-owed-text/<db>/<row
id>``, ``vectors-text``, ``vectors-text/<db>``): the last step moves them here, so an existing
state dir keeps what it owes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chazbot.ledger.core import LedgerCore
from chazbot.ledger.ledger import Ledger
from chazbot.ledger.tables import LocalTable, prefix_range

_OLD_OWED = "vectors-owed/"
_OLD_TEXT = "vectors-owed-text/"
_OLD_SINCE = "vectors-text"
_OLD_DONE = "vectors-text/"


@dataclass(frozen=True)
class Mark:
    """A row of ``vectors_owed``: rows of ``db`` stored after ``after``, written by ``by``."""

    db: str
    after: int
    by: str


def _old_mark(value: str) -> tuple[int, str]:
    """An old mark's JSON as its columns; a damaged one owes from row 0 (the whole database),
    as it was read before."""
    try:
        data = json.loads(value)
        return int(data["after"]), str(data["by"])
    except (ValueError, KeyError, TypeError):
        return 0, ""


def _old_since(value: str) -> tuple[int, int] | None:
    try:
        data = json.loads(value)
        return int(data["version"]), int(data["before"])
    except (ValueError, KeyError, TypeError):
        return None


def _moved(conn: sqlite3.Connection, prefix: str) -> list[tuple[str, str]]:
    """The ``local_kv`` rows under ``prefix``, taken out of it."""
    lo, hi = prefix_range(prefix)
    rows = conn.execute(
        "SELECT key, value FROM local_kv WHERE key >= ? AND key < ?", (lo, hi)
    ).fetchall()
    conn.execute("DELETE FROM local_kv WHERE key >= ? AND key < ?", (lo, hi))
    return [(str(k)[len(prefix) :], str(v)) for k, v in rows]


def _from_local_kv(conn: sqlite3.Connection) -> None:
    """Move the vector records kept in ``local_kv`` into the tables."""
    for key, value in _moved(conn, _OLD_TEXT):
        db, _, row = key.partition("/")
        if row:
            conn.execute(
                "INSERT OR REPLACE INTO vectors_owed_text (db, row_id, text) VALUES (?, ?, ?)",
                (db, row, value),
            )
    for db, value in _moved(conn, _OLD_OWED):
        conn.execute(
            "INSERT OR REPLACE INTO vectors_owed (db, after, by) VALUES (?, ?, ?)",
            (db, *_old_mark(value)),
        )
    for db, value in _moved(conn, _OLD_DONE):
        if value.isdigit():
            conn.execute(
                "INSERT OR REPLACE INTO vectors_text (db, version) VALUES (?, ?)", (db, int(value))
            )
    row = conn.execute("SELECT value FROM local_kv WHERE key = ?", (_OLD_SINCE,)).fetchone()
    if row is not None:
        since = _old_since(str(row[0]))
        if since is not None:
            conn.execute(
                "INSERT INTO vectors_text_since (one, version, before) VALUES (1, ?, ?)", since
            )
        conn.execute("DELETE FROM local_kv WHERE key = ?", (_OLD_SINCE,))


VECTORS = LocalTable(
    "memory.vectors",
    ("vectors_owed", "vectors_owed_text", "vectors_text", "vectors_text_since"),
    (
        "CREATE TABLE vectors_owed (db TEXT PRIMARY KEY, after INTEGER NOT NULL,"
        " by TEXT NOT NULL) WITHOUT ROWID",
        "CREATE TABLE vectors_owed_text (db TEXT NOT NULL, row_id TEXT NOT NULL,"
        " text TEXT NOT NULL, PRIMARY KEY (db, row_id)) WITHOUT ROWID",
        "CREATE TABLE vectors_text (db TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID",
        "CREATE TABLE vectors_text_since (one INTEGER PRIMARY KEY CHECK (one = 1),"
        " version INTEGER NOT NULL, before INTEGER NOT NULL)",
        _from_local_kv,
    ),
)


class VectorRecords:
    """The typed store over ``VECTORS``."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    async def _run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return await self._ledger.run_in(
            VECTORS, lambda core: core.conn.execute(sql, params).fetchall()
        )

    async def add_mark(self, mark: Mark, replace: bool) -> Mark:
        """Store ``mark`` (``replace``: over one stored; else a stored one stands); return the
        mark stored now."""

        def write(core: LedgerCore) -> Mark:
            verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
            core.conn.execute(
                f"{verb} INTO vectors_owed (db, after, by) VALUES (?, ?, ?)",
                (mark.db, mark.after, mark.by),
            )
            after, by = core.conn.execute(
                "SELECT after, by FROM vectors_owed WHERE db = ?", (mark.db,)
            ).fetchone()
            return Mark(mark.db, int(after), str(by))

        return await self._ledger.run_in(VECTORS, write)

    async def marks(self) -> list[Mark]:
        rows = await self._run("SELECT db, after, by FROM vectors_owed ORDER BY db")
        return [Mark(str(db), int(after), str(by)) for db, after, by in rows]

    async def drop(self, db: str) -> None:
        """``db``'s mark and recorded texts go (one step)."""

        def write(core: LedgerCore) -> None:
            core.conn.execute("DELETE FROM vectors_owed WHERE db = ?", (db,))
            core.conn.execute("DELETE FROM vectors_owed_text WHERE db = ?", (db,))

        await self._ledger.run_in(VECTORS, write)

    async def texts(self, db: str) -> dict[str, str]:
        rows = await self._run("SELECT row_id, text FROM vectors_owed_text WHERE db = ?", (db,))
        return {str(r): str(t) for r, t in rows}

    async def record_texts(self, texts: Sequence[tuple[str, str, str]]) -> None:
        """Record ``(db, row id, text)`` in one step."""
        await self._ledger.run_in(
            VECTORS,
            lambda core: core.conn.executemany(
                "INSERT OR REPLACE INTO vectors_owed_text (db, row_id, text) VALUES (?, ?, ?)",
                list(texts),
            ),
        )

    async def since(self) -> tuple[int, int] | None:
        """``(version, before)``: this peer's vectors are of text ``version`` since row
        number ``before``; None when not recorded."""
        rows = await self._run("SELECT version, before FROM vectors_text_since")
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    async def set_since(self, version: int, before: int) -> None:
        await self._run(
            "INSERT OR REPLACE INTO vectors_text_since (one, version, before) VALUES (1, ?, ?)",
            (version, before),
        )

    async def text_version(self, db: str) -> int | None:
        """The text version ``db``'s vectors were all rewritten to (None: not recorded)."""
        rows = await self._run("SELECT version FROM vectors_text WHERE db = ?", (db,))
        return int(rows[0][0]) if rows else None

    async def set_text_version(self, db: str, version: int) -> None:
        await self._run(
            "INSERT OR REPLACE INTO vectors_text (db, version) VALUES (?, ?)", (db, version)
        )


__all__ = ["VECTORS", "Mark", "VectorRecords"]

"""The Matrix transport's own peer-local tables for what it remembers between runs (``state``).

- ``matrix_sync``: per account, the sync token (``next_batch``) the last commit covered;
- ``matrix_handled``: the ids of the events syncs brought, each with its stamp (the newest
  ``HANDLED_KEEP`` are kept);
- ``matrix_pending``: per account, the jobs not done yet, by slot (``<stamp>:<event id>``,
  so by slot is in order), each the job as JSON and how often it was started;
- ``matrix_undecryptable``: the rooms already told that a message could not be decrypted.

Declared as one ``LocalTable`` (``MATRIX_STATE``) that the ledger brings up to date on its
connection and thread; every method is one step there. Up to this table this state lived in
the ledger's untyped ``local_kv`` under ad-hoc prefixes (``matrix:<account>:next_batch``,
``matrix:handled:<event>``, ``matrix:<account>:job:<slot>``, ``matrix:undecryptable:<room>``):
the last step moves those rows here, so an existing state dir keeps its sync token and its
pending jobs. No matrix-nio here (``transports/tables.py`` lists it for ``chazbot cmd``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from chazbot.ledger.core import LedgerCore
from chazbot.ledger.ledger import Ledger
from chazbot.ledger.tables import LocalTable, prefix_range, transaction

_OLD = "matrix:"
_OLD_HANDLED = "matrix:handled:"
_OLD_UNDECRYPTABLE = "matrix:undecryptable:"
_OLD_TOKEN = ":next_batch"
_OLD_JOB = ":job:"


def _from_local_kv(conn: sqlite3.Connection) -> None:
    """Move the Matrix state kept in ``local_kv`` into the tables (only the keys of the four
    shapes above; a pending job's value that does not read is moved as it is, and dropped
    with a log line at the next load, as it was before)."""
    lo, hi = prefix_range(_OLD)
    rows = conn.execute(
        "SELECT key, value FROM local_kv WHERE key >= ? AND key < ?", (lo, hi)
    ).fetchall()
    moved: list[tuple[str]] = []
    for key, value in rows:
        key, value = str(key), str(value)
        if key.startswith(_OLD_HANDLED):
            conn.execute(
                "INSERT OR REPLACE INTO matrix_handled (event_id, stamp) VALUES (?, ?)",
                (key[len(_OLD_HANDLED) :], value),
            )
        elif key.startswith(_OLD_UNDECRYPTABLE):
            conn.execute(
                "INSERT OR IGNORE INTO matrix_undecryptable (room_id) VALUES (?)",
                (key[len(_OLD_UNDECRYPTABLE) :],),
            )
        elif key.startswith(_OLD + "@") and _OLD_JOB in key:
            at = key.index(_OLD_JOB)
            job, starts = _old_job(value)
            conn.execute(
                "INSERT OR REPLACE INTO matrix_pending (account, slot, job, starts)"
                " VALUES (?, ?, ?, ?)",
                (key[len(_OLD) : at], key[at + len(_OLD_JOB) :], job, starts),
            )
        elif key.startswith(_OLD + "@") and key.endswith(_OLD_TOKEN):
            conn.execute(
                "INSERT OR REPLACE INTO matrix_sync (account, next_batch) VALUES (?, ?)",
                (key[len(_OLD) : -len(_OLD_TOKEN)], value),
            )
        else:
            continue
        moved.append((key,))
    conn.executemany("DELETE FROM local_kv WHERE key = ?", moved)


def _old_job(value: str) -> tuple[str, int]:
    """A pending job's ``local_kv`` value (``{"job": …, "starts": n}``) as its two columns."""
    try:
        data = json.loads(value)
        starts = data["starts"]
        if isinstance(starts, int) and not isinstance(starts, bool):
            return json.dumps(data["job"]), starts
    except (ValueError, KeyError, TypeError):
        pass
    return value, 0


MATRIX_STATE = LocalTable(
    "matrix.state",
    ("matrix_sync", "matrix_handled", "matrix_pending", "matrix_undecryptable"),
    (
        "CREATE TABLE matrix_sync (account TEXT PRIMARY KEY, next_batch TEXT NOT NULL)"
        " WITHOUT ROWID",
        "CREATE TABLE matrix_handled (event_id TEXT PRIMARY KEY, stamp TEXT NOT NULL)"
        " WITHOUT ROWID",
        "CREATE INDEX matrix_handled_stamp ON matrix_handled (stamp)",
        """CREATE TABLE matrix_pending (
            account TEXT NOT NULL, slot TEXT NOT NULL, job TEXT NOT NULL,
            starts INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (account, slot)
        ) WITHOUT ROWID""",
        "CREATE TABLE matrix_undecryptable (room_id TEXT PRIMARY KEY) WITHOUT ROWID",
        _from_local_kv,
    ),
)


@dataclass(frozen=True)
class StoredJob:
    """A row of ``matrix_pending``: the slot, the job as JSON, how often it was started."""

    slot: str
    job: str
    starts: int


@dataclass(frozen=True)
class Loaded:
    """What ``MatrixRecords.load`` reads for one account at a start."""

    token: str | None
    handled: list[str]  # oldest first
    undecryptable: set[str]
    pending: list[StoredJob]  # by slot: oldest first


class MatrixRecords:
    """The typed store over ``MATRIX_STATE`` for one account (``user_id``)."""

    def __init__(self, ledger: Ledger, account: str) -> None:
        self._ledger = ledger
        self.account = account

    async def load(self, handled_keep: int) -> Loaded:
        """The sync token, the newest ``handled_keep`` handled ids, the rooms noticed and the
        pending jobs, read in one step."""

        def read(core: LedgerCore) -> Loaded:
            conn = core.conn
            token = conn.execute(
                "SELECT next_batch FROM matrix_sync WHERE account = ?", (self.account,)
            ).fetchone()
            handled = conn.execute(
                "SELECT event_id FROM matrix_handled ORDER BY stamp DESC LIMIT ?",
                (handled_keep,),
            ).fetchall()
            rooms = conn.execute("SELECT room_id FROM matrix_undecryptable").fetchall()
            pending = conn.execute(
                "SELECT slot, job, starts FROM matrix_pending WHERE account = ? ORDER BY slot",
                (self.account,),
            ).fetchall()
            return Loaded(
                None if token is None else str(token[0]),
                [str(r[0]) for r in reversed(handled)],
                {str(r[0]) for r in rooms},
                [StoredJob(str(s), str(j), int(n)) for s, j, n in pending],
            )

        return await self._ledger.run_in(MATRIX_STATE, read)

    async def commit(
        self,
        token: str,
        handled: Sequence[tuple[str, str]],
        pending: Sequence[StoredJob],
        undecryptable: Sequence[str],
    ) -> None:
        """One transaction: the ``(event id, stamp)`` handled, the new pending jobs, the rooms
        noticed, and last the sync token that covers them (all or none)."""

        def write(core: LedgerCore) -> None:
            conn = core.conn
            with transaction(conn):
                conn.executemany(
                    "INSERT OR REPLACE INTO matrix_handled (event_id, stamp) VALUES (?, ?)",
                    handled,
                )
                conn.executemany(
                    "INSERT OR REPLACE INTO matrix_pending (account, slot, job, starts)"
                    " VALUES (?, ?, ?, ?)",
                    [(self.account, p.slot, p.job, p.starts) for p in pending],
                )
                conn.executemany(
                    "INSERT OR IGNORE INTO matrix_undecryptable (room_id) VALUES (?)",
                    [(room,) for room in undecryptable],
                )
                conn.execute(
                    "INSERT OR REPLACE INTO matrix_sync (account, next_batch) VALUES (?, ?)",
                    (self.account, token),
                )

        await self._ledger.run_in(MATRIX_STATE, write)

    async def started(self, slot: str, starts: int) -> None:
        await self._ledger.run_in(
            MATRIX_STATE,
            lambda core: core.conn.execute(
                "UPDATE matrix_pending SET starts = ? WHERE account = ? AND slot = ?",
                (starts, self.account, slot),
            ),
        )

    async def drop(self, slot: str) -> None:
        """The pending job in ``slot`` is done (or unreadable): it goes."""
        await self._ledger.run_in(
            MATRIX_STATE,
            lambda core: core.conn.execute(
                "DELETE FROM matrix_pending WHERE account = ? AND slot = ?", (self.account, slot)
            ),
        )

    async def prune_handled(self, keep: int) -> int:
        """Keep the newest ``keep`` handled ids; return how many went."""

        def write(core: LedgerCore) -> int:
            cur = core.conn.execute(
                "DELETE FROM matrix_handled WHERE event_id NOT IN"
                " (SELECT event_id FROM matrix_handled ORDER BY stamp DESC LIMIT ?)",
                (keep,),
            )
            return int(cur.rowcount)

        return await self._ledger.run_in(MATRIX_STATE, write)


__all__ = ["MATRIX_STATE", "Loaded", "MatrixRecords", "StoredJob"]

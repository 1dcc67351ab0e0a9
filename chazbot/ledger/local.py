"""The ledger's own peer-local stores: what the ledger keeps for itself, never synced.

- ``KeyValue`` (``local_kv``): small values under text keys, for any layer (sync's log id,
  the Matrix sync token, capture sources…): the ledger's generic store of one value.
- ``LocalKeys`` (``local_keys``): the private keys this file holds; they sign its entries.
- ``HostedIndex`` (``registry``): which of the file's databases it hosts under which local
  name. The ledger holds the databases; this is their directory, used by several layers
  (banks and agents in ``memory/banks.py``, sessions, the ledger's own people DB in
  ``people.py``), so it is the ledger's and no one feature's (the kind is the caller's word).

Every method is one step on the ledger's worker thread (one transaction), reached as
``ledger.kv``, ``ledger.keys`` and ``ledger.hosted``. A feature's own state lives in tables
the feature declares and owns (``ledger/tables.py``), not here.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from chazbot.errors import ConflictError
from chazbot.ledger.core import LedgerCore
from chazbot.ledger.keys import KeyPair
from chazbot.ledger.tables import prefix_range, transaction

T = TypeVar("T")


class _Runs(Protocol):
    async def run(self, fn: Callable[..., T], *args: Any) -> T: ...


class KeyValue:
    """``local_kv``: text values under text keys (the sync token, handled ids, log id…)."""

    def __init__(self, ledger: _Runs) -> None:
        self._ledger = ledger

    async def get(self, key: str) -> str | None:
        def read(core: LedgerCore) -> str | None:
            row = core.conn.execute("SELECT value FROM local_kv WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

        return await self._ledger.run(read)

    async def set(self, key: str, value: str) -> None:
        await self.set_many([(key, value)])

    async def set_many(self, items: Iterable[tuple[str, str]]) -> None:
        """Set every ``(key, value)`` in one transaction (all or none)."""
        pairs = [(str(k), str(v)) for k, v in items]

        def write(core: LedgerCore) -> None:
            with transaction(core.conn):
                core.conn.executemany(
                    "INSERT OR REPLACE INTO local_kv (key, value) VALUES (?, ?)", pairs
                )

        if pairs:
            await self._ledger.run(write)

    async def setdefault(self, key: str, value: str) -> str:
        """The value under ``key``, storing ``value`` first if there is none (one step)."""

        def write(core: LedgerCore) -> str:
            core.conn.execute(
                "INSERT OR IGNORE INTO local_kv (key, value) VALUES (?, ?)", (key, value)
            )
            row = core.conn.execute("SELECT value FROM local_kv WHERE key = ?", (key,))
            return str(row.fetchone()[0])

        return await self._ledger.run(write)

    async def delete(self, key: str) -> None:
        await self._ledger.run(
            lambda core: core.conn.execute("DELETE FROM local_kv WHERE key = ?", (key,))
        )

    async def with_prefix(self, prefix: str, newest: int | None = None) -> list[tuple[str, str]]:
        """``(key, value)`` pairs whose key starts with ``prefix``, by key; with ``newest``,
        only that many with the greatest values, greatest first."""
        lo, hi = prefix_range(prefix)
        params: tuple[Any, ...] = (lo, hi)
        sql = "ORDER BY key"
        if newest is not None:
            sql, params = "ORDER BY value DESC LIMIT ?", (lo, hi, newest)

        def read(core: LedgerCore) -> list[tuple[str, str]]:
            cur = core.conn.execute(
                f"SELECT key, value FROM local_kv WHERE key >= ? AND key < ? {sql}", params
            )
            return [(str(k), str(v)) for k, v in cur]

        return await self._ledger.run(read)

    async def delete_prefix(self, prefix: str, keep_newest: int = 0) -> int:
        """Delete the keys starting with ``prefix`` except the ``keep_newest`` with the
        greatest values; return how many went."""
        lo, hi = prefix_range(prefix)

        def write(core: LedgerCore) -> int:
            cur = core.conn.execute(
                "DELETE FROM local_kv WHERE key >= ? AND key < ? AND key NOT IN (SELECT key"
                " FROM local_kv WHERE key >= ? AND key < ? ORDER BY value DESC LIMIT ?)",
                (lo, hi, lo, hi, keep_newest),
            )
            return int(cur.rowcount)

        return await self._ledger.run(write)


class LocalKeys:
    """``local_keys``: the private keys this peer holds, each with a label (oldest first)."""

    def __init__(self, ledger: _Runs) -> None:
        self._ledger = ledger

    async def add(self, key: KeyPair, label: str) -> None:
        """Keep ``key`` under ``label`` (a key kept already stays as it is)."""
        await self._ledger.run(
            lambda core: core.conn.execute(
                "INSERT OR IGNORE INTO local_keys (pubkey, label, private) VALUES (?, ?, ?)",
                (key.public, label, key.private_bytes()),
            )
        )

    async def first(self, label: str) -> KeyPair | None:
        """The oldest key under ``label``."""

        def read(core: LedgerCore) -> bytes | None:
            cur = core.conn.execute(
                "SELECT private FROM local_keys WHERE label = ? ORDER BY rowid LIMIT 1", (label,)
            )
            row = cur.fetchone()
            return None if row is None else bytes(row[0])

        raw = await self._ledger.run(read)
        return None if raw is None else KeyPair.from_private_bytes(raw)

    async def all(self) -> list[tuple[str, KeyPair]]:
        """Every key with its label, oldest first."""

        def read(core: LedgerCore) -> list[tuple[str, bytes]]:
            cur = core.conn.execute("SELECT label, private FROM local_keys ORDER BY rowid")
            return [(str(label), bytes(private)) for label, private in cur]

        found = await self._ledger.run(read)
        return [(label, KeyPair.from_private_bytes(raw)) for label, raw in found]


@dataclass(frozen=True)
class Hosted:
    """A database this peer hosts under a local name, of a kind its owner chose (a bank, an
    agent's database, a session's, the people DB…)."""

    kind: str
    name: str
    db: str
    data: dict[str, Any]


class HostedIndex:
    """``registry``: the databases this peer hosts by kind and name (names case-insensitive)."""

    def __init__(self, ledger: _Runs) -> None:
        self._ledger = ledger

    async def get(self, kind: str, name: str) -> Hosted | None:
        def read(core: LedgerCore) -> Hosted | None:
            row = core.conn.execute(
                "SELECT name, db, data FROM registry WHERE kind = ? AND name = ? COLLATE NOCASE",
                (kind, name),
            ).fetchone()
            return None if row is None else Hosted(kind, row[0], row[1], json.loads(row[2]))

        return await self._ledger.run(read)

    async def by_db(self, db: str, kinds: tuple[str, ...]) -> Hosted | None:
        """``db``'s entry under one of ``kinds``, if any."""

        def read(core: LedgerCore) -> Hosted | None:
            for kind, name, data in core.conn.execute(
                "SELECT kind, name, data FROM registry WHERE db = ?", (db,)
            ):
                if kind in kinds:
                    return Hosted(kind, name, db, json.loads(data))
            return None

        return await self._ledger.run(read)

    async def all(self, kind: str) -> list[Hosted]:
        def read(core: LedgerCore) -> list[Hosted]:
            cur = core.conn.execute(
                "SELECT name, db, data FROM registry WHERE kind = ? ORDER BY name", (kind,)
            )
            return [Hosted(kind, n, d, json.loads(x)) for n, d, x in cur]

        return await self._ledger.run(read)

    async def add(self, kind: str, name: str, db: str, data: dict[str, Any] | None = None) -> None:
        """Register ``name``; ``ConflictError`` if the kind has it already (in any case)."""
        text = json.dumps(data or {})

        def write(core: LedgerCore) -> None:
            with transaction(core.conn):
                taken = core.conn.execute(
                    "SELECT 1 FROM registry WHERE kind = ? AND name = ? COLLATE NOCASE",
                    (kind, name),
                ).fetchone()
                if taken is None:
                    try:
                        core.conn.execute(
                            "INSERT INTO registry (kind, name, db, data) VALUES (?, ?, ?, ?)",
                            (kind, name, db, text),
                        )
                        return
                    except sqlite3.IntegrityError:
                        pass
            raise ConflictError(f"a {kind} named {name!r} exists already on this peer")

        await self._ledger.run(write)

    async def remove(self, kind: str, name: str) -> None:
        await self._ledger.run(
            lambda core: core.conn.execute(
                "DELETE FROM registry WHERE kind = ? AND name = ? COLLATE NOCASE", (kind, name)
            )
        )


__all__ = ["Hosted", "HostedIndex", "KeyValue", "LocalKeys"]

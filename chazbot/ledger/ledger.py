"""The ledger of one peer: every signed database in one SQLite file, behind an async API.

The file is opened in WAL mode with ``synchronous=FULL`` (a commit is on disk when it
returns) and owner-only permissions. All work on the connection runs on the ledger's own
thread (``worker.Worker``: a thread and a queue; its docstring says why not an executor), one
function at a time, so each write is one atomic step (see ``core``). Writes found queued one
after another (several turns writing at once) share one transaction and one commit, one fsync
(``LedgerCore.write_group``), each in its own savepoint: one that fails is undone alone and
raised to its own caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import json
import logging
import os
import sqlite3
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any, TypeVar

from chazbot.errors import BackendError, ConflictError, InputError, IntegrityError, NotFound
from chazbot.ledger import rebuild
from chazbot.ledger.auth import AUTH_STORE, KeyGrant, Permission, auth_op, permission_of
from chazbot.ledger.core import LedgerCore
from chazbot.ledger.entry import Entry
from chazbot.ledger.keys import KeyPair
from chazbot.ledger.local import HostedIndex, KeyValue, LocalKeys
from chazbot.ledger.records import DEFAULT_LIMITS, Applied, IngestResult, KeptLimits, Row
from chazbot.ledger.schema import migrate
from chazbot.ledger.tables import LocalTable, migrate_table, migrate_tables, unique
from chazbot.ledger.worker import Worker

T = TypeVar("T")
log = logging.getLogger(__name__)
Listener = Callable[[Applied], None]


def _open_file(path: Path) -> sqlite3.Connection:
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
    os.chmod(path, 0o600)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=10000")
    except BaseException:
        conn.close()
        raise
    return conn


class Ledger:
    """Signed, append-only databases in one SQLite file."""

    def __init__(self, path: Path, worker: Worker, core: LedgerCore) -> None:
        self.path = path
        self._worker = worker
        self._core = core
        self._listeners: list[Listener] = []
        # read caches, invalidated by every commit that touches them (one writer: this object)
        self._auth_cache: dict[str, dict[str, KeyGrant]] = {}
        self._fields_cache: dict[tuple[str, str], dict[str, Any]] = {}
        self._epoch = 0  # bumped by every commit; a read that raced one is not cached
        # the ledger's own peer-local stores (never synced): see ``local``
        self.kv = KeyValue(self)
        self.keys = LocalKeys(self)
        self.hosted = HostedIndex(self)
        self._owned: dict[str, LocalTable] = {}  # features' tables migrated on this file

    @classmethod
    async def open(
        cls,
        path: str | Path,
        tables: Iterable[LocalTable] = (),
        limits: KeptLimits = DEFAULT_LIMITS,
    ) -> Ledger:
        """Open (or create) the state file and bring it up to date: the ledger's schema and
        the given features' tables (``ledger/tables.py``; others on first use). ``limits``:
        what a late or hostile writer can make it keep (``KeptLimits``, the measured bounds)."""
        file = Path(path)
        wanted = _claims(unique(tables))
        worker = Worker(f"ledger {file.name}", (LedgerCore.write_each, LedgerCore.write_group))
        try:
            core = await worker.run(_open_core, file, wanted, limits)
        except BaseException as exc:
            await worker.stop()  # nothing is open (``_open_core`` closes what it opened)
            if isinstance(exc, sqlite3.DatabaseError):
                raise BackendError(f"cannot open state file {file}: {exc}") from exc
            raise
        for eid, why in core.load_errors:
            log.error("damaged auth entry %s (run chazbot verify): %s", eid, why)
        ledger = cls(file, worker, core)
        ledger._owned.update((t.name, t) for t in wanted)
        return ledger

    async def close(self) -> None:
        """Close the file and end the worker thread (idempotent)."""
        if not self._worker.stopped:
            await self._worker.run(lambda: self._core.conn.close())
        await self._worker.stop()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(core, *args)`` on the ledger's thread (one atomic step)."""
        return await self._worker.run(fn, self._core, *args)

    async def table(self, table: LocalTable) -> None:
        """Bring ``table``'s feature tables up to date in this file (once per open ledger;
        each step in its own transaction, see ``ledger/tables.py``)."""
        known = self._owned.get(table.name)
        if known is not None:
            if known != table:
                raise ConflictError(f"two different local tables are named {table.name}")
            return
        _claims(unique([*self._owned.values(), table]))  # one owner per SQL table
        await self.run(lambda core: migrate_table(core.conn, table))
        self._owned[table.name] = table

    async def run_in(self, table: LocalTable, fn: Callable[..., T], *args: Any) -> T:
        """``run`` for a feature's store: its tables are made first if they are not yet."""
        if self._owned.get(table.name) is not table:
            await self.table(table)
        return await self._worker.run(fn, self._core, *args)

    def tables(self) -> list[LocalTable]:
        """The features' tables this ledger has brought up to date so far."""
        return list(self._owned.values())

    async def _commit(self, fn: Callable[..., Applied], *args: Any) -> Applied:
        """Run a writing step; its listeners hear of it as soon as it commits, in the loop,
        even when the caller is cancelled meanwhile (the step runs to its end regardless)."""
        return await self._worker.run(fn, self._core, *args, then=self._notify)

    def add_listener(self, listener: Listener) -> None:
        """``listener(applied)`` runs in the event loop after every successful commit."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling ``listener`` (no error if it was not added)."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def _notify(self, applied: Applied) -> None:
        self._epoch += 1
        for db in applied.auth_dbs:
            self._auth_cache.pop(db, None)
        for db, store, _ in applied.fields:
            self._fields_cache.pop((db, store), None)
        if applied.entries:
            for listener in list(self._listeners):
                try:
                    listener(applied)
                except Exception:  # one listener's bug neither undoes the commit nor
                    log.exception("ledger listener %r failed", listener)  # silences others

    # ---- writes -------------------------------------------------------------------------

    async def create_db(
        self,
        key: KeyPair,
        meta: dict[str, Any],
        grants: Iterable[tuple[str, Permission]] = (),
    ) -> str:
        """Create a database whose creator ``key`` is admin(0); return its id."""
        auth = [auth_op(key.public, Permission.parse("admin", 0))]
        auth += [auth_op(k, p) for k, p in grants if k != key.public]
        ops: dict[str, list[Any]] = {AUTH_STORE: auth}
        if meta:
            ops["meta"] = [{"op": "set", "field": k, "value": v} for k, v in sorted(meta.items())]
        applied = await self._commit(LedgerCore.write_each, [(None, key, ops)], None)
        return applied.entries[0].id

    async def write(self, db: str, key: KeyPair, ops: dict[str, list[Any]]) -> Applied:
        """Sign and commit one entry; refused whole (nothing stored) if ``key`` may not."""
        return await self.write_many(db, key, [ops])

    async def write_many(
        self, db: str, key: KeyPair, ops_list: list[dict[str, list[Any]]]
    ) -> Applied:
        """Commit several entries by one key in one transaction (all or nothing)."""
        if not ops_list:
            return Applied()
        return await self._commit(LedgerCore.write_each, [(db, key, ops) for ops in ops_list], None)

    async def write_each(self, steps: list[tuple[str, KeyPair, dict[str, list[Any]]]]) -> Applied:
        """Commit one entry per ``(db, key, ops)`` step, in order, in one transaction: all of
        them or none (say, a grant on a bank and the ref to it in the agent's database)."""
        if not steps:
            return Applied()
        return await self._commit(LedgerCore.write_each, list(steps), None)

    async def set_auth(
        self, db: str, admin: KeyPair, key: str, perm: Permission, active: bool = True
    ) -> None:
        await self.write(db, admin, {AUTH_STORE: [auth_op(key, perm, active)]})

    async def ingest(self, entries: Iterable[Entry | bytes]) -> IngestResult:
        """Validate and store entries that came from another peer (parents first).

        Signatures are checked on a worker thread, so a large batch never stalls the loop.
        """
        raw = [item.data if isinstance(item, Entry) else item for item in entries]
        decoded, bad = await asyncio.to_thread(_decode_all, raw)
        result, _ = await self._worker.run(
            LedgerCore.ingest, self._core, decoded, then=lambda out: self._notify(out[1])
        )
        result.rejected = bad + result.rejected
        return result

    # ---- reads --------------------------------------------------------------------------

    async def exists(self, db: str) -> bool:
        return bool(await self.run(lambda core: bool(core.tips.of(db))))

    async def auth_state(self, db: str) -> dict[str, KeyGrant]:
        cached = self._auth_cache.get(db)
        if cached is None:
            epoch = self._epoch
            cached = dict(await self.run(LedgerCore.auth_state, db))
            if epoch == self._epoch:
                self._auth_cache[db] = cached
        return dict(cached)

    async def permission(self, db: str, key: str) -> Permission:
        return permission_of(await self.auth_state(db), key)

    async def fields(self, db: str, store: str) -> dict[str, Any]:
        """The current single-valued fields of a store (a copy; JSON values)."""
        cached = self._fields_cache.get((db, store))
        if cached is None:

            def read(core: LedgerCore) -> dict[str, Any]:
                cur = core.conn.execute(
                    "SELECT field, value FROM fields WHERE db = ? AND store = ?", (db, store)
                )
                return {name: json.loads(value) for name, value in cur}

            epoch = self._epoch
            cached = await self.run(read)
            if epoch == self._epoch:
                self._fields_cache[(db, store)] = cached
        return copy.deepcopy(cached)

    async def fields_by(
        self, db: str, store: str, authors: Collection[str]
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """A store's single-valued fields as only ``authors`` set them (per field, the
        latest set signed by one of them), and the fields whose latest set another key
        signed (field -> that key): stored for convergence, never to be applied."""
        trusted = frozenset(authors)

        def read(core: LedgerCore) -> list[tuple[str, str, str]]:
            cur = core.conn.execute(
                "SELECT s.field, s.value, e.author FROM field_sets s "
                "JOIN entries e ON e.id = s.entry_id WHERE s.db = ? AND s.store = ? "
                "ORDER BY s.height, s.entry_id",
                (db, store),
            )
            return [(str(f), str(v), str(a)) for f, v, a in cur]

        found: dict[str, Any] = {}
        others: dict[str, str] = {}
        for name, value, author in await self.run(read):
            if author in trusted:
                found[name] = json.loads(value)
                others.pop(name, None)
            else:
                others[name] = author
        return found, others

    async def rows(
        self, db: str, store: str, after: int = 0, limit: int = -1, newest: bool = False
    ) -> list[Row]:
        """Rows of a table store in local insertion order, ``n > after``; with ``newest``,
        the last ``limit`` of them (still oldest first)."""
        order = "DESC" if newest else "ASC"

        def read(core: LedgerCore) -> list[Row]:
            cur = core.conn.execute(
                "SELECT n, row_id, entry_id, author, ts, height, data FROM rows "
                f"WHERE db = ? AND store = ? AND n > ? AND hidden = 0 ORDER BY n {order} LIMIT ?",
                (db, store, after, limit),
            )
            found = [
                Row(n, db, store, rid, eid, a, ts, h, json.loads(d))
                for n, rid, eid, a, ts, h, d in cur
            ]
            return found[::-1] if newest else found

        return await self.run(read)

    async def stores(self, db: str) -> dict[str, int]:
        """Table stores of a database with their row counts."""

        def read(core: LedgerCore) -> dict[str, int]:
            cur = core.conn.execute(
                "SELECT store, count(*) FROM rows WHERE db = ? AND hidden = 0 GROUP BY store",
                (db,),
            )
            return {store: int(n) for store, n in cur}

        return await self.run(read)

    async def tips(self, db: str) -> list[str]:
        return sorted(await self.run(lambda core: list(core.tips.of(db))))

    async def entry(self, eid: str) -> Entry:
        def read(core: LedgerCore) -> bytes | None:
            row = core.conn.execute("SELECT data FROM entries WHERE id = ?", (eid,)).fetchone()
            return bytes(row[0]) if row else None

        data = await self.run(read)
        if data is None:
            raise NotFound(f"no entry {eid}")
        return Entry.decode(data, eid)

    async def entries(
        self, db: str, after_seq: int = 0, limit: int = 1000
    ) -> list[tuple[int, bytes]]:
        """Raw entries of a database in local order, ``seq > after_seq``."""

        def read(core: LedgerCore) -> list[tuple[int, bytes]]:
            cur = core.conn.execute(
                "SELECT seq, data FROM entries WHERE db = ? AND seq > ? ORDER BY seq LIMIT ?",
                (db, after_seq, limit),
            )
            return [(int(s), bytes(d)) for s, d in cur]

        return await self.run(read)

    async def db_size(self, db: str) -> int:
        """Bytes of all entries of a database."""

        def read(core: LedgerCore) -> int:
            q = "SELECT coalesce(sum(length(data)), 0) FROM entries WHERE db = ?"
            return int(core.conn.execute(q, (db,)).fetchone()[0])

        return await self.run(read)

    async def last_row_number(self) -> int:
        """The highest local row number stored so far (rows of every database): every row
        up to it is committed, so a reader loads up to it and takes later ones as they come."""

        def read(core: LedgerCore) -> int:
            found = core.conn.execute("SELECT max(n) FROM rows").fetchone()
            return int(found[0]) if found and found[0] is not None else 0

        return await self.run(read)

    async def count_entries(self, db: str | None = None) -> int:
        def read(core: LedgerCore) -> int:
            if db is None:
                return int(core.conn.execute("SELECT count(*) FROM entries").fetchone()[0])
            q = "SELECT count(*) FROM entries WHERE db = ?"
            return int(core.conn.execute(q, (db,)).fetchone()[0])

        return await self.run(read)

    # ---- peer-local tables (never synced) -------------------------------------------------

    async def probe(self) -> None:
        """Show the state file answers: one read on the ledger's thread (for /healthz)."""
        await self.run(lambda core: core.conn.execute("SELECT 1 FROM local_kv LIMIT 1").fetchall())

    async def local(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement on the peer-local tables and return its rows (autocommit).

        For tests and tools only: product code goes through the typed stores (``kv``,
        ``keys``, ``hosted``, the features' own stores over their tables) and the reads in
        ``ledger.replication``. SQLite's authorizer checks the statement as it is compiled: it
        may read any table but write only the peer-local ones (the ledger's and those of the
        features brought up to date here; so ``INTO main.entries`` is refused like ``INTO
        entries``), and it may not touch the schema, pragmas, transactions or attached
        databases.
        """
        writable = _LEDGER_LOCAL_TABLES | {n for t in self._owned.values() for n in t.tables}

        def authorize(
            action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None
        ) -> int:
            return _peer_local_only(writable, action, arg1, db, source)

        def execute(core: LedgerCore) -> list[tuple[Any, ...]]:
            core.conn.set_authorizer(authorize)
            try:
                return core.conn.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:
                if "not authorized" in str(exc):
                    raise InputError(
                        "only plain statements on peer-local tables: the ledger's tables "
                        "change only through signed entries"
                    ) from exc
                raise
            finally:
                core.conn.set_authorizer(None)

        return await self.run(execute)

    # ---- checking -------------------------------------------------------------------------

    async def verify(self, tables: Iterable[LocalTable] = ()) -> list[tuple[str, str]]:
        """Re-check the file: its schema, every stored entry's id, signature and
        authorisation, and the tables derived from them (``rebuild``); return the failures.

        Features' tables are judged against ``tables`` and those brought up to date on this
        ledger; a feature the file records but neither names is a failure (``chazbot verify``
        names every feature: ``transports.tables.FEATURE_TABLES``)."""
        known = unique([*self.tables(), *tables])
        return await self.run(_verify_all, known)

    async def soft_failed_auth(self) -> list[tuple[str, str]]:
        """Auth entries held but soft-failed by the resolution by authority (kept so that
        peers converge, never applied): (entry id, why), per database."""

        def read(core: LedgerCore) -> list[tuple[str, str]]:
            return [
                (eid, why)
                for _, graph in sorted(core.graphs.items())
                for eid, why in sorted(graph.soft_failed().items())
            ]

        return await self.run(read)


_LEDGER_LOCAL_TABLES = frozenset({"local_kv", "local_keys", "registry"})
_READS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION})
_WRITES = frozenset({sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE})


def _peer_local_only(
    writable: frozenset[str] | set[str],
    action: int,
    arg1: str | None,
    database: str | None,
    source: str | None,
) -> int:
    """SQLite authorizer for ``Ledger.local``: read anything, write only ``writable``."""
    if action in _READS:
        return sqlite3.SQLITE_OK
    if action in _WRITES and database == "main" and source is None:
        return sqlite3.SQLITE_OK if arg1 in writable else sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_DENY


@functools.cache
def _ledger_tables() -> frozenset[str]:
    """The tables the ledger's own schema makes."""
    scratch = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate(scratch)
        cur = scratch.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return frozenset(str(row[0]) for row in cur)
    finally:
        scratch.close()


def _claims(tables: list[LocalTable]) -> list[LocalTable]:
    """``tables``, unless one claims a table of the ledger's (``local`` would let it write)."""
    for table in tables:
        taken = sorted(set(table.tables) & _ledger_tables())
        if taken:
            raise ConflictError(f"local table {table.name} claims the ledger's {taken[0]}")
    return tables


def _decode_all(raw: list[bytes]) -> tuple[list[Entry], list[tuple[str, str]]]:
    decoded: list[Entry] = []
    bad: list[tuple[str, str]] = []
    for data in raw:
        try:
            decoded.append(Entry.decode(data))
        except IntegrityError as exc:
            bad.append(("?", str(exc)))
    return decoded, bad


def _open_core(path: Path, tables: list[LocalTable], limits: KeptLimits) -> LedgerCore:
    """Open the file, bring its schema and the given features' tables up to date and load
    the core (on the worker thread)."""
    raw = _open_file(path)
    try:
        migrate(raw)
        migrate_tables(raw, tables)
        return LedgerCore(raw, limits)
    except BaseException:
        raw.close()
        raise


def _verify_all(core: LedgerCore, tables: list[LocalTable]) -> list[tuple[str, str]]:
    """``rebuild.check`` on the ledger's own connection: the schema (the ledger's and the
    features' ``tables``), every entry, and the derived tables against a replay."""
    return rebuild.check(core.conn, tables).failures

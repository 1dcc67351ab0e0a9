"""The synchronous heart of the ledger: validate entries, store them, derive tables.

Everything here runs on one thread that owns the ``sqlite3`` connection (see
``ledger.Ledger``), so each function is one atomic step: read the tips, check, write,
commit. Materialised tables (``rows``, ``fields``, ``auth``, ``tips``) are written in the same
transaction as their entry, so a crash never leaves them apart.

Operations an entry may carry, per store:

- ``_auth``: ``{"op": "set_key", "key", "perm", "prio", "status"}`` (needs admin)
- any other store: ``{"op": "insert", "row": {...}}`` adds a table row whose id is
  ``<entry id>/<store>/<index>``; a row field ``"ref": "@<store>/<index>"`` names another row
  of the same entry and is stored resolved. ``{"op": "set", "field": name, "value": v}``
  sets a single-valued field; concurrent sets resolve to the entry last by (height, id).

Revocation wins (SPEC §2): a data entry whose author lacks write in the current auth state
(resolved by authority: ``AuthGraph.resolution``), and that is not an ancestor of the auth
entry that took the write away, is *soft-failed*: kept in the DAG, its rows hidden
(``rows.hidden``), its field sets ignored, and never chosen as a parent. An auth entry whose
author lacks the authority for it in the resolution is soft-failed likewise (never applied;
what it granted gains nothing). Whether an entry is soft-failed depends only on the entries
present, so peers holding the same entries show the same rows and the same auth state.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import astuple, replace
from typing import Any

from chazbot.errors import ChazError, InputError, IntegrityError, NotFound, PermissionDenied
from chazbot.ledger.arrivals import Arrivals
from chazbot.ledger.auth import (
    AUTH_STORE,
    KeyGrant,
    Level,
    Permission,
    check_auth_change,
    fold,
    parse_auth_op,
    permission_of,
)
from chazbot.ledger.authgraph import AuthGraph
from chazbot.ledger.entry import Entry
from chazbot.ledger.keys import KeyPair
from chazbot.ledger.records import DEFAULT_LIMITS, Applied, IngestResult, KeptLimits, Row, Undo
from chazbot.ledger.settle import Settling
from chazbot.ledger.tips import Tip, Tips

log = logging.getLogger(__name__)

MAX_FIELD_NAME = 128


RowCheck = Callable[[dict[str, Any]], None]
_ROW_CHECKS: dict[str, RowCheck] = {}


def register_row_check(store: str, check: RowCheck) -> None:
    """Check every row inserted into ``store`` (or, for a name ending in ``:``, every store
    starting with it), local or synced; ``check`` raises InputError for a row to refuse.

    Upper layers register their limits here (memory registers SPEC §3's), so the ledger
    refuses an over-limit row at its boundary without knowing what a memory row is.
    """
    _ROW_CHECKS[store] = check


def _row_check(store: str) -> RowCheck | None:
    check = _ROW_CHECKS.get(store)
    if check is None and ":" in store:
        check = _ROW_CHECKS.get(store.split(":", 1)[0] + ":")
    return check


def _is_data(entry: Entry) -> bool:
    """Whether an entry needs write: it touches a data store, or carries nothing at all."""
    has_auth = AUTH_STORE in entry.ops
    return any(store != AUTH_STORE for store in entry.ops) or not has_auth


class LedgerCore:
    """Validation and storage on a raw sqlite3 connection (one thread only).

    Its parts, built here: ``tips`` (each database's tips, cached), ``settling`` (the auth
    state resolved by authority, and soft-fail) and ``arrivals`` (ingest, and the limbo of
    refused soft-failed entries). The auth heads, validation, storing and the transaction
    with its undo log are the core's own.
    """

    def __init__(self, conn: sqlite3.Connection, limits: KeptLimits = DEFAULT_LIMITS) -> None:
        self.conn = conn
        self.kept = limits
        self.graphs: dict[str, AuthGraph] = {}
        self._heads: dict[int, tuple[str, ...]] = {}
        self._head_ids: dict[tuple[str, tuple[str, ...]], int] = {}
        self._undo: list[Undo] | None = None
        self.commits = 0  # write transactions committed (a group of writes is one)
        self.tips = Tips(conn)
        self.settling = Settling(conn, self.graphs, self.tips, self.on_undo)
        self.arrivals = Arrivals(self, conn, limits, self.graphs, self.tips, self.settling)
        self.load_errors: list[tuple[str, str]] = []
        for n, db, members in conn.execute("SELECT n, db, members FROM auth_heads"):
            heads = tuple(json.loads(members))
            self._heads[n] = heads
            self._head_ids[(db, heads)] = n
        wanted = {eid for heads in self._heads.values() for eid in heads}
        rows = conn.execute(
            "SELECT id, db, height, parents, author, data FROM entries WHERE id IN "
            "(SELECT value FROM json_each(?)) ORDER BY height, id",
            (json.dumps(sorted(wanted)),),
        ).fetchall()
        for eid, db, height, parents, author, data in rows:
            below = self._heads_below(db, parents.split() if parents else [])
            try:
                grants = _auth_grants(Entry.decode(bytes(data), eid))
            except ChazError as exc:
                # A damaged auth entry grants nothing; the file still opens so that
                # ``verify`` can name it.
                grants = []
                self.load_errors.append((eid, str(exc)))
            graph = self.graphs.setdefault(db, AuthGraph())
            graph.add(eid, int(height), below, grants, str(author))
        for db in sorted(self.graphs):
            self.settling.settle_stored(db, self.transaction)

    # ---- auth heads ---------------------------------------------------------------------

    def _heads_below(self, db: str, parents: Iterable[str]) -> tuple[str, ...]:
        ids = list(parents)
        if not ids:
            return ()
        members: set[str] = set()
        for (auth_set,) in self.conn.execute(
            "SELECT auth_set FROM entries WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(ids),),
        ):
            members.update(self._heads.get(int(auth_set), ()))
        graph = self.graphs.get(db)
        return graph.heads_of(members) if graph is not None else tuple(sorted(members))

    def _intern(self, db: str, heads: tuple[str, ...]) -> int:
        n = self._head_ids.get((db, heads))
        if n is None:
            cur = self.conn.execute(
                "INSERT INTO auth_heads (db, members) VALUES (?, ?)", (db, json.dumps(heads))
            )
            n = int(cur.lastrowid or 0)
            self._heads[n] = heads
            self._head_ids[(db, heads)] = n
            new_n = n

            def undo() -> None:
                self._heads.pop(new_n, None)
                self._head_ids.pop((db, heads), None)

            self.on_undo(undo)
        return n

    def on_undo(self, action: Undo) -> None:
        if self._undo is not None:
            self._undo.append(action)

    # ---- auth state -------------------------------------------------------------------

    def auth_state(self, db: str) -> dict[str, KeyGrant]:
        """The current auth state of a database, resolved by authority from every auth entry
        it holds (soft-failed ones apply nothing)."""
        graph = self.graphs.get(db)
        if graph is None or not self.tips.of(db):
            raise NotFound(f"no database {db}")
        return graph.current_state()

    def state_at(self, db: str, heads: tuple[str, ...]) -> dict[str, KeyGrant]:
        """The auth state at a point of history named by its auth heads."""
        graph = self.graphs[db]
        return graph.state_at(graph.closure(heads))

    # ---- validation ---------------------------------------------------------------------

    def validate(self, entry: Entry, batch: dict[str, Tip]) -> int:
        """Check ``entry`` against the state at its parents; return its auth heads' number."""
        db = entry.db_id
        has_auth = AUTH_STORE in entry.ops
        for store, ops in entry.ops.items():
            if store != AUTH_STORE:
                _check_data_ops(store, ops)
        if entry.is_root:
            grants = _auth_grants(entry)
            state = fold(grants)
            if permission_of(state, entry.author) != Permission(Level.ADMIN, 0):
                raise PermissionDenied("a root entry must make its author admin(0)")
            graph = AuthGraph()
            graph.add(entry.id, 0, (), grants, entry.author)
            self.graphs[db] = graph
            self.on_undo(lambda: self.graphs.pop(db, None))
            return self._intern(db, (entry.id,))
        found = self.graphs.get(db)
        if found is None or (db not in batch and not self.tips.of(db)):
            raise NotFound(f"unknown database {db[:19]}…")
        graph = found
        members: set[str] = set()
        heights = []
        for parent in entry.parents:
            info = self.tips.info(parent, batch, db)
            if info is None:
                raise NotFound(f"parent {parent[:19]}… is not known")
            if info.db != db:
                raise IntegrityError("a parent belongs to another database")
            heights.append(info.height)
            members.update(self._heads[info.auth_set])
        if entry.height != max(heights) + 1:
            raise IntegrityError("entry height is not one more than its highest parent")
        heads = graph.heads_of(members)
        at_parents = graph.resolved_at(graph.closure(heads))

        def grant_of(key: str) -> KeyGrant | None:
            return at_parents.get(key)

        author = grant_of(entry.author)
        perm = permission_of({entry.author: author} if author else {}, entry.author)
        # An entry with no operations at all (``{}``) still needs write, and one carrying
        # ``_auth`` needs admin even when its list is empty.
        if has_auth and perm.level is not Level.ADMIN:
            raise PermissionDenied(f"key {entry.author[:24]}… is not an admin of this database")
        if _is_data(entry) and not perm.allows(Level.WRITE):
            raise PermissionDenied(
                f"key {entry.author[:24]}… may not write to this database (it holds {perm.name})"
            )
        if not has_auth:
            return self._intern(db, heads)
        grants = _auth_grants(entry)
        progressive: dict[str, KeyGrant] = {}
        for key in {entry.author, *(k for k, _ in grants)}:
            held = grant_of(key)
            if held is not None:
                progressive[key] = held
        for key, grant in grants:
            check_auth_change(progressive, entry.author, key, grant)
            progressive[key] = grant
        graph.add(entry.id, entry.height, heads, grants, entry.author)
        self.on_undo(lambda: graph.remove_last(entry.id))
        return self._intern(db, (entry.id,))

    # ---- storing ------------------------------------------------------------------------

    def store(self, entry: Entry, auth_set: int, applied: Applied) -> bool:
        """Store a validated entry and what derives from it; True if it is soft-failed."""
        db = entry.db_id
        is_data = _is_data(entry)
        self.conn.execute(
            "INSERT INTO entries (id, db, height, author, ts, auth_set, data, parents, is_data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                entry.id,
                db,
                entry.height,
                entry.author,
                entry.ts,
                auth_set,
                entry.data,
                " ".join(entry.parents),
                int(is_data),
            ),
        )
        tips = self.tips.of(db)
        self.on_undo(lambda: self.tips.forget(db))
        for parent in entry.parents:
            tips.pop(parent, None)
            self.conn.execute("DELETE FROM tips WHERE db = ? AND id = ?", (db, parent))
        tips[entry.id] = Tip(entry.height, auth_set, db)
        self.conn.execute("INSERT INTO tips (db, id) VALUES (?, ?)", (db, entry.id))
        order = (entry.height, entry.id)
        changed_keys: list[str] = []
        auth_failed = False
        if AUTH_STORE in entry.ops:
            changed_keys = self.settling.settle_auth(db, applied)
            auth_failed = entry.id in self.graphs[db].soft_failed()
        # Decide this entry first: it is soft-failed if its own auth changes are (resolved
        # by authority), or if, after them, its author lacks write (it cannot be an ancestor
        # of an auth entry already stored).
        allows, decider = self.settling.allows_write(db, entry.author)
        failed = auth_failed or (is_data and not allows and decider != entry.id)
        if failed:
            self.conn.execute("UPDATE entries SET soft_failed = 1 WHERE id = ?", (entry.id,))
            tips[entry.id].soft_failed = True
        for store in sorted(entry.ops):
            if store == AUTH_STORE:
                continue
            for index, op in enumerate(entry.ops[store]):
                if op["op"] == "insert":
                    data = dict(op["row"])
                    ref = data.get("ref")
                    if isinstance(ref, str) and ref.startswith("@"):
                        data["ref"] = f"{entry.id}/{ref[1:]}"
                    row_id = f"{entry.id}/{store}/{index}"
                    row = Row(
                        0, db, store, row_id, entry.id, entry.author, entry.ts, entry.height, data
                    )
                    cur = self.conn.execute(
                        "INSERT INTO rows "
                        "(db, store, row_id, entry_id, author, ts, height, data, hidden) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            *astuple(row)[1:8],
                            json.dumps(data, ensure_ascii=False, sort_keys=True),
                            int(failed),
                        ),
                    )
                    if not failed:
                        applied.rows.append(replace(row, n=int(cur.lastrowid or 0)))
                else:
                    text = json.dumps(op["value"], ensure_ascii=False)
                    self.conn.execute(
                        "INSERT OR REPLACE INTO field_sets "
                        "(db, store, field, height, entry_id, value) VALUES (?, ?, ?, ?, ?, ?)",
                        (db, store, op["field"], entry.height, entry.id, text),
                    )
                    if not failed:
                        key = (db, store, op["field"])
                        self._set_if_later("fields", ("db", "store", "field"), key, (text,), order)
                        applied.fields.append(key)
        for k in changed_keys:
            self.settling.resettle(db, k, applied)
        applied.entries.append(entry)
        return failed

    def _set_if_later(
        self,
        table: str,
        key_columns: tuple[str, ...],
        key: tuple[Any, ...],
        values: tuple[Any, ...],
        order: tuple[int, str],
    ) -> bool:
        """Store a single-valued setting unless a setting from a later (height, id) is there."""
        where = " AND ".join(f"{c} = ?" for c in key_columns)
        row = self.conn.execute(
            f"SELECT height, entry_id FROM {table} WHERE {where}", key
        ).fetchone()
        if row is None or (row[0], row[1]) <= order:  # <=: a later op in one entry wins
            marks = ", ".join("?" * (len(key) + len(values) + 2))
            self.conn.execute(
                f"INSERT OR REPLACE INTO {table} VALUES ({marks})", (*key, *values, *order)
            )
            return True
        return False

    # ---- public steps (each one transaction) ----------------------------------------------

    def write(
        self, db: str | None, key: KeyPair, ops_list: list[dict[str, list[Any]]], ts: int | None
    ) -> Applied:
        """Create, validate and store entries signed by ``key``, chained, in one transaction."""
        return self.write_each([(db, key, ops) for ops in ops_list], ts)

    def write_each(
        self, steps: list[tuple[str | None, KeyPair, dict[str, list[Any]]]], ts: int | None
    ) -> Applied:
        """Entries of possibly several databases and keys, in order, in one transaction:
        all are stored or none (a step with no database starts one; following steps with
        ``None`` as well as the first chain onto it)."""
        with self.transaction():
            return self._write_steps(steps, ts)

    def write_group(
        self,
        writes: list[tuple[list[tuple[str | None, KeyPair, dict[str, list[Any]]]], int | None]],
    ) -> list[Applied | Exception]:
        """Several ``write_each`` calls queued at once, in one transaction: one commit (one
        fsync) for all of them. Each runs in its own savepoint, so one that fails is undone
        alone (its rows and its in-memory effects) and the others are stored; its exception
        takes its place in the result. A failed commit fails them all (raised)."""
        results: list[Applied | Exception] = []
        with self.transaction() as undo_log:
            for steps, ts in writes:
                self.conn.execute("SAVEPOINT one")
                undo_mark = len(undo_log)
                try:
                    results.append(self._write_steps(steps, ts))
                except Exception as exc:  # this write only; raised to its own caller
                    self.conn.execute("ROLLBACK TO one")
                    for undo in reversed(undo_log[undo_mark:]):
                        undo()
                    del undo_log[undo_mark:]
                    self.tips.clear()  # may hold its tips; reloaded (in this transaction)
                    results.append(exc)
                self.conn.execute("RELEASE one")
        return results

    def _write_steps(
        self, steps: list[tuple[str | None, KeyPair, dict[str, list[Any]]]], ts: int | None
    ) -> Applied:
        applied = Applied()
        batch: dict[str, Tip] = {}
        created: str | None = None
        for db, key, ops in steps:
            current_db = db if db is not None else created
            if current_db is None:
                entry = Entry.create(key, None, [], 0, ops, ts)
                created = entry.id
            else:
                if not self.tips.of(current_db):
                    raise NotFound(f"no database {current_db}")
                parents = self.tips.live_parents(current_db)
                height = max(self.tips.height_of(p, current_db) for p in parents) + 1
                entry = Entry.create(key, current_db, parents, height, ops, ts)
            auth_set = self.validate(entry, batch)
            if self.store(entry, auth_set, applied):
                raise PermissionDenied(
                    f"key {entry.author[:24]}… may not write to this database any more"
                )
            batch[entry.id] = Tip(entry.height, auth_set, entry.db_id)
        return applied

    def ingest(
        self, entries: Iterable[Entry], refuse_soft_failed: bool = True
    ) -> tuple[IngestResult, Applied]:
        """Validate and store entries from elsewhere, parents first, in one transaction; each
        is accepted or refused alone (``Arrivals.ingest``)."""
        return self.arrivals.ingest(entries, refuse_soft_failed)

    @contextmanager
    def transaction(self) -> Iterator[list[Undo]]:
        """One write transaction; on any failure, roll back and undo its in-memory effects.
        Yields the undo log, in which each step's own effects can be undone alone."""
        undo_log: list[Undo] = []
        self._undo = undo_log
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield undo_log
            self.conn.execute("COMMIT")
            self.commits += 1
        except BaseException:
            self._rollback()
            raise
        finally:
            self._undo = None

    def known(self, eid: str) -> bool:
        return (
            self.conn.execute("SELECT 1 FROM entries WHERE id = ?", (eid,)).fetchone() is not None
        )

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        for undo in reversed(self._undo or []):
            undo()
        self.tips.clear()  # caches may hold uncommitted tips; reload from disk


def _auth_grants(entry: Entry) -> list[tuple[str, KeyGrant]]:
    return [parse_auth_op(op) for op in entry.ops.get(AUTH_STORE, [])]


def _check_data_ops(store: str, ops: list[Any]) -> None:
    check = _row_check(store)
    for op in ops:
        if not isinstance(op, dict):
            raise InputError(f"store {store}: an operation must be an object")
        kind = op.get("op")
        if kind == "insert":
            if set(op) != {"op", "row"} or not isinstance(op["row"], dict):
                raise InputError(f"store {store}: insert takes exactly {{op, row: object}}")
            if check is not None:
                check(op["row"])
        elif kind == "set":
            if set(op) != {"op", "field", "value"} or not isinstance(op["field"], str):
                raise InputError(f"store {store}: set takes exactly {{op, field, value}}")
            if not 0 < len(op["field"]) <= MAX_FIELD_NAME:
                raise InputError(f"store {store}: field names are 1-{MAX_FIELD_NAME} characters")
        else:
            raise InputError(f"store {store}: unknown operation {str(kind)[:40]!r}")

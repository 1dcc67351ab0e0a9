"""The synchronous heart of the ledger: validate entries, store them, derive tables.

Everything here runs on one thread that owns the ``sqlite3`` connection (aiosqlite's worker
thread, see ``ledger.Ledger``), so each function is one atomic step: read the tips, check,
write, commit. Materialised tables (``rows``, ``fields``, ``auth``, ``tips``) are written in
the same transaction as their entry, so a crash never leaves them apart.

Operations an entry may carry, per store:

- ``_auth``: ``{"op": "set_key", "key", "perm", "prio", "status"}`` (needs admin)
- any other store: ``{"op": "insert", "row": {...}}`` adds a table row whose id is
  ``<entry id>/<store>/<index>``; a row field ``"ref": "@<store>/<index>"`` names another row
  of the same entry and is stored resolved. ``{"op": "set", "field": name, "value": v}``
  sets a single-valued field; concurrent sets resolve to the entry last by (height, id).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import astuple, dataclass, field, replace
from typing import Any

from chazbot.errors import ChazError, InputError, IntegrityError, NotFound, PermissionDenied
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
from chazbot.ledger.entry import MAX_PARENTS, Entry
from chazbot.ledger.keys import KeyPair

MAX_FIELD_NAME = 128


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
    """What one write or ingest changed, handed to listeners (indexes) after commit."""

    entries: list[Entry] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    fields: list[tuple[str, str, str]] = field(default_factory=list)  # (db, store, field)
    auth_dbs: set[str] = field(default_factory=set)


@dataclass
class IngestResult:
    accepted: list[str] = field(default_factory=list)
    duplicates: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (entry id or "?", reason)


@dataclass
class _Tip:
    height: int
    auth_set: int
    db: str


class LedgerCore:
    """Validation and storage on a raw sqlite3 connection (one thread only)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._sets: dict[int, frozenset[str]] = {}
        self._set_ids: dict[tuple[str, frozenset[str]], int] = {}
        self._set_state: dict[int, dict[str, KeyGrant]] = {}
        self._auth_ops: dict[str, tuple[tuple[int, str], list[tuple[str, KeyGrant]]]] = {}
        self._tips: dict[str, dict[str, _Tip]] = {}
        self._reload_sets()
        wanted = set().union(*self._sets.values()) if self._sets else set()
        self.load_errors: list[tuple[str, str]] = []
        for eid in wanted:
            row = conn.execute("SELECT data, height FROM entries WHERE id = ?", (eid,)).fetchone()
            if row is None:
                continue
            try:
                self._remember_auth_ops(Entry.decode(bytes(row[0]), eid))
            except ChazError as exc:
                # A damaged auth entry grants nothing; the file still opens so that
                # ``verify`` can name it.
                self._auth_ops[eid] = ((int(row[1]), eid), [])
                self.load_errors.append((eid, str(exc)))

    def _reload_sets(self) -> None:
        self._sets.clear()
        self._set_ids.clear()
        self._set_state.clear()
        for n, db, members in self.conn.execute("SELECT n, db, members FROM auth_sets"):
            ids = frozenset(json.loads(members))
            self._sets[n] = ids
            self._set_ids[(db, ids)] = n

    # ---- auth state -------------------------------------------------------------------

    def _remember_auth_ops(self, entry: Entry) -> None:
        ops = [parse_auth_op(op) for op in entry.ops.get(AUTH_STORE, [])]
        self._auth_ops[entry.id] = (entry.sort_key(), ops)

    def _state_of_set(self, n: int) -> dict[str, KeyGrant]:
        state = self._set_state.get(n)
        if state is None:
            ordered = sorted((self._auth_ops[eid] for eid in self._sets[n]), key=lambda x: x[0])
            state = fold(op for _, ops in ordered for op in ops)
            self._set_state[n] = state
        return state

    def _intern_set(self, db: str, ids: frozenset[str]) -> int:
        n = self._set_ids.get((db, ids))
        if n is None:
            cur = self.conn.execute(
                "INSERT INTO auth_sets (db, members) VALUES (?, ?)", (db, json.dumps(sorted(ids)))
            )
            n = int(cur.lastrowid or 0)
            self._sets[n] = ids
            self._set_ids[(db, ids)] = n
        return n

    def tips(self, db: str) -> dict[str, _Tip]:
        tips = self._tips.get(db)
        if tips is None:
            tips = {}
            query = (
                "SELECT e.id, e.height, e.auth_set FROM tips t JOIN entries e ON e.id = t.id "
                "WHERE t.db = ?"
            )
            for eid, height, auth_set in self.conn.execute(query, (db,)):
                tips[eid] = _Tip(height, auth_set, db)
            self._tips[db] = tips
        return tips

    def _parent_info(self, eid: str, batch: dict[str, _Tip], db: str) -> _Tip | None:
        info = batch.get(eid) or self._tips.get(db, {}).get(eid)  # usually a current tip
        if info is not None:
            return info
        row = self.conn.execute("SELECT height, auth_set, db FROM entries WHERE id = ?", (eid,))
        found = row.fetchone()
        return _Tip(found[0], found[1], found[2]) if found else None

    def auth_state(self, db: str) -> dict[str, KeyGrant]:
        """The current (merged) auth state of a database."""
        tips = self.tips(db)
        if not tips:
            raise NotFound(f"no database {db}")
        members = frozenset().union(*(self._sets[t.auth_set] for t in tips.values()))
        if len(tips) == 1:
            return self._state_of_set(next(iter(tips.values())).auth_set)
        ordered = sorted((self._auth_ops[eid] for eid in members), key=lambda x: x[0])
        return fold(op for _, ops in ordered for op in ops)

    # ---- validation ---------------------------------------------------------------------

    def _validate(self, entry: Entry, batch: dict[str, _Tip]) -> tuple[int, list[str]]:
        """Check ``entry`` against the state at its parents; return its auth set and dead tips."""
        db = entry.db_id
        has_auth = AUTH_STORE in entry.ops
        for store, ops in entry.ops.items():
            if store != AUTH_STORE:
                _check_data_ops(store, ops)
        if entry.is_root:
            grants = [parse_auth_op(op) for op in entry.ops.get(AUTH_STORE, [])]
            state = fold(grants)
            if permission_of(state, entry.author) != Permission(Level.ADMIN, 0):
                raise PermissionDenied("a root entry must make its author admin(0)")
            self._auth_ops[entry.id] = (entry.sort_key(), grants)
            return self._intern_set(db, frozenset([entry.id])), []
        if db not in batch and not self.tips(db):  # a known database has tips
            raise NotFound(f"unknown database {db[:19]}…")
        members: set[str] = set()
        heights = []
        for parent in entry.parents:
            info = self._parent_info(parent, batch, db)
            if info is None:
                raise NotFound(f"parent {parent[:19]}… is not known")
            if info.db != db:
                raise IntegrityError("a parent belongs to another database")
            heights.append(info.height)
            members |= self._sets[info.auth_set]
        if entry.height != max(heights) + 1:
            raise IntegrityError("entry height is not one more than its highest parent")
        frozen = frozenset(members)
        set_n = self._set_ids.get((db, frozen))
        if set_n is None:
            set_n = self._intern_set(db, frozen)
        state = self._state_of_set(set_n)
        perm = permission_of(state, entry.author)
        # An entry with no operations at all (``{}``) still needs write, and one carrying
        # ``_auth`` needs admin even when its list is empty.
        if has_auth and perm.level is not Level.ADMIN:
            raise PermissionDenied(f"key {entry.author[:24]}… is not an admin of this database")
        writes_data = any(store != AUTH_STORE for store in entry.ops) or not has_auth
        if writes_data and not perm.allows(Level.WRITE):
            raise PermissionDenied(
                f"key {entry.author[:24]}… may not write to this database (it holds {perm.name})"
            )
        if has_auth:
            grants = [parse_auth_op(op) for op in entry.ops[AUTH_STORE]]
            progressive = dict(state)
            for key, grant in grants:
                check_auth_change(progressive, entry.author, key, grant)
                progressive[key] = grant
            self._auth_ops[entry.id] = (entry.sort_key(), grants)
            set_n = self._intern_set(db, frozenset(members | {entry.id}))
        return set_n, list(entry.parents)

    # ---- storing ------------------------------------------------------------------------

    def _store(self, entry: Entry, auth_set: int, applied: Applied) -> None:
        db = entry.db_id
        self.conn.execute(
            "INSERT INTO entries (id, db, height, author, ts, auth_set, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (entry.id, db, entry.height, entry.author, entry.ts, auth_set, entry.data),
        )
        tips = self.tips(db)
        for parent in entry.parents:
            tips.pop(parent, None)
            self.conn.execute("DELETE FROM tips WHERE db = ? AND id = ?", (db, parent))
        tips[entry.id] = _Tip(entry.height, auth_set, db)
        self.conn.execute("INSERT INTO tips (db, id) VALUES (?, ?)", (db, entry.id))
        key = (entry.height, entry.id)
        for store in sorted(entry.ops):
            for index, op in enumerate(entry.ops[store]):
                if store == AUTH_STORE:
                    k, grant = parse_auth_op(op)
                    self._set_auth(db, k, grant, key)
                    applied.auth_dbs.add(db)
                elif op["op"] == "insert":
                    data = dict(op["row"])
                    ref = data.get("ref")
                    if isinstance(ref, str) and ref.startswith("@"):
                        data["ref"] = f"{entry.id}/{ref[1:]}"
                    row_id = f"{entry.id}/{store}/{index}"
                    row = Row(
                        0, db, store, row_id, entry.id, entry.author, entry.ts, entry.height, data
                    )
                    cur = self.conn.execute(
                        "INSERT INTO rows (db, store, row_id, entry_id, author, ts, height, data) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (*astuple(row)[1:8], json.dumps(data, ensure_ascii=False)),
                    )
                    applied.rows.append(replace(row, n=int(cur.lastrowid or 0)))
                else:
                    self._set_field(db, store, op["field"], op["value"], key)
                    applied.fields.append((db, store, op["field"]))
        applied.entries.append(entry)

    def _set_auth(self, db: str, key: str, grant: KeyGrant, order: tuple[int, str]) -> None:
        state = "active" if grant.active else "revoked"
        self._set_if_later(
            "auth", ("db", "key"), (db, key), (grant.perm.name, grant.perm.prio, state), order
        )

    def _set_field(
        self, db: str, store: str, name: str, value: Any, order: tuple[int, str]
    ) -> None:
        text = json.dumps(value, ensure_ascii=False)
        self._set_if_later("fields", ("db", "store", "field"), (db, store, name), (text,), order)

    def _set_if_later(
        self,
        table: str,
        key_columns: tuple[str, ...],
        key: tuple[Any, ...],
        values: tuple[Any, ...],
        order: tuple[int, str],
    ) -> None:
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

    # ---- public steps (each one transaction) ----------------------------------------------

    def write(
        self, db: str | None, key: KeyPair, ops_list: list[dict[str, list[Any]]], ts: int | None
    ) -> Applied:
        """Create, validate and store entries signed by ``key``, chained, in one transaction."""
        applied = Applied()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            batch: dict[str, _Tip] = {}
            current_db = db
            for ops in ops_list:
                if current_db is None:
                    entry = Entry.create(key, None, [], 0, ops, ts)
                    current_db = entry.id
                else:
                    tips = self.tips(current_db)
                    if not tips:
                        raise NotFound(f"no database {current_db}")
                    # Merge at most MAX_PARENTS tips (the highest); the rest stay tips.
                    parents = sorted(tips, key=lambda t: (tips[t].height, t))[-MAX_PARENTS:]
                    height = max(tips[t].height for t in parents) + 1
                    entry = Entry.create(key, current_db, parents, height, ops, ts)
                auth_set, _ = self._validate(entry, batch)
                self._store(entry, auth_set, applied)
                batch[entry.id] = _Tip(entry.height, auth_set, entry.db_id)
            self.conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        return applied

    def ingest(self, entries: Iterable[Entry]) -> tuple[IngestResult, Applied]:
        """Validate and store entries from elsewhere, parents first; each is accepted or not."""
        result, applied = IngestResult(), Applied()
        todo = sorted(entries, key=Entry.sort_key)
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            batch: dict[str, _Tip] = {}
            seen: set[str] = set()
            for entry in todo:
                if entry.id in seen or self._known(entry.id):
                    result.duplicates += 1
                    continue
                seen.add(entry.id)
                self.conn.execute("SAVEPOINT one")
                marks = (len(applied.entries), len(applied.rows), len(applied.fields))
                try:
                    auth_set, _ = self._validate(entry, batch)
                    self._store(entry, auth_set, applied)
                except (ChazError, ValueError, KeyError, TypeError) as exc:
                    self.conn.execute("ROLLBACK TO one")
                    del applied.entries[marks[0] :], applied.rows[marks[1] :]
                    del applied.fields[marks[2] :]
                    self.conn.execute("RELEASE one")
                    self._tips.pop(entry.db_id, None)
                    self._auth_ops.pop(entry.id, None)
                    self._reload_sets()
                    result.rejected.append((entry.id, str(exc) or type(exc).__name__))
                    continue
                self.conn.execute("RELEASE one")
                batch[entry.id] = _Tip(entry.height, auth_set, entry.db_id)
                result.accepted.append(entry.id)
            self.conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        return result, applied

    def _known(self, eid: str) -> bool:
        return (
            self.conn.execute("SELECT 1 FROM entries WHERE id = ?", (eid,)).fetchone() is not None
        )

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        self._tips.clear()  # caches may hold uncommitted tips; reload from disk
        self._reload_sets()
        known = {
            r[0]
            for r in self.conn.execute(
                "SELECT id FROM entries WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(self._auth_ops)),),
            )
        }
        for eid in [e for e in self._auth_ops if e not in known]:
            del self._auth_ops[eid]


def _check_data_ops(store: str, ops: list[Any]) -> None:
    for op in ops:
        if not isinstance(op, dict):
            raise InputError(f"store {store}: an operation must be an object")
        kind = op.get("op")
        if kind == "insert":
            if set(op) != {"op", "row"} or not isinstance(op["row"], dict):
                raise InputError(f"store {store}: insert takes exactly {{op, row: object}}")
        elif kind == "set":
            if set(op) != {"op", "field", "value"} or not isinstance(op["field"], str):
                raise InputError(f"store {store}: set takes exactly {{op, field, value}}")
            if not 0 < len(op["field"]) <= MAX_FIELD_NAME:
                raise InputError(f"store {store}: field names are 1-{MAX_FIELD_NAME} characters")
        else:
            raise InputError(f"store {store}: unknown operation {str(kind)[:40]!r}")

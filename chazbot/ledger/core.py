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

import functools
import heapq
import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
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
from chazbot.ledger.authgraph import AuthGraph, Resolution
from chazbot.ledger.entry import MAX_PARENTS, Entry
from chazbot.ledger.keys import KeyPair
from chazbot.ledger.limbo import Limbo

log = logging.getLogger(__name__)

MAX_FIELD_NAME = 128


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
RowCheck = Callable[[dict[str, Any]], None]
Undo = Callable[[], object]
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


@dataclass
class _Tip:
    height: int
    auth_set: int
    db: str
    soft_failed: bool = False


def _is_data(entry: Entry) -> bool:
    """Whether an entry needs write: it touches a data store, or carries nothing at all."""
    has_auth = AUTH_STORE in entry.ops
    return any(store != AUTH_STORE for store in entry.ops) or not has_auth


class LedgerCore:
    """Validation and storage on a raw sqlite3 connection (one thread only)."""

    def __init__(self, conn: sqlite3.Connection, limits: KeptLimits = DEFAULT_LIMITS) -> None:
        self.conn = conn
        self.kept = limits
        self.graphs: dict[str, AuthGraph] = {}
        self._heads: dict[int, tuple[str, ...]] = {}
        self._head_ids: dict[tuple[str, tuple[str, ...]], int] = {}
        self._tips: dict[str, dict[str, _Tip]] = {}
        self._undo: list[Undo] | None = None
        self.commits = 0  # write transactions committed (a group of writes is one)
        self.limbo = Limbo(conn, limits.limbo_bytes_per_key, limits.limbo_bytes)
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
            self._settle_stored(db)

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

            self._on_undo(undo)
        return n

    def _on_undo(self, action: Undo) -> None:
        if self._undo is not None:
            self._undo.append(action)

    # ---- auth state -------------------------------------------------------------------

    def tips(self, db: str) -> dict[str, _Tip]:
        tips = self._tips.get(db)
        if tips is None:
            tips = {}
            query = (
                "SELECT e.id, e.height, e.auth_set, e.soft_failed FROM tips t "
                "JOIN entries e ON e.id = t.id WHERE t.db = ?"
            )
            for eid, height, auth_set, failed in self.conn.execute(query, (db,)):
                tips[eid] = _Tip(height, auth_set, db, bool(failed))
            self._tips[db] = tips
        return tips

    def _parent_info(self, eid: str, batch: dict[str, _Tip], db: str) -> _Tip | None:
        info = batch.get(eid) or self._tips.get(db, {}).get(eid)  # usually a current tip
        if info is not None:
            return info
        row = self.conn.execute(
            "SELECT height, auth_set, db, soft_failed FROM entries WHERE id = ?", (eid,)
        )
        found = row.fetchone()
        return _Tip(found[0], found[1], found[2], bool(found[3])) if found else None

    def auth_state(self, db: str) -> dict[str, KeyGrant]:
        """The current auth state of a database, resolved by authority from every auth entry
        it holds (soft-failed ones apply nothing)."""
        graph = self.graphs.get(db)
        if graph is None or not self.tips(db):
            raise NotFound(f"no database {db}")
        return graph.current_state()

    def state_at(self, db: str, heads: tuple[str, ...]) -> dict[str, KeyGrant]:
        """The auth state at a point of history named by its auth heads."""
        graph = self.graphs[db]
        return graph.state_at(graph.closure(heads))

    # ---- validation ---------------------------------------------------------------------

    def _validate(self, entry: Entry, batch: dict[str, _Tip]) -> int:
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
            self._on_undo(lambda: self.graphs.pop(db, None))
            return self._intern(db, (entry.id,))
        found = self.graphs.get(db)
        if found is None or (db not in batch and not self.tips(db)):
            raise NotFound(f"unknown database {db[:19]}…")
        graph = found
        members: set[str] = set()
        heights = []
        for parent in entry.parents:
            info = self._parent_info(parent, batch, db)
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
        self._on_undo(lambda: graph.remove_last(entry.id))
        return self._intern(db, (entry.id,))

    # ---- storing ------------------------------------------------------------------------

    def _store(self, entry: Entry, auth_set: int, applied: Applied) -> bool:
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
        tips = self.tips(db)
        self._on_undo(lambda: self._tips.pop(db, None))
        for parent in entry.parents:
            tips.pop(parent, None)
            self.conn.execute("DELETE FROM tips WHERE db = ? AND id = ?", (db, parent))
        tips[entry.id] = _Tip(entry.height, auth_set, db)
        self.conn.execute("INSERT INTO tips (db, id) VALUES (?, ?)", (db, entry.id))
        order = (entry.height, entry.id)
        changed_keys: list[str] = []
        auth_failed = False
        if AUTH_STORE in entry.ops:
            changed_keys = self._settle_auth(db, applied)
            auth_failed = entry.id in self.graphs[db].soft_failed()
        # Decide this entry first: it is soft-failed if its own auth changes are (resolved
        # by authority), or if, after them, its author lacks write (it cannot be an ancestor
        # of an auth entry already stored).
        allows, decider = self._allows_write(db, entry.author)
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
            self._resettle(db, k, applied)
        applied.entries.append(entry)
        return failed

    # ---- the current auth state, resolved by authority ----------------------------------------

    def _settle_auth(self, db: str, applied: Applied) -> list[str]:
        """Bring the ``auth`` table and the soft-failed marks of auth entries in line with
        the database's resolution (``AuthGraph.resolution``), after an auth entry was added.
        Returns the keys whose data entries must be judged again (``_resettle``)."""
        graph = self.graphs[db]
        old = graph.settled or Resolution()
        new = graph.resolution()
        if new is old:
            return []
        prefix = len(old.order)
        if new.excluded == old.excluded and new.order[:prefix] == old.order:
            fresh = new.order[prefix:]  # the usual case: new entries resolved after the rest
            keys = sorted({k for n in fresh for k in graph.keys_of[n]})
            entries = [n for n in fresh if n in new.failed]
        else:
            keys = sorted(old.grants.keys() | new.grants.keys())
            entries = sorted(old.failed.keys() ^ new.failed.keys())
        changed = [
            k
            for k in keys
            if (old.grants.get(k), old.decider.get(k)) != (new.grants.get(k), new.decider.get(k))
        ]
        for key in changed:
            self._write_grant(db, graph, new, key)
        if changed:
            applied.auth_dbs.add(db)
        resettle = set(changed)
        resettle |= self._flag_auth_entries(db, [(graph.ids[n], n in new.failed) for n in entries])
        graph.settled = new

        self._on_undo(lambda: graph.restore(old if old.order else None))
        return sorted(resettle)

    def _write_grant(self, db: str, graph: AuthGraph, found: Resolution, key: str) -> None:
        grant = found.grants.get(key)
        if grant is None:
            self.conn.execute("DELETE FROM auth WHERE db = ? AND key = ?", (db, key))
            return
        n = found.decider[key]
        status = "active" if grant.active else "revoked"
        self.conn.execute(
            "INSERT OR REPLACE INTO auth VALUES (?, ?, ?, ?, ?, ?, ?)",
            (db, key, grant.perm.name, grant.perm.prio, status, graph.heights[n], graph.ids[n]),
        )

    def _flag_auth_entries(self, db: str, changes: list[tuple[str, bool]]) -> set[str]:
        """Mark auth entries soft-failed or not; an entry that carries data as well is left to
        ``_resettle`` (its rows and fields), and its author is returned for that."""
        authors: set[str] = set()
        tips = self._tips.get(db, {})
        for eid, failed in changes:
            row = self.conn.execute(
                "SELECT author, is_data FROM entries WHERE id = ?", (eid,)
            ).fetchone()
            if row is None:
                continue
            if row[1]:
                authors.add(str(row[0]))
                continue
            self.conn.execute("UPDATE entries SET soft_failed = ? WHERE id = ?", (int(failed), eid))
            if eid in tips:
                tips[eid].soft_failed = failed
        return authors

    def _settle_stored(self, db: str) -> None:
        """At open: make what the file holds agree with the resolution (a file written by an
        older chazbot folded auth changes by height; one damaged may disagree too)."""
        graph = self.graphs[db]
        found = graph.resolution()
        stored = {
            str(k): (str(perm), int(prio), str(status), str(eid))
            for k, perm, prio, status, eid in self.conn.execute(
                "SELECT key, perm, prio, status, entry_id FROM auth WHERE db = ?", (db,)
            )
        }
        wanted = {
            k: (g.perm.name, g.perm.prio, "active" if g.active else "revoked", graph.ids[n])
            for k, g in found.grants.items()
            for n in (found.decider[k],)
        }
        flags = {
            str(eid): bool(failed)
            for eid, failed in self.conn.execute(
                "SELECT id, soft_failed FROM entries WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(graph.ids),),
            )
        }
        wrong = [eid for eid in graph.ids if flags.get(eid) != (graph.index[eid] in found.failed)]
        keys = sorted(k for k in stored.keys() | wanted.keys() if stored.get(k) != wanted.get(k))
        graph.settled = found
        if not keys and not wrong:
            return
        log.warning(
            "database %s: auth state resolved by authority differs from the file; settling "
            "%d keys and %d auth entries",
            db[:19],
            len(keys),
            len(wrong),
        )
        applied = Applied()
        with self._transaction():
            for key in keys:
                self._write_grant(db, graph, found, key)
            flagged = [(eid, graph.index[eid] in found.failed) for eid in wrong]
            resettle = set(keys) | self._flag_auth_entries(db, flagged)
            for key in sorted(resettle):
                self._resettle(db, key, applied)

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

    # ---- revocation wins --------------------------------------------------------------------

    def _allows_write(self, db: str, key: str) -> tuple[bool, str | None]:
        """Whether ``key`` holds write in the current state, and the auth entry deciding it."""
        graph = self.graphs.get(db)
        found = graph.current(key) if graph is not None else None
        if found is None:
            return False, None
        grant, decider = found
        return grant.active and grant.perm.allows(Level.WRITE), decider

    def _holds(self, db: str, key: str, level: Level) -> bool:
        """Whether ``key`` holds ``level`` or better in the resolved current state."""
        graph = self.graphs.get(db)
        found = graph.current(key) if graph is not None else None
        return found is not None and found[0].active and found[0].perm.allows(level)

    def _resettle(self, db: str, key: str, applied: Applied) -> None:
        """Key's current grant changed: soft-fail or restore its data entries accordingly."""
        candidates = self.conn.execute(
            "SELECT id, height, soft_failed FROM entries "
            "WHERE db = ? AND author = ? AND is_data = 1",
            (db, key),
        ).fetchall()
        if not candidates:
            return
        allows, decider = self._allows_write(db, key)
        if allows:
            want = dict.fromkeys((c[0] for c in candidates), 0)
        elif decider is None:  # every grant it had was soft-failed: it never held write
            want = dict.fromkeys((c[0] for c in candidates), 1)
        else:
            seen = self._ancestors_among(decider, {c[0]: c[1] for c in candidates})
            want = {c[0]: 0 if c[0] in seen else 1 for c in candidates}
        auth_failed = self.graphs[db].soft_failed()
        for eid in want:
            if eid in auth_failed:  # carries auth changes that are soft-failed
                want[eid] = 1
        changed = [(eid, want[eid]) for eid, _, failed in candidates if want[eid] != failed]
        if changed:
            self._mark_soft_failed(db, changed, applied)

    def _ancestors_among(self, top: str, targets: dict[str, int]) -> set[str]:
        """Which of ``targets`` (id -> height) are ``top`` or its ancestors.

        Walks down from ``top`` in height order, never below the lowest target still
        unresolved, and stops as soon as every target is found.
        """
        found = {top} & targets.keys()
        row = self.conn.execute("SELECT height, parents FROM entries WHERE id = ?", (top,))
        first = row.fetchone()
        if first is None:
            return found
        waiting = {eid: h for eid, h in targets.items() if eid not in found and h < first[0]}
        heap: list[tuple[int, str]] = []
        queued: set[str] = set()

        def push(parents: str) -> None:
            for parent in parents.split():
                if parent not in queued:
                    queued.add(parent)
                    height = self.conn.execute(
                        "SELECT height FROM entries WHERE id = ?", (parent,)
                    ).fetchone()
                    if height is not None:
                        heapq.heappush(heap, (-int(height[0]), parent))

        push(first[1])
        while heap and waiting:
            neg_height, eid = heapq.heappop(heap)
            if -neg_height < min(waiting.values()):
                break
            if eid in waiting:
                del waiting[eid]
                found.add(eid)
            parents = self.conn.execute("SELECT parents FROM entries WHERE id = ?", (eid,))
            push(parents.fetchone()[0])
        return found

    def _mark_soft_failed(self, db: str, changed: list[tuple[str, int]], applied: Applied) -> None:
        fields: set[tuple[str, str]] = set()
        for eid, failed in changed:
            self.conn.execute("UPDATE entries SET soft_failed = ? WHERE id = ?", (failed, eid))
            self.conn.execute("UPDATE rows SET hidden = ? WHERE entry_id = ?", (failed, eid))
            for store, name in self.conn.execute(
                "SELECT store, field FROM field_sets WHERE db = ? AND entry_id = ?", (db, eid)
            ):
                fields.add((store, name))
        for store, name in sorted(fields):
            best = self.conn.execute(
                "SELECT f.value, f.height, f.entry_id FROM field_sets f "
                "JOIN entries e ON e.id = f.entry_id "
                "WHERE f.db = ? AND f.store = ? AND f.field = ? AND e.soft_failed = 0 "
                "ORDER BY f.height DESC, f.entry_id DESC LIMIT 1",
                (db, store, name),
            ).fetchone()
            if best is None:
                self.conn.execute(
                    "DELETE FROM fields WHERE db = ? AND store = ? AND field = ?",
                    (db, store, name),
                )
            else:
                self.conn.execute(
                    "INSERT OR REPLACE INTO fields VALUES (?, ?, ?, ?, ?, ?)",
                    (db, store, name, *best),
                )
            applied.fields.append((db, store, name))
        self._tips.pop(db, None)
        applied.reset_dbs.add(db)

    # ---- public steps (each one transaction) ----------------------------------------------

    def _live_parents(self, db: str) -> list[str]:
        """The tips to build on: soft-failed tips are replaced by their nearest live ancestors."""
        tips = self.tips(db)
        live: dict[str, int] = {}
        todo = list(tips)
        seen: set[str] = set()
        while todo:
            eid = todo.pop()
            if eid in seen:
                continue
            seen.add(eid)
            tip = tips.get(eid)
            if tip is not None and not tip.soft_failed:
                live[eid] = tip.height
                continue
            row = self.conn.execute(
                "SELECT height, soft_failed, parents FROM entries WHERE id = ?", (eid,)
            ).fetchone()
            if row is None:
                continue
            if not row[1]:
                live[eid] = int(row[0])
            else:
                todo.extend(row[2].split())
        if not live:  # every entry soft-failed down to the root cannot happen; keep the tips
            live = {t: tips[t].height for t in tips}
        # Merge at most MAX_PARENTS (the highest); the rest stay tips.
        return sorted(live, key=lambda t: (live[t], t))[-MAX_PARENTS:]

    def _height_of(self, eid: str, db: str) -> int:
        info = self._parent_info(eid, {}, db)
        if info is None:
            raise NotFound(f"parent {eid[:19]}… is not known")
        return info.height

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
        with self._transaction():
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
        with self._transaction() as undo_log:
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
                    self._tips.clear()  # may hold its tips; reloaded (in this transaction)
                    results.append(exc)
                self.conn.execute("RELEASE one")
        return results

    def _write_steps(
        self, steps: list[tuple[str | None, KeyPair, dict[str, list[Any]]]], ts: int | None
    ) -> Applied:
        applied = Applied()
        batch: dict[str, _Tip] = {}
        created: str | None = None
        for db, key, ops in steps:
            current_db = db if db is not None else created
            if current_db is None:
                entry = Entry.create(key, None, [], 0, ops, ts)
                created = entry.id
            else:
                if not self.tips(current_db):
                    raise NotFound(f"no database {current_db}")
                parents = self._live_parents(current_db)
                height = max(self._height_of(p, current_db) for p in parents) + 1
                entry = Entry.create(key, current_db, parents, height, ops, ts)
            auth_set = self._validate(entry, batch)
            if self._store(entry, auth_set, applied):
                raise PermissionDenied(
                    f"key {entry.author[:24]}… may not write to this database any more"
                )
            batch[entry.id] = _Tip(entry.height, auth_set, entry.db_id)
        return applied

    def ingest(
        self, entries: Iterable[Entry], refuse_soft_failed: bool = True
    ) -> tuple[IngestResult, Applied]:
        """Validate and store entries from elsewhere, parents first; each is accepted or not.

        A refused entry is refused alone: its savepoint is rolled back and only its own
        in-memory effects are undone, so the batch and the entries after it go on. An
        unexpected exception (a bug) is logged with its traceback and refuses that entry only.

        An entry that would be soft-failed on arrival (its author's write was taken away
        before it came) is refused, and so never relayed, unless an entry of a key holding
        write builds on it (in this batch, or later: refused ones wait in ``limbo``, on disk);
        what is kept so counts per key, within ``KeptLimits.soft_failed`` entries and
        ``soft_failed_bytes`` per database and revocation. When the resolved auth
        state changes, entries waiting in limbo whose author may now write are taken in (a
        revocation that turns out soft-failed takes nothing away). ``verify`` replays the
        file with ``refuse_soft_failed=False``: what was stored then is judged, not when.
        """
        result, applied = IngestResult(), Applied()
        with self._transaction() as undo_log:
            batch: dict[str, _Tip] = {}
            self._ingest_round(entries, refuse_soft_failed, result, applied, undo_log, batch)
            if refuse_soft_failed:
                for _ in range(self.kept.limbo_rounds):
                    revived = [
                        entry
                        for db in sorted(applied.auth_dbs)
                        for entry in self.limbo.ready(db, functools.partial(self._may, db))
                    ]
                    before = len(result.accepted)
                    if not revived:
                        break
                    self._ingest_round(revived, True, result, applied, undo_log, batch)
                    if len(result.accepted) == before:
                        break
            taken = set(result.accepted)
            result.rejected = [(eid, why) for eid, why in result.rejected if eid not in taken]
        return result, applied

    def _may(self, db: str, key: str) -> bool:
        """Whether ``key`` holds write (so it may write data, or be judged again)."""
        return self._holds(db, key, Level.WRITE)

    def _ingest_round(
        self,
        entries: Iterable[Entry],
        refuse_soft_failed: bool,
        result: IngestResult,
        applied: Applied,
        undo_log: list[Undo],
        batch: dict[str, _Tip],
    ) -> None:
        todo = sorted(self._with_limbo(list(entries)), key=Entry.sort_key)
        children: dict[str, list[Entry]] = {}
        for entry in todo:
            for parent in entry.parents:
                children.setdefault(parent, []).append(entry)
        memo: dict[str, bool] = {}
        seen: set[str] = set()
        for entry in todo:
            if entry.id in seen or self._known(entry.id):
                result.duplicates += 1
                if entry.id not in seen and self.limbo.pop(entry.id):  # stored meanwhile
                    self._on_undo(self.limbo.reset)
                continue
            seen.add(entry.id)
            self.conn.execute("SAVEPOINT one")
            marks = (len(applied.entries), len(applied.rows), len(applied.fields))
            undo_mark = len(undo_log)
            reset_before = set(applied.reset_dbs)
            auth_before = set(applied.auth_dbs)
            reason: str | None = None
            wait = False
            try:
                auth_set = self._validate(entry, batch)
                failed = self._store(entry, auth_set, applied)
                if failed and refuse_soft_failed:
                    # An auth entry is kept (within the bound): whether it is soft-failed can
                    # change with entries that build on it (a revocation of its author that
                    # is soft-failed in turn), so a peer refusing it could never agree.
                    built_on = AUTH_STORE in entry.ops or self._built_on(entry.id, children, memo)
                    reason = self._refuse_soft_failed(entry, built_on)
                    wait = not built_on
            except ChazError as exc:
                reason = str(exc) or type(exc).__name__
            except (sqlite3.DatabaseError, MemoryError, RecursionError, OverflowError) as exc:
                reason = f"could not be stored: {type(exc).__name__}: {exc}"
            except Exception as exc:
                log.exception("bug while ingesting entry %s", entry.id)
                reason = f"internal error: {type(exc).__name__}"
            if reason is not None:
                if refuse_soft_failed and "is not known" in reason and self._waits_on_limbo(entry):
                    wait = True  # built on a refused entry: refused alike
                    reason = (
                        "soft-failed on arrival: it builds on an entry refused as "
                        "soft-failed, and no entry of a key that may write builds on it"
                    )
                self.conn.execute("ROLLBACK TO one")
                self.conn.execute("RELEASE one")
                del applied.entries[marks[0] :], applied.rows[marks[1] :]
                del applied.fields[marks[2] :]
                applied.reset_dbs, applied.auth_dbs = reset_before, auth_before
                for undo in reversed(undo_log[undo_mark:]):
                    undo()
                del undo_log[undo_mark:]
                self._tips.pop(entry.db_id, None)
                if wait:  # after the rollback: it stays, in this transaction
                    self.limbo.put(entry)
                    self._on_undo(self.limbo.reset)
                result.rejected.append((entry.id, reason))
                continue
            self.conn.execute("RELEASE one")
            if self.limbo.pop(entry.id):
                self._on_undo(self.limbo.reset)
            batch[entry.id] = _Tip(entry.height, auth_set, entry.db_id, failed)
            result.accepted.append(entry.id)
            result.soft_failed += int(failed)

    # ---- soft-failed on arrival ---------------------------------------------------------

    def _with_limbo(self, entries: list[Entry]) -> list[Entry]:
        """``entries`` and the refused entries waiting in limbo that they build on."""
        ids = {e.id for e in entries}
        out = list(entries)
        todo = [p for e in entries for p in e.parents if p not in ids]
        while todo:
            parent = todo.pop()
            waiting = self.limbo.get(parent) if parent not in ids else None
            if waiting is not None and parent not in ids:
                ids.add(parent)
                out.append(waiting)
                todo.extend(p for p in waiting.parents if p not in ids)
        return out

    def _waits_on_limbo(self, entry: Entry) -> bool:
        """Whether ``entry`` builds on an entry in limbo, and on nothing else unknown, and is
        by a key the database's auth entries name (only such a key's entry can ever be
        valid, so a stranger cannot fill limbo with fresh keys)."""
        graph = self.graphs.get(entry.db_id)
        if graph is None or entry.author not in graph.ops:
            return False
        waiting = [p for p in entry.parents if self.limbo.has(p)]
        return bool(waiting) and all(p in waiting or self._known(p) for p in entry.parents)

    def _built_on(self, eid: str, children: dict[str, list[Entry]], memo: dict[str, bool]) -> bool:
        """Whether an entry of this batch builds on ``eid``, directly or through others of the
        batch, and is an auth entry (kept, within the bound: see ``_ingest_round``) or by a key
        that holds write now (in the resolved state so far). A chain of a revoked key's data
        entries counts only with such an entry at its end."""

        def trusted(child: Entry) -> bool:
            return AUTH_STORE in child.ops or self._holds(child.db_id, child.author, Level.WRITE)

        stack = [(eid, False)]
        while stack:
            node, expanded = stack.pop()
            if not expanded:
                if node in memo:
                    continue
                stack.append((node, True))
                stack.extend((c.id, False) for c in children.get(node, ()) if c.id not in memo)
            else:
                memo[node] = any(
                    memo.get(c.id, False) or trusted(c) for c in children.get(node, ())
                )
        return memo[eid]

    def _refuse_soft_failed(self, entry: Entry, built_on: bool) -> str | None:
        """Why a stored-but-soft-failed arrival is refused after all, or None to keep it."""
        db = entry.db_id
        if not built_on:  # it waits in limbo (``ingest`` puts it there, after its rollback)
            return (
                f"soft-failed on arrival: key {entry.author[:24]}… may not write here now, "
                "and no entry of a key that may builds on this one"
            )
        _, decider = self._allows_write(db, entry.author)
        found = self.conn.execute(
            "SELECT count(*), coalesce(sum(length(data)), 0) FROM entries "
            "WHERE db = ? AND author = ? AND soft_failed = 1 "
            "AND seq > coalesce((SELECT seq FROM entries WHERE id = ?), 0)",
            (db, entry.author, decider or ""),
        ).fetchone()
        kept, size = int(found[0]), int(found[1])  # this one included
        if kept > self.kept.soft_failed or size > self.kept.soft_failed_bytes:
            return (
                f"soft-failed on arrival, and key {entry.author[:24]}… has "
                f"{self.kept.soft_failed} such entries or "
                f"{self.kept.soft_failed_bytes // (1024 * 1024)} MiB kept here already "
                "(the most one key may make a peer keep)"
            )
        return None

    @contextmanager
    def _transaction(self) -> Iterator[list[Undo]]:
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

    def _known(self, eid: str) -> bool:
        return (
            self.conn.execute("SELECT 1 FROM entries WHERE id = ?", (eid,)).fetchone() is not None
        )

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        for undo in reversed(self._undo or []):
            undo()
        self._tips.clear()  # caches may hold uncommitted tips; reload from disk


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

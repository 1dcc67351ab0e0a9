"""Settling: the auth state resolved by authority, and which entries are soft-failed.

Revocation wins (SPEC §2): when a database's resolution (``AuthGraph.resolution``) changes,
the ``auth`` table follows it, auth entries are marked soft-failed or not, and the data
entries of each key whose grant changed are judged again: an entry is soft-failed unless its
author holds write now or it is an ancestor of the auth entry that took the write away. Its
rows are hidden (``rows.hidden``) and its field sets give way to the latest live one.
Everything is written on the ledger's connection in the caller's transaction.
"""

from __future__ import annotations

import heapq
import json
import logging
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager

from chazbot.ledger.auth import Level
from chazbot.ledger.authgraph import AuthGraph, Resolution
from chazbot.ledger.records import Applied, Undo
from chazbot.ledger.tips import Tips

log = logging.getLogger(__name__)


class Settling:
    """Keeps the stored auth state and soft-failed marks in line with each resolution."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        graphs: dict[str, AuthGraph],
        tips: Tips,
        on_undo: Callable[[Undo], None],
    ) -> None:
        self.conn = conn
        self.graphs = graphs
        self.tips = tips
        self.on_undo = on_undo

    def settle_auth(self, db: str, applied: Applied) -> list[str]:
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

        self.on_undo(lambda: graph.restore(old if old.order else None))
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
        tips = self.tips.cached(db)
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

    def settle_stored(
        self, db: str, transaction: Callable[[], AbstractContextManager[object]]
    ) -> None:
        """At open: make what the file holds agree with the resolution (a file written by an
        older chazbot folded auth changes by height; one damaged may disagree too), in a
        ``transaction`` of its own where anything is to change."""
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
        with transaction():
            for key in keys:
                self._write_grant(db, graph, found, key)
            flagged = [(eid, graph.index[eid] in found.failed) for eid in wrong]
            resettle = set(keys) | self._flag_auth_entries(db, flagged)
            for key in sorted(resettle):
                self.resettle(db, key, applied)

    def allows_write(self, db: str, key: str) -> tuple[bool, str | None]:
        """Whether ``key`` holds write in the current state, and the auth entry deciding it."""
        graph = self.graphs.get(db)
        found = graph.current(key) if graph is not None else None
        if found is None:
            return False, None
        grant, decider = found
        return grant.active and grant.perm.allows(Level.WRITE), decider

    def holds(self, db: str, key: str, level: Level) -> bool:
        """Whether ``key`` holds ``level`` or better in the resolved current state."""
        graph = self.graphs.get(db)
        found = graph.current(key) if graph is not None else None
        return found is not None and found[0].active and found[0].perm.allows(level)

    def resettle(self, db: str, key: str, applied: Applied) -> None:
        """Key's current grant changed: soft-fail or restore its data entries accordingly."""
        candidates = self.conn.execute(
            "SELECT id, height, soft_failed FROM entries "
            "WHERE db = ? AND author = ? AND is_data = 1",
            (db, key),
        ).fetchall()
        if not candidates:
            return
        allows, decider = self.allows_write(db, key)
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
        self.tips.forget(db)
        applied.reset_dbs.add(db)

"""Arrivals: entries from elsewhere, validated and stored parents first, each alone.

An entry that would be soft-failed on arrival (its author's write was taken away before it
came) is refused unless an entry of a key holding write builds on it; refused ones wait in
``Limbo`` in case such a child comes later, or the auth state changes so their author may
write again. Each entry is validated and stored by the ledger core (``Storing``), in its own
savepoint of one transaction.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Protocol

from chazbot.errors import ChazError
from chazbot.ledger.auth import AUTH_STORE, Level
from chazbot.ledger.authgraph import AuthGraph
from chazbot.ledger.entry import Entry
from chazbot.ledger.limbo import Limbo
from chazbot.ledger.records import Applied, IngestResult, KeptLimits, Undo
from chazbot.ledger.settle import Settling
from chazbot.ledger.tips import Tip, Tips

log = logging.getLogger(__name__)


class Storing(Protocol):
    """What arrivals need of the ledger core: its transaction and its one-entry steps."""

    def transaction(self) -> AbstractContextManager[list[Undo]]: ...

    def on_undo(self, action: Undo) -> None: ...

    def known(self, eid: str) -> bool: ...

    def validate(self, entry: Entry, batch: dict[str, Tip]) -> int: ...

    def store(self, entry: Entry, auth_set: int, applied: Applied) -> bool: ...


class Arrivals:
    """Takes in entries from elsewhere; holds the limbo of refused soft-failed ones."""

    def __init__(
        self,
        core: Storing,
        conn: sqlite3.Connection,
        limits: KeptLimits,
        graphs: dict[str, AuthGraph],
        tips: Tips,
        settling: Settling,
    ) -> None:
        self.core = core
        self.conn = conn
        self.kept = limits
        self.graphs = graphs
        self.tips = tips
        self.settling = settling
        self.limbo = Limbo(conn, limits.limbo_bytes_per_key, limits.limbo_bytes)

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
        with self.core.transaction() as undo_log:
            batch: dict[str, Tip] = {}
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
        return self.settling.holds(db, key, Level.WRITE)

    def _ingest_round(
        self,
        entries: Iterable[Entry],
        refuse_soft_failed: bool,
        result: IngestResult,
        applied: Applied,
        undo_log: list[Undo],
        batch: dict[str, Tip],
    ) -> None:
        todo = sorted(self._with_limbo(list(entries)), key=Entry.sort_key)
        children: dict[str, list[Entry]] = {}
        for entry in todo:
            for parent in entry.parents:
                children.setdefault(parent, []).append(entry)
        memo: dict[str, bool] = {}
        seen: set[str] = set()
        for entry in todo:
            if entry.id in seen or self.core.known(entry.id):
                result.duplicates += 1
                if entry.id not in seen and self.limbo.pop(entry.id):  # stored meanwhile
                    self.core.on_undo(self.limbo.reset)
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
                auth_set = self.core.validate(entry, batch)
                failed = self.core.store(entry, auth_set, applied)
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
                self.tips.forget(entry.db_id)
                if wait:  # after the rollback: it stays, in this transaction
                    self.limbo.put(entry)
                    self.core.on_undo(self.limbo.reset)
                result.rejected.append((entry.id, reason))
                continue
            self.conn.execute("RELEASE one")
            if self.limbo.pop(entry.id):
                self.core.on_undo(self.limbo.reset)
            batch[entry.id] = Tip(entry.height, auth_set, entry.db_id, failed)
            result.accepted.append(entry.id)
            result.soft_failed += int(failed)

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
        return bool(waiting) and all(p in waiting or self.core.known(p) for p in entry.parents)

    def _built_on(self, eid: str, children: dict[str, list[Entry]], memo: dict[str, bool]) -> bool:
        """Whether an entry of this batch builds on ``eid``, directly or through others of the
        batch, and is an auth entry (kept, within the bound: see ``_ingest_round``) or by a key
        that holds write now (in the resolved state so far). A chain of a revoked key's data
        entries counts only with such an entry at its end."""

        def trusted(child: Entry) -> bool:
            if AUTH_STORE in child.ops:
                return True
            return self.settling.holds(child.db_id, child.author, Level.WRITE)

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
        _, decider = self.settling.allows_write(db, entry.author)
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

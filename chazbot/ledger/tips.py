"""The tips of each database (entries nothing builds on yet), cached from the ``tips`` table.

The cache is the ledger's own: a step that changes tips updates it, one rolled back forgets
it (``forget``, ``clear``), and the next read loads it again from the file.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from chazbot.errors import NotFound
from chazbot.ledger.entry import MAX_PARENTS


@dataclass
class Tip:
    """What a step needs of an entry it may build on."""

    height: int
    auth_set: int
    db: str
    soft_failed: bool = False


class Tips:
    """Each database's tips by entry id, loaded on first use."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._cache: dict[str, dict[str, Tip]] = {}

    def of(self, db: str) -> dict[str, Tip]:
        """The tips of ``db`` (empty for a database this file does not hold)."""
        tips = self._cache.get(db)
        if tips is None:
            tips = {}
            query = (
                "SELECT e.id, e.height, e.auth_set, e.soft_failed FROM tips t "
                "JOIN entries e ON e.id = t.id WHERE t.db = ?"
            )
            for eid, height, auth_set, failed in self.conn.execute(query, (db,)):
                tips[eid] = Tip(height, auth_set, db, bool(failed))
            self._cache[db] = tips
        return tips

    def cached(self, db: str) -> dict[str, Tip]:
        """The tips of ``db`` if loaded, else nothing (marks need not load them)."""
        return self._cache.get(db, {})

    def forget(self, db: str) -> None:
        self._cache.pop(db, None)

    def clear(self) -> None:
        """Forget every database's tips (they may hold uncommitted ones)."""
        self._cache.clear()

    def info(self, eid: str, batch: dict[str, Tip], db: str) -> Tip | None:
        """What is known of entry ``eid``: from this step's ``batch``, a tip, or the file."""
        info = batch.get(eid) or self._cache.get(db, {}).get(eid)  # usually a current tip
        if info is not None:
            return info
        row = self.conn.execute(
            "SELECT height, auth_set, db, soft_failed FROM entries WHERE id = ?", (eid,)
        )
        found = row.fetchone()
        return Tip(found[0], found[1], found[2], bool(found[3])) if found else None

    def live_parents(self, db: str) -> list[str]:
        """The tips to build on: soft-failed tips are replaced by their nearest live ancestors."""
        tips = self.of(db)
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

    def height_of(self, eid: str, db: str) -> int:
        info = self.info(eid, {}, db)
        if info is None:
            raise NotFound(f"parent {eid[:19]}… is not known")
        return info.height

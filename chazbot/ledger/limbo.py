"""Refused soft-failed entries, kept on disk a while in case something builds on them.

An entry soft-failed on arrival is refused (``LedgerCore.ingest``) unless an entry of a key
holding write builds on it. Such a child can come later than its parent: a writer that had
not heard of the revocation built on the entry, and its peer sends the child in another
batch (the sender's cursor has moved past the parent by then, so it is not sent again). The
parent then waits here, as does an entry that builds on it, until the child comes, or until
the auth state changes so that its author may write after all (a revocation that was itself
soft-failed): then it is taken in.

Only what may still gain an honest child is kept: an entry refused because it arrived
soft-failed (it passed every other check), or one that builds on such an entry and is by a
key the database's auth entries name. Entries refused as invalid, or past the bound of what
one key may make a peer keep, never come here. The table is bounded per author key and in
all (oldest first out), so a flooding key only ever pushes out its own entries until the
total bound. It lives in the state file (peer-local: never synced or relayed), so a restart
between the parent and its child loses neither.

Every change is made in the caller's transaction; ``reset`` drops the cached sizes when one
is rolled back.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from chazbot.errors import ChazError
from chazbot.ledger.entry import Entry


class Limbo:
    """Entries by id, at most ``per_key`` bytes per author and ``total`` bytes in all."""

    def __init__(self, conn: sqlite3.Connection, per_key: int, total: int) -> None:
        self.conn = conn
        self.per_key = per_key
        self.total = total
        self._size: int | None = None
        self._by_author: dict[str, int] = {}

    def __len__(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM limbo").fetchone()[0])

    @property
    def size(self) -> int:
        if self._size is None:
            found = self.conn.execute("SELECT coalesce(sum(size), 0) FROM limbo").fetchone()
            self._size = int(found[0])
        return self._size

    def _author_size(self, author: str) -> int:
        size = self._by_author.get(author)
        if size is None:
            found = self.conn.execute(
                "SELECT coalesce(sum(size), 0) FROM limbo WHERE author = ?", (author,)
            ).fetchone()
            size = self._by_author[author] = int(found[0])
        return size

    def reset(self) -> None:
        """Forget the cached sizes (after a rollback)."""
        self._size = None
        self._by_author.clear()

    def has(self, eid: str) -> bool:
        return self.conn.execute("SELECT 1 FROM limbo WHERE id = ?", (eid,)).fetchone() is not None

    def get(self, eid: str) -> Entry | None:
        found = self.conn.execute("SELECT data FROM limbo WHERE id = ?", (eid,)).fetchone()
        return self._decode(eid, found[0]) if found else None

    def _decode(self, eid: str, data: bytes) -> Entry | None:
        try:
            return Entry.decode(bytes(data), eid)
        except ChazError:  # damaged on disk: it is dropped, never taken in
            self.pop(eid)
            return None

    def put(self, entry: Entry) -> None:
        size = len(entry.data)
        if size > self.per_key or self.has(entry.id):
            return
        while self._author_size(entry.author) + size > self.per_key:
            self._drop_oldest("WHERE author = ?", (entry.author,))
        while self.size + size > self.total:
            self._drop_oldest("", ())
        total, mine = self.size, self._author_size(entry.author)  # cached before the change
        self.conn.execute(
            "INSERT INTO limbo (id, db, author, size, data) VALUES (?, ?, ?, ?, ?)",
            (entry.id, entry.db_id, entry.author, size, entry.data),
        )
        self._size, self._by_author[entry.author] = total + size, mine + size

    def _drop_oldest(self, where: str, params: tuple[str, ...]) -> None:
        found = self.conn.execute(
            f"SELECT id FROM limbo {where} ORDER BY seq LIMIT 1", params
        ).fetchone()
        if found is None:  # the cached sizes were stale
            self.reset()
            return
        self.pop(str(found[0]))

    def pop(self, eid: str) -> bool:
        """Drop ``eid``; whether it was here."""
        found = self.conn.execute("SELECT author, size FROM limbo WHERE id = ?", (eid,)).fetchone()
        if found is None:
            return False
        author, size = str(found[0]), int(found[1])
        total, mine = self.size, self._author_size(author)  # cached before the change
        self.conn.execute("DELETE FROM limbo WHERE id = ?", (eid,))
        self._size, self._by_author[author] = total - size, mine - size
        return True

    def ready(self, db: str, holds: Callable[[str], bool]) -> list[Entry]:
        """The entries of ``db`` waiting here whose author ``holds`` now, oldest first."""
        authors = [
            str(a)
            for (a,) in self.conn.execute("SELECT DISTINCT author FROM limbo WHERE db = ?", (db,))
        ]
        wanted = [a for a in authors if holds(a)]
        if not wanted:
            return []
        out = []
        for eid, data in self.conn.execute(
            "SELECT id, data FROM limbo WHERE db = ? AND author IN "
            "(SELECT value FROM json_each(?)) ORDER BY seq",
            (db, json.dumps(wanted)),
        ).fetchall():
            entry = self._decode(str(eid), data)
            if entry is not None:
                out.append(entry)
        return out

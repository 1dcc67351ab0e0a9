"""Refused soft-failed entries, kept in memory a while in case something builds on them.

An entry soft-failed on arrival is refused (``LedgerCore.ingest``) unless an entry of a key
holding write builds on it. Such a child can come later than its parent: a writer that had
not heard of the revocation built on the entry, and its peer sends the child in another
batch. The parent then waits here, bounded per author key and in all (oldest first out),
so a flooding key only ever pushes out its own entries until the total bound; it is lost on
restart. Nothing here is stored or relayed.
"""

from __future__ import annotations

from collections import OrderedDict

from chazbot.ledger.entry import Entry


class Limbo:
    """Entries by id, at most ``per_key`` bytes per author and ``total`` bytes in all."""

    def __init__(self, per_key: int, total: int) -> None:
        self.per_key = per_key
        self.total = total
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._by_author: dict[str, OrderedDict[str, int]] = {}  # id -> bytes, oldest first
        self._size = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        return self._size

    def get(self, eid: str) -> Entry | None:
        return self._entries.get(eid)

    def put(self, entry: Entry) -> None:
        size = len(entry.data)
        if entry.id in self._entries or size > self.per_key:
            return
        mine = self._by_author.setdefault(entry.author, OrderedDict())
        while sum(mine.values()) + size > self.per_key:
            self.pop(next(iter(mine)))
        while self._size + size > self.total:
            self.pop(next(iter(self._entries)))
        mine = self._by_author.setdefault(entry.author, OrderedDict())
        self._entries[entry.id] = entry
        mine[entry.id] = size
        self._size += size

    def pop(self, eid: str) -> Entry | None:
        entry = self._entries.pop(eid, None)
        if entry is not None:
            mine = self._by_author[entry.author]
            del mine[eid]
            if not mine:
                del self._by_author[entry.author]
            self._size -= len(entry.data)
        return entry

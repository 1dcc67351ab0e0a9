"""Taking back a forget for a while (#36): what a person forgot in a room can be brought back.

Forgetting in words may misread a sentence, and forgetting by command may be a slip; both
hide at once and keep, per person in that room, what they hid for ``UNDO_MINUTES``. "undo"
(in words, in any language of ``lexicon``) or ``memory undo`` writes those rows again, as they
were (same key, value, tags, provenance and scope): the tombstones stay, newer rows cover them.
Held in memory only (a restart ends the window), bounded per room; pure apart from the clock
passed in.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from chazbot.memory.rows import MemoryRow

UNDO_MINUTES = 10
MAX_PEOPLE = 64
"""People per room with an undo pending (the oldest is dropped first)."""
MAX_ROWS = 1000
"""Rows one undo brings back (a ``forget-mine all`` of more keeps only the newest)."""


@dataclass(frozen=True)
class Forgotten:
    """What one person hid last in one room, in which DB, and until when it can come back."""

    db: str
    rows: tuple[MemoryRow, ...]
    until: float


class UndoSlots:
    """Per person, the last forget in one room."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._slots: OrderedDict[str, Forgotten] = OrderedDict()

    def put(self, person: str, db: str, rows: list[MemoryRow]) -> None:
        if not rows:
            return
        self._slots.pop(person, None)
        while len(self._slots) >= MAX_PEOPLE:
            self._slots.popitem(last=False)
        kept = tuple(sorted(rows, key=lambda r: (r.ts, r.order), reverse=True)[:MAX_ROWS])
        self._slots[person] = Forgotten(db, kept, self._clock() + UNDO_MINUTES * 60)

    def take(self, person: str) -> Forgotten | None:
        """The person's pending forget (removed), or None when there is none or it expired."""
        found = self._slots.pop(person, None)
        if found is None or found.until < self._clock():
            return None
        return found


__all__ = ["MAX_ROWS", "UNDO_MINUTES", "Forgotten", "UndoSlots"]

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


MAX_FORGETS = 50
"""Forgets one person may take back one by one in a room (the oldest drops first)."""
OFFER_MINUTES = 10
"""How long a numbered list of rows a forget could mean waits for the person's choice."""


@dataclass(frozen=True)
class Offered:
    """Rows one forget could mean, listed to the person in this order, in which DB."""

    db: str
    rows: tuple[MemoryRow, ...]
    until: float
    lang: str = "en"  # the language the list was given in, for the reply to the choice


@dataclass(frozen=True)
class Forgotten:
    """What one person hid last in one room, in which DB, and until when it can come back."""

    db: str
    rows: tuple[MemoryRow, ...]
    until: float


class UndoSlots:
    """Per person, their forgets of the last ``UNDO_MINUTES`` in one room, newest last: each
    "undo" brings back one, the newest first (#45: every forget of the window, one by one)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._slots: OrderedDict[str, list[Forgotten]] = OrderedDict()
        self._offers: dict[str, Offered] = {}

    def put(self, person: str, db: str, rows: list[MemoryRow]) -> None:
        if not rows:
            return
        now = self._clock()
        stack = [f for f in self._slots.pop(person, []) if f.until >= now][-(MAX_FORGETS - 1) :]
        while len(self._slots) >= MAX_PEOPLE:
            self._slots.popitem(last=False)
        kept = tuple(sorted(rows, key=lambda r: (r.ts, r.order), reverse=True)[:MAX_ROWS])
        self._slots[person] = [*stack, Forgotten(db, kept, now + UNDO_MINUTES * 60)]

    def take(self, person: str) -> Forgotten | None:
        """The person's newest pending forget (removed), or None when there is none left in
        the window."""
        stack = self._slots.get(person, [])
        now = self._clock()
        while stack:
            found = stack.pop()
            if found.until >= now:
                if not stack:
                    self._slots.pop(person, None)
                return found
        self._slots.pop(person, None)
        return None

    def offer(self, person: str, db: str, rows: list[MemoryRow], lang: str = "en") -> None:
        """Rows a forget could mean, listed to the person to choose from (``chosen``)."""
        until = self._clock() + OFFER_MINUTES * 60
        self._offers[person] = Offered(db, tuple(rows), until, lang)
        while len(self._offers) > MAX_PEOPLE:
            self._offers.pop(next(iter(self._offers)))

    def chosen(self, person: str) -> Offered | None:
        """The person's open offer (removed), or None when there is none or it expired."""
        found = self._offers.pop(person, None)
        return found if found is not None and found.until >= self._clock() else None

    def offered(self, person: str) -> bool:
        found = self._offers.get(person)
        return found is not None and found.until >= self._clock()


__all__ = [
    "MAX_FORGETS",
    "MAX_ROWS",
    "OFFER_MINUTES",
    "UNDO_MINUTES",
    "Forgotten",
    "Offered",
    "UndoSlots",
]

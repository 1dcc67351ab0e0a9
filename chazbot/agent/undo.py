"""Taking back a forget for a while (#36): what a person forgot in a room can be brought back.

Forgetting in words may misread a sentence, and forgetting by command may be a slip; both
hide at once and keep, per person in that room, what they hid for ``UNDO_MINUTES``. "undo"
(in words, in any language of ``lexicon``) or ``memory undo`` writes those rows again, as they
were (same key, value, tags, provenance and scope): the tombstones stay, newer rows cover them.
One forget may hide rows of several agents (``forget-mine`` in a DM or on the memory page
reads every agent the room may use): each agent's rows are kept apart, and one undo brings
them all back.

Held in memory only (a restart ends the window), pure apart from the clock passed in. Bounded
per person (their last forget, at most ``MAX_ROWS`` rows) and per room (``MAX_PEOPLE`` people
and ``MAX_ROOM_ROWS`` rows pending). The memory page is one room for everyone who signs in,
so no person's pending undo is ever dropped for another's (#47: the 65th person's forget
dropped the first one's): a slot ends when it expires or its person forgets again; when a
room is full, a newcomer's forget is done without an undo (``put`` says so, and the reply
offers none).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from chazbot.memory.rows import MemoryRow

UNDO_MINUTES = 10
MAX_PEOPLE = 4096
"""People per room with an undo pending: past it, a newcomer's forget keeps no undo (nobody's
pending one is dropped for it)."""
MAX_ROWS = 1000
"""Rows one undo brings back (a ``forget-mine all`` of more keeps only the newest)."""
MAX_ROOM_ROWS = 64 * MAX_ROWS
"""Rows pending in one room, everyone's together (what 64 people's biggest forgets held)."""


@dataclass(frozen=True)
class Forgotten:
    """What one person hid last in one room, per DB, and until when it can come back."""

    parts: tuple[tuple[str, tuple[MemoryRow, ...]], ...]
    """``(db, rows)`` for each DB that lost rows."""
    until: float

    def rows_in(self, db: str) -> tuple[MemoryRow, ...]:
        return next((rows for d, rows in self.parts if d == db), ())

    @property
    def dbs(self) -> tuple[str, ...]:
        return tuple(d for d, _ in self.parts)

    @property
    def count(self) -> int:
        return sum(len(rows) for _, rows in self.parts)


class UndoSlots:
    """Per person, the last forget in one room (see the module's bounds)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        max_people: int = MAX_PEOPLE,
        max_rows: int = MAX_ROOM_ROWS,
    ) -> None:
        self._clock = clock
        self._max_people = max_people
        self._max_rows = max_rows
        self._rows = 0  # rows held in every slot
        self._slots: dict[str, Forgotten] = {}

    def __len__(self) -> int:
        return len(self._slots)

    def put(self, person: str, db: str, rows: Sequence[MemoryRow]) -> bool:
        """Keep ``rows`` hidden in ``db`` as ``person``'s last forget here."""
        return self.put_all(person, {db: rows})

    def put_all(self, person: str, parts: Mapping[str, Sequence[MemoryRow]]) -> bool:
        """Keep one forget of rows in several DBs as ``person``'s last here (it replaces
        their previous one). False when nothing is kept: no rows, or the room holds
        ``max_people`` pending undos (or ``max_rows`` rows) of others: none of theirs is
        dropped for it."""
        newest = sorted(
            ((r.ts, r.order, db, r) for db, rows in parts.items() for r in rows),
            key=lambda t: (t[0], t[1]),
            reverse=True,
        )[:MAX_ROWS]
        if not newest:
            return False
        now = self._clock()
        self._sweep(now)
        self._drop(person)
        if len(self._slots) >= self._max_people or self._rows + len(newest) > self._max_rows:
            return False
        kept: dict[str, list[MemoryRow]] = {}
        for _, _, db, row in newest:
            kept.setdefault(db, []).append(row)
        frozen = tuple((db, tuple(rows)) for db, rows in kept.items())
        self._slots[person] = Forgotten(frozen, now + UNDO_MINUTES * 60)
        self._rows += len(newest)
        return True

    def take(self, person: str, db: str | None = None) -> Forgotten | None:
        """The person's pending forget (removed), or None when there is none or it expired;
        with ``db``, only its rows there (None when it has none; the other DBs' rows stay
        pending, as they were)."""
        found = self._drop(person)
        if found is None or found.until < self._clock():
            return None
        if db is None:
            return found
        rest = tuple((d, rows) for d, rows in found.parts if d != db)
        if rest:
            self._slots[person] = Forgotten(rest, found.until)
            self._rows += sum(len(rows) for _, rows in rest)
        mine = found.rows_in(db)
        return Forgotten(((db, mine),), found.until) if mine else None

    def _drop(self, person: str) -> Forgotten | None:
        found = self._slots.pop(person, None)
        if found is not None:
            self._rows -= found.count
        return found

    def _sweep(self, now: float) -> None:
        """Drop the slots that expired."""
        for person in [p for p, slot in self._slots.items() if slot.until < now]:
            self._drop(person)


__all__ = ["MAX_PEOPLE", "MAX_ROOM_ROWS", "MAX_ROWS", "UNDO_MINUTES", "Forgotten", "UndoSlots"]

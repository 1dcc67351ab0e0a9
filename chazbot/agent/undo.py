"""Taking back a forget for a while (#36): what a person forgot in a room can be brought back.

Forgetting in words may misread a sentence, and forgetting by command may be a slip; both
hide at once and keep, per person in that room, what they hid for ``UNDO_MINUTES``. "undo"
(in words, in any language of ``lexicon``) or ``memory undo`` writes those rows again, as they
were (same key, value, tags, provenance and scope): the tombstones stay, newer rows cover them.
One forget may hide rows of several agents (``forget-mine`` in a DM or on the memory page
reads every agent the room may use): each agent's rows are kept apart, and one undo brings
them all back.

Every forget of the window can be taken back, one "undo" each, the newest first (#45): a person
keeps up to ``MAX_FORGETS`` of them. A forget that could mean several rows lists them and waits
for the person's choice (``offer``/``chosen``, #45).

Held in memory only (a restart ends the window), pure apart from the clock passed in. Bounded
per person (``MAX_FORGETS`` forgets, each at most ``MAX_ROWS`` rows) and per room
(``MAX_PEOPLE`` people and ``MAX_ROOM_ROWS`` rows pending). The memory page is one room for
everyone who signs in, so no person's pending undo is ever dropped for another's (#47: the
65th person's forget dropped the first one's): a forget's slot ends when it expires or is
taken back; when a room is full, a newcomer's forget is done without an undo (``put`` says so,
and the reply offers none).
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


MAX_FORGETS = 50
"""Forgets one person may take back one by one in a room (their oldest drops first)."""
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
    """Per person, their forgets of the last ``UNDO_MINUTES`` in one room, newest last (see
    the module's bounds)."""

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
        self._slots: dict[str, list[Forgotten]] = {}
        self._offers: dict[str, Offered] = {}

    def __len__(self) -> int:
        return len(self._slots)

    def put(self, person: str, db: str, rows: Sequence[MemoryRow]) -> bool:
        """Keep ``rows`` hidden in ``db`` as ``person``'s newest forget here."""
        return self.put_all(person, {db: rows})

    def put_all(self, person: str, parts: Mapping[str, Sequence[MemoryRow]]) -> bool:
        """Keep one forget of rows in several DBs as ``person``'s newest here (their older
        ones stay, up to ``MAX_FORGETS``). False when nothing is kept: no rows, or the room
        holds ``max_people`` people's pending undos (or ``max_rows`` rows) of others: none of
        theirs is dropped for it."""
        newest = sorted(
            ((r.ts, r.order, db, r) for db, rows in parts.items() for r in rows),
            key=lambda t: (t[0], t[1]),
            reverse=True,
        )[:MAX_ROWS]
        if not newest:
            return False
        now = self._clock()
        self._sweep(now)
        stack = self._slots.get(person, [])
        while len(stack) >= MAX_FORGETS:  # the person's oldest forget goes first
            self._rows -= stack.pop(0).count
        if person not in self._slots and len(self._slots) >= self._max_people:
            return False
        if self._rows + len(newest) > self._max_rows:
            if not stack:
                self._slots.pop(person, None)
            return False
        kept: dict[str, list[MemoryRow]] = {}
        for _, _, db, row in newest:
            kept.setdefault(db, []).append(row)
        frozen = tuple((db, tuple(rows)) for db, rows in kept.items())
        self._slots[person] = [*stack, Forgotten(frozen, now + UNDO_MINUTES * 60)]
        self._rows += len(newest)
        return True

    def take(self, person: str, db: str | None = None) -> Forgotten | None:
        """The person's newest pending forget (removed), or None when there is none left in
        the window; with ``db``, only its rows there (None when it has none; its other DBs'
        rows stay pending, as they were)."""
        self._sweep(self._clock())
        stack = self._slots.get(person)
        if not stack:
            return None
        found = stack.pop()
        self._rows -= found.count
        if not stack:
            del self._slots[person]
        if db is None:
            return found
        rest = tuple((d, rows) for d, rows in found.parts if d != db)
        if rest:
            self._slots.setdefault(person, []).append(Forgotten(rest, found.until))
            self._rows += sum(len(rows) for _, rows in rest)
        mine = found.rows_in(db)
        return Forgotten(((db, mine),), found.until) if mine else None

    def offer(self, person: str, db: str, rows: Sequence[MemoryRow], lang: str = "en") -> None:
        """Rows a forget could mean, listed to the person to choose from (``chosen``)."""
        until = self._clock() + OFFER_MINUTES * 60
        self._offers[person] = Offered(db, tuple(rows), until, lang)
        while len(self._offers) > self._max_people:
            self._offers.pop(next(iter(self._offers)))

    def chosen(self, person: str) -> Offered | None:
        """The person's open offer (removed), or None when there is none or it expired."""
        found = self._offers.pop(person, None)
        return found if found is not None and found.until >= self._clock() else None

    def offered(self, person: str) -> bool:
        found = self._offers.get(person)
        return found is not None and found.until >= self._clock()

    def _sweep(self, now: float) -> None:
        """Drop the forgets that expired."""
        for person in list(self._slots):
            stack = self._slots[person]
            live = [f for f in stack if f.until >= now]
            self._rows -= sum(f.count for f in stack) - sum(f.count for f in live)
            if live:
                self._slots[person] = live
            else:
                del self._slots[person]


__all__ = [
    "MAX_FORGETS",
    "MAX_PEOPLE",
    "MAX_ROOM_ROWS",
    "MAX_ROWS",
    "OFFER_MINUTES",
    "UNDO_MINUTES",
    "Forgotten",
    "Offered",
    "UndoSlots",
]

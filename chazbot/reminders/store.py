"""Reminders kept as signed entries in the agent's own DB (#37), so they survive restarts and
backups and travel with the agent.

- ``reminders``: a field per reminder (``r<hex>``) holding what was understood: the room it
  was set in (its session), who set it, what to say, the zone, the first time (ISO with its
  offset), the recurrence (an RRULE or null), the language, and ``from``: the provenance of
  what was said (the room, who, its audience then; SPEC §5c), so a list obeys the same
  audience rule as a row; cancelling sets ``cancelled``.
- ``reminders_sent``: per reminder, the last occurrence delivered (ISO): what ``runner``
  advances after each delivery, so a restart never delivers an occurrence twice.
- ``people_tz``: per person (MXID), the zone they chose with ``tz``.

A field read back that does not parse is skipped (a peer with newer code may write more).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chazbot.errors import InputError, NotFound
from chazbot.ledger import KeyPair, Ledger
from chazbot.memory.audience import Audience, Provenance
from chazbot.reminders.when import MAX_TEXT, Understood, occurrences_after, zone

REMINDERS_STORE = "reminders"
SENT_STORE = "reminders_sent"
ZONES_STORE = "people_tz"
MAX_ACTIVE_PER_PERSON = 20
"""Active reminders a person who is not an admin may hold, with every agent of the peer
together (#47: counted per agent, two agents let a person hold 40)."""
RULE_SHAPE = re.compile(
    r"FREQ=(DAILY|WEEKLY|MONTHLY)(;INTERVAL=([1-9]|1[0-2]))?(;BYDAY=[+-]?[1-4]?(MO|TU|WE|TH|FR|SA|SU))?"
    r";BYHOUR=(1?[0-9]|2[0-3]);BYMINUTE=[1-5]?[0-9];BYSECOND=0"
)
"""The rules chazbot makes (``reminders.when``), each happening at least every year: a stored
rule of another shape is no reminder. Any writer of the agent's database can store one, and
one that never happens ("FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30") took dateutil 6 s a look."""
CATCH_UP_STEPS = 10_000
"""Occurrences a recurrence is stepped through to find the latest one missed."""


@dataclass(frozen=True)
class Reminder:
    id: str
    room: str
    by: str
    what: str
    tz: str
    first: datetime
    rule: str | None
    lang: str
    cancelled: bool = False
    sent: datetime | None = None
    origin: Provenance | None = None
    """Where it was set and who heard it then (None: set before this was kept, or by the
    operator)."""

    def told_in(self, audience: Audience | None) -> bool:
        """Whether this reminder may be listed where ``audience`` hears (None or the full
        view: the operator's): only in the room it was set in, and only when the row rule
        (SPEC §5c) lets that room's readers now see what was said (fail closed: a reminder
        with no provenance counts as said to the room's members of its time)."""
        if audience is None or audience.full:
            return True
        if audience.room != self.room:
            return False
        origin = self.origin or Provenance(self.room, self.by, None)
        return audience.sees(origin, self.room)

    @property
    def active(self) -> bool:
        return not self.cancelled and self.next_due() is not None

    def next_due(self) -> datetime | None:
        """The next occurrence not delivered yet (None: nothing more to deliver)."""
        if self.cancelled:
            return None
        if self.sent is None:
            return self.first
        if self.rule is None:
            return None
        try:
            return occurrences_after(self.rule, self.first, self.sent, zone(self.tz))
        except InputError:
            return None

    def latest_due(self, now: datetime) -> datetime | None:
        """The latest occurrence at or before ``now`` not delivered yet (missed ones before
        it are passed over: one late delivery, not a burst)."""
        due = self.next_due()
        if due is None or due > now:
            return None
        if self.rule is None:
            return due
        tz = zone(self.tz)
        for _ in range(CATCH_UP_STEPS):
            try:
                after = occurrences_after(self.rule, self.first, due, tz)
            except InputError:
                break
            if after > now:
                break
            due = after
        return due

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "room": self.room,
            "by": self.by,
            "what": self.what,
            "tz": self.tz,
            "first": self.first.isoformat(),
            "rule": self.rule,
            "lang": self.lang,
            "cancelled": self.cancelled,
        }
        if self.origin is not None:
            data["from"] = self.origin.to_data()
        return data

    @classmethod
    def from_data(cls, rid: str, data: Any, sent: Any) -> Reminder | None:
        if not isinstance(data, dict):
            return None
        try:
            room, by, what, tz = data["room"], data["by"], data["what"], data["tz"]
            if not all(isinstance(v, str) for v in (room, by, what, tz)) or len(what) > MAX_TEXT:
                return None
            first = datetime.fromisoformat(str(data["first"]))
            rule = data.get("rule")
            if first.tzinfo is None or (
                rule is not None and not (isinstance(rule, str) and RULE_SHAPE.fullmatch(rule))
            ):
                return None
            zone(tz)
            done = datetime.fromisoformat(sent) if isinstance(sent, str) else None
            origin = Provenance.from_data(data.get("from"))
        except (KeyError, ValueError, InputError):
            return None
        return cls(
            rid,
            room,
            by,
            what,
            tz,
            first,
            rule,
            str(data.get("lang") or "en"),
            data.get("cancelled") is True,
            done,
            origin if origin is not None and origin.room == room else None,
        )


async def _read(ledger: Ledger, db: str) -> list[Reminder]:
    """Every reminder of agent DB ``db``, oldest first by first time."""
    fields = await ledger.fields(db, REMINDERS_STORE)
    sent = await ledger.fields(db, SENT_STORE)
    found = [Reminder.from_data(rid, data, sent.get(rid)) for rid, data in fields.items()]
    return sorted((r for r in found if r is not None), key=lambda r: (r.first, r.id))


class ReminderBook:
    """The peer's part for reminders (``peer.reminders``): each agent's ``Reminders`` is made
    here (``of``), and all of them share one lock per person, so a count of their active
    reminders with every agent (``agent_dbs``: the hosted agents' DBs, asked at each count)
    and the write of a new one are one step, whichever ``Reminders`` object (each turn and
    command makes its own), whichever agent and whichever room asks."""

    def __init__(self, ledger: Ledger, agent_dbs: Callable[[], Iterable[str]] = tuple) -> None:
        self.ledger = ledger
        self.agent_dbs = agent_dbs
        self._adding: dict[str, tuple[asyncio.Lock, int]] = {}

    def of(self, db: str, key: KeyPair) -> Reminders:
        """The reminders of the agent whose DB is ``db``, written with its ``key``."""
        return Reminders(self, db, key)

    @contextlib.asynccontextmanager
    async def adding(self, person: str) -> AsyncIterator[None]:
        """Held by ``person``, in every agent, while a reminder of theirs is added. The lock
        is dropped when nobody holds or waits for it (a count of its users, since an
        ``asyncio.Lock`` just released reads unlocked while a waiter is about to take it),
        so the map holds only the people adding right now, however many ever did."""
        lock, users = self._adding.get(person, (asyncio.Lock(), 0))
        self._adding[person] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._adding[person]
            if users == 1:
                del self._adding[person]
            else:
                self._adding[person] = (lock, users - 1)

    async def active_of(self, person: str, also: str) -> int:
        """``person``'s active reminders in every hosted agent, and in agent DB ``also``."""
        count = 0
        for db in dict.fromkeys([also, *self.agent_dbs()]):
            found = await _read(self.ledger, db)
            count += sum(1 for r in found if r.by == person and r.active)
        return count


class Reminders:
    """The reminders of one agent DB, written with the agent's key (``ReminderBook.of``)."""

    def __init__(self, book: ReminderBook, db: str, key: KeyPair) -> None:
        self.book = book
        self.ledger = book.ledger
        self.db = db
        self.key = key

    async def all(self) -> list[Reminder]:
        """Every reminder, oldest first by first time."""
        return await _read(self.ledger, self.db)

    async def in_room(self, room: str, audience: Audience | None = None) -> list[Reminder]:
        """The active reminders set in ``room`` that ``audience`` may be told (None: the
        operator's view), soonest first (what ``reminders`` numbers)."""
        active = [
            r for r in await self.all() if r.room == room and r.active and r.told_in(audience)
        ]
        return sorted(active, key=lambda r: (r.next_due() or r.first, r.id))

    async def of_person(self, person: str) -> list[Reminder]:
        """The active reminders ``person`` set, wherever, soonest first (their own page)."""
        mine = [r for r in await self.all() if r.by == person and r.active]
        return sorted(mine, key=lambda r: (r.next_due() or r.first, r.id))

    async def add(
        self,
        understood: Understood,
        room: str,
        by: str,
        limit: int | None,
        origin: Provenance | None = None,
    ) -> Reminder:
        """Store a new reminder; InputError past ``limit`` active ones of ``by`` with every
        agent of the peer. The count and the write hold ``by``'s lock, so two rooms or two
        agents setting one at the same moment cannot both pass the count."""
        async with self.book.adding(by):
            return await self._add(understood, room, by, limit, origin)

    async def _add(
        self,
        understood: Understood,
        room: str,
        by: str,
        limit: int | None,
        origin: Provenance | None,
    ) -> Reminder:
        if limit is not None:
            held = await self.book.active_of(by, self.db)
            if held >= limit:
                raise InputError(
                    f"you have {held} active reminders (with every agent here), the most a "
                    "person may; cancel one first"
                )
        key = understood.first.tzinfo
        tz = getattr(key, "key", None) or "UTC"
        made = Reminder(
            "r" + secrets.token_hex(4),
            room,
            by,
            understood.what,
            tz,
            understood.first,
            understood.rule,
            understood.lang,
            origin=origin if origin is not None and origin.room == room else None,
        )
        await self.ledger.write(
            self.db,
            self.key,
            {REMINDERS_STORE: [{"op": "set", "field": made.id, "value": made.to_data()}]},
        )
        return made

    async def cancel(self, reminder: Reminder) -> None:
        data = {**reminder.to_data(), "cancelled": True}
        await self.ledger.write(
            self.db,
            self.key,
            {REMINDERS_STORE: [{"op": "set", "field": reminder.id, "value": data}]},
        )

    async def cancel_mine(self, person: str, rid: str) -> Reminder:
        """Cancel ``person``'s own active reminder ``rid`` (their page's Cancel); NotFound for
        anything else, whoever set it, so nothing about others' reminders is told."""
        found = next(
            (r for r in await self.all() if r.id == rid and r.by == person and r.active), None
        )
        if found is None:
            raise NotFound("no such reminder of yours (already cancelled or delivered?)")
        await self.cancel(found)
        return found

    async def mark_sent(self, reminder: Reminder, occurrence: datetime) -> None:
        await self.ledger.write(
            self.db,
            self.key,
            {SENT_STORE: [{"op": "set", "field": reminder.id, "value": occurrence.isoformat()}]},
        )

    async def zone_of(self, person: str, default: str) -> str:
        found = (await self.ledger.fields(self.db, ZONES_STORE)).get(person)
        return found if isinstance(found, str) else default

    async def set_zone(self, person: str, name: str) -> None:
        zone(name)
        await self.ledger.write(
            self.db, self.key, {ZONES_STORE: [{"op": "set", "field": person, "value": name}]}
        )

    async def by_number(self, room: str, number: str, audience: Audience | None = None) -> Reminder:
        """The ``number``-th of ``in_room`` (as ``reminders`` lists them)."""
        listed = await self.in_room(room, audience)
        if not (number.isascii() and number.isdigit()) or not 1 <= int(number) <= len(listed):
            raise NotFound(
                f"no reminder {number[:12]!r} here; the list has {len(listed)} (see reminders)"
            )
        return listed[int(number) - 1]


__all__ = [
    "MAX_ACTIVE_PER_PERSON",
    "REMINDERS_STORE",
    "SENT_STORE",
    "ZONES_STORE",
    "Reminder",
    "ReminderBook",
    "Reminders",
]

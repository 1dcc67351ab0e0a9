"""Delivering reminders when they are due (#37): once each, late rather than never.

The peer that hosts the agent delivers (its reminders are in the agent's own DB). Every tick
(and at once after a start) the runner looks at each hosted agent's reminders; for each one
due at ``now`` it sends one message, only in the room it was set in, through ``deliver``
(the transport's: Matrix sends it with a transaction id made from the reminder and the
occurrence, so a send repeated after a crash at the moment of delivery is the same event),
and then records the occurrence as sent. Occurrences missed while the bot was down are one
late delivery that says so. The clock is passed in: tests move it, nobody sleeps until 9.

``notes`` (the transport's, ``reminders.remembering``) gives a line or two of memory the room
may be told now, shown under the reminder; its failure delivers the reminder without them.

``audience`` (the transport's) says who reads the room now: a reminder is what its setter said
there, so when the room's readers now could not have read that (SPEC §5c: a DM that became a
group under ``joined`` history), it is delivered without its words, saying whose it is; when
the room cannot be looked at, the same (fail closed).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta

from chazbot import metrics
from chazbot.errors import ChazError
from chazbot.memory.audience import Audience
from chazbot.reminders.store import Reminder, Reminders
from chazbot.reminders.wording import lang_of, person_name, short_when

log = logging.getLogger(__name__)

Deliver = Callable[[str, str, str], Awaitable[bool]]
"""``deliver(room, text, transaction_id)``: True once the message is sent."""
Notes = Callable[[Reminders, Reminder], Awaitable[list[str]]]
"""``notes(store, reminder)``: lines of memory to show with it (the room's audience now)."""
AudienceOf = Callable[[str], Awaitable[Audience]]
"""``audience(room)``: who reads the room (the session) now."""
NameOf = Callable[[str, str], Awaitable[str | None]]
"""``name_of(room, person)``: how the room shows ``person`` (their display name), or None."""
MAX_NAME = 80
NOTE_MARK = "↳ "
_ROOM_PING = re.compile(r"@room\b", re.IGNORECASE)


def unpinging(text: str) -> str:
    """``text`` without "@room", which Matrix's legacy push rule turns into a notification of
    the whole room under the bot's power level (a reminder may not borrow it)."""
    return _ROOM_PING.sub("@\u2060room", text)


LATE_AFTER = timedelta(minutes=2)
TICK_S = 5.0
"""How often due reminders are looked for (reading a few fields per agent)."""

LATE = {
    "en": "(late: this was due {when})",
    "de": "(verspätet: das war fällig am {when})",
    "fr": "(en retard : c'était prévu le {when})",
    "es": "(tarde: era para el {when})",
    "nl": "(te laat: dit was voor {when})",
}
KEPT_BACK = {
    "en": "set before some of the people here joined, so I keep its words back (they are in "
    "the message that set it)",
    "de": "gesetzt, bevor einige hier dazukamen, darum sage ich den Text nicht (er steht in "
    "der Nachricht, die sie gesetzt hat)",
    "fr": "posé avant l'arrivée de certaines personnes ici, je n'en redis donc pas le texte "
    "(il est dans le message qui l'a posé)",
    "es": "puesto antes de que llegaran algunas personas, así que no repito su texto (está en "
    "el mensaje que lo puso)",
    "nl": "gezet voordat sommige mensen hier kwamen, dus ik herhaal de tekst niet (hij staat "
    "in het bericht dat hem zette)",
}
"""Said instead of a reminder's words in a room whose readers now were not all there."""
HEAD = {
    "en": "⏰ Reminder for {name}",
    "de": "⏰ Erinnerung für {name}",
    "fr": "⏰ Rappel pour {name}",
    "es": "⏰ Recordatorio para {name}",
    "nl": "⏰ Herinnering voor {name}",
}
"""A delivered reminder's head, naming who set it as the room shows them (#50)."""


def message(
    reminder: Reminder,
    due: datetime,
    now: datetime,
    notes: Iterable[str] = (),
    told: bool = True,
    name: str | None = None,
) -> str:
    """The delivered text: what, who set it (``name``: their display name in the room; else
    the Matrix ID's localpart), whether it is late, and what memory adds (``told``: the room
    may hear its words; else they are kept back, and so is memory)."""
    lang = lang_of(reminder.lang)
    what = unpinging(reminder.what) if told else KEPT_BACK[lang]
    who = unpinging(" ".join((name or "").split())[:MAX_NAME] or person_name(reminder.by))
    text = f"{HEAD[lang].format(name=who)}: {what}"
    notes = notes if told else ()
    if now - due > LATE_AFTER:
        text += " " + LATE[lang].format(when=short_when(due, reminder.tz, lang))
    return "\n".join([text, *(NOTE_MARK + unpinging(n) for n in notes)])


def transaction_id(reminder: Reminder, due: datetime) -> str:
    digest = hashlib.sha256(f"{reminder.id}|{due.isoformat()}".encode()).hexdigest()
    return f"chazbot-reminder-{digest[:32]}"


class ReminderRunner:
    """Delivers the due reminders of every hosted agent (``stores``) through ``deliver``."""

    def __init__(
        self,
        stores: Callable[[], Iterable[Reminders]],
        deliver: Deliver,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        notes: Notes | None = None,
        audience: AudienceOf | None = None,
        name_of: NameOf | None = None,
    ) -> None:
        self.stores = stores
        self.name_of = name_of
        self.deliver = deliver
        self.clock = clock
        self.notes = notes
        self.audience = audience
        self._task: asyncio.Task[None] | None = None

    async def tick(self, now: datetime | None = None) -> int:
        """Deliver what is due at ``now`` (default: the clock); how many were delivered."""
        now = now or self.clock()
        sent = 0
        for store in list(self.stores()):
            try:
                reminders = await store.all()
            except ChazError as exc:
                log.warning("reminders: could not read %s: %s", store.db[:20], exc)
                continue
            for reminder in reminders:
                due = reminder.latest_due(now)
                if due is None:
                    continue
                metrics.REMINDERS.labels("due").inc()
                late = now - due > LATE_AFTER
                told = await self._told(reminder)
                notes = await self._notes(store, reminder) if told else []
                text = message(reminder, due, now, notes, told, await self._name(reminder))
                try:
                    ok = await self.deliver(reminder.room, text, transaction_id(reminder, due))
                except Exception as exc:  # the transport's failure: retried at the next tick
                    log.warning("reminders: delivering %s failed: %s", reminder.id, exc)
                    continue
                if not ok:
                    continue
                await store.mark_sent(reminder, due)
                metrics.REMINDERS.labels("late" if late else "delivered").inc()
                sent += 1
        return sent

    async def _told(self, reminder: Reminder) -> bool:
        """Whether the room's readers now may hear the reminder's words (no ``audience``:
        the caller does not know rooms, as the operator's own runs)."""
        if self.audience is None:
            return True
        try:
            return reminder.told_in(await self.audience(reminder.room))
        except Exception as exc:  # who reads the room is unknown: its words are kept back
            log.warning("reminders: who reads %s is unknown: %s", reminder.room[:80], exc)
            return False

    async def _name(self, reminder: Reminder) -> str | None:
        if self.name_of is None:
            return None
        try:
            return await self.name_of(reminder.room, reminder.by)
        except Exception as exc:  # a name is extra: the localpart stands in
            log.warning("reminders: no name for %s: %s", reminder.by[:80], exc)
            return None

    async def _notes(self, store: Reminders, reminder: Reminder) -> list[str]:
        if self.notes is None:
            return []
        try:
            return await self.notes(store, reminder)
        except Exception as exc:  # memory is extra: the reminder goes out without it
            log.warning("reminders: no memory for %s: %s", reminder.id, exc)
            return []

    async def _loop(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:
                log.exception("reminders: a tick failed")
            await asyncio.sleep(TICK_S)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


__all__ = [
    "KEPT_BACK",
    "LATE_AFTER",
    "NOTE_MARK",
    "AudienceOf",
    "Deliver",
    "NameOf",
    "Notes",
    "ReminderRunner",
    "message",
    "transaction_id",
    "unpinging",
]

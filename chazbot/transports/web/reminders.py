"""A person's reminders on their memory page (#37): each active reminder they set, with any
agent of this peer, as a person reads it (what, when next in their zone, how often, where),
and cancelling one of their own (``Reminders.cancel_mine``: only theirs; any other id gets
the same "no such reminder")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chazbot.commands.tree import Meaning
from chazbot.errors import NotFound
from chazbot.reminders.store import Reminder
from chazbot.reminders.wording import repeat_text, short_when
from chazbot.transports.web.wording import ENGLISH, Words

if TYPE_CHECKING:
    from chazbot.peer import Peer


@dataclass(frozen=True)
class Upcoming:
    """One active reminder the person set, as their page shows it; where is named as the
    page names the rooms of rows (``person.SaidRow.room``)."""

    agent: str
    reminder: Reminder
    zone: str = "UTC"
    room_name: str | None = None
    words: Words = ENGLISH
    """The page's language (``wording.page_lang``)."""

    @property
    def when(self) -> str:
        due = self.reminder.next_due() or self.reminder.first
        return short_when(due, self.zone, self.words.lang)

    @property
    def repeat(self) -> str:
        """How often, as the chat says it, in the page's language: "every Sunday at 20:00"."""
        r = self.reminder
        return repeat_text(r.rule, r.first, self.zone, self.words.lang) or self.words.once

    @property
    def room(self) -> str:
        origin = self.reminder.origin
        if origin is not None and origin.audience == (self.reminder.by,):
            return self.words.dm_with.format(agent=self.agent)
        if self.room_name:
            return self.room_name
        if origin is None or origin.audience is None:
            return self.words.a_room
        return self.words.group_room_of.format(n=len(origin.audience))


async def reminders_of(
    peer: Peer, person: str, room_name: Callable[[str], str | None], words: Words = ENGLISH
) -> list[Upcoming]:
    """Every active reminder ``person`` set, with any agent of ``peer``, soonest first, in
    their zone (``tz``, as the page shows rows)."""
    zone = peer.config.timezone
    for agent in peer.agents.values():
        zone = await peer.reminders.of(agent.db, agent.key).zone_of(person, zone)
    found: list[Upcoming] = []
    for agent in peer.agents.values():
        for r in await peer.reminders.of(agent.db, agent.key).of_person(person):
            found.append(Upcoming(agent.name, r, zone, room_name(r.room), words))
    found.sort(key=lambda u: (u.reminder.next_due() or u.reminder.first, u.reminder.id))
    return found


async def cancel_own(peer: Peer, person: str, agent_name: str, rid: str) -> tuple[bool, Meaning]:
    """Cancel ``person``'s own reminder ``rid`` of agent ``agent_name``: (ok, what to say,
    worded by the page in its language: ``Words.flash``)."""
    agent = peer.agents.get(agent_name)
    if agent is None:
        return False, Meaning("no_such_reminder")
    try:
        gone = await peer.reminders.of(agent.db, agent.key).cancel_mine(person, rid)
    except NotFound:  # the same for anyone else's and for none: nothing told about others'
        return False, Meaning("no_such_reminder")
    return True, Meaning("cancelled_reminder", {"what": gone.what})


__all__ = ["Upcoming", "cancel_own", "reminders_of"]

"""Reminders delivered by the Matrix transport (#37): the runner (``reminders.runner``) asks
for each hosted agent's reminders and hands each due one to ``deliver``, which sends it into
the room it was set in, and only there. With the room's audience now (``audience``, the bot's
own reckoning of who reads the room, as for a reply), a reminder may carry a line or two of
what the agent's memory (and the banks its auto-recall reads in that room) holds about it
that those people may be told (``memory_notes``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from chazbot.agent.recall import recall_banks, recall_settings
from chazbot.memory.audience import Audience
from chazbot.reminders.remembering import related
from chazbot.reminders.runner import Notes, ReminderRunner
from chazbot.reminders.store import Reminder, Reminders
from chazbot.transports.matrix.rules import SESSION_PREFIX

if TYPE_CHECKING:
    from chazbot.peer import Peer
    from chazbot.transports.matrix.sending import Sender

AudienceOf = Callable[[str], Awaitable[Audience]]
"""A session's audience now (who reads what the bot says there)."""


def memory_notes(peer: Peer, audience_of: AudienceOf) -> Notes:
    """``notes`` for the runner: the reminder's text recalled in the agent's memory as heard
    by the room's audience now (``peer.hearing``, the rule of a reply); nothing in the
    operator's full view, for an audience of another room, or with nobody in the room to
    tell (fail closed; and no recall for a reminder that cannot be delivered)."""

    async def notes(store: Reminders, reminder: Reminder) -> list[str]:
        agent = next((a for a in peer.agents.values() if a.db == store.db), None)
        if agent is None:
            return []
        heard = await audience_of(reminder.room)
        if heard.full or heard.room != reminder.room:
            return []
        if not heard.present:
            return []  # nobody there (everyone left, or a room the bot is not in): nothing
        memory = agent.memory.within(peer.hearing(agent, reminder.by, heard))
        settings = await recall_settings(peer.ledger, agent.db)
        session = await peer.session(reminder.room)
        defaults = agent.config.default_memory_banks
        banks = await recall_banks(peer.ledger, session, memory, defaults, settings)
        return await related(memory, reminder.what, [db for _, db in banks])

    return notes


def reminder_runner(
    peer: Peer,
    parts: Callable[[], tuple[Sender | None, Any, bool]],
    audience: AudienceOf | None = None,
) -> ReminderRunner:
    """The runner for ``peer``'s agents; ``parts()`` gives the bot's sender, its nio client
    and whether its first sync is done (nothing is delivered before); ``audience(room_id)``
    who reads a room now (None: reminders carry no memory)."""

    def stores() -> list[Reminders]:
        return [peer.reminders.of(a.db, a.key) for a in peer.agents.values()]

    async def deliver(session: str, text: str, txn: str) -> bool:
        """False (it stays due): not a Matrix room of this bot now, or not synced yet."""
        sender, client, synced = parts()
        if sender is None or client is None or not synced:
            return False
        if not session.startswith(SESSION_PREFIX):
            return False
        room_id = session.removeprefix(SESSION_PREFIX)
        if room_id not in client.rooms:
            return False
        await sender.send(room_id, {"msgtype": "m.text", "body": text}, txn)
        return True

    async def name_of(session: str, person: str) -> str | None:
        """``person``'s display name in the room (nio's, disambiguated as clients show it)."""
        _, client, _ = parts()
        room = None if client is None else client.rooms.get(session.removeprefix(SESSION_PREFIX))
        if room is None or person not in room.users:
            return None
        name = room.user_name(person)
        return name if isinstance(name, str) and name else None

    notes: Notes | None = None
    told: AudienceOf | None = None
    if audience is not None:
        of_room = audience

        async def audience_of(session: str) -> Audience:
            return await of_room(session.removeprefix(SESSION_PREFIX))

        notes = memory_notes(peer, audience_of)
        told = audience_of  # a reminder's words only to readers who could read them then
    return ReminderRunner(stores, deliver, notes=notes, audience=told, name_of=name_of)


__all__ = ["AudienceOf", "memory_notes", "reminder_runner"]

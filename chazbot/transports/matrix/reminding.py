"""Reminders delivered by the Matrix transport (#37): the runner (``reminders.runner``) asks
for each hosted agent's reminders and hands each due one to ``deliver``, which sends it into
the room it was set in, and only there."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from chazbot.reminders.runner import ReminderRunner
from chazbot.reminders.store import Reminders
from chazbot.transports.matrix_rules import SESSION_PREFIX

if TYPE_CHECKING:
    from chazbot.peer import Peer
    from chazbot.transports.matrix.sending import Sender


def reminder_runner(
    peer: Peer, parts: Callable[[], tuple[Sender | None, Any, bool]]
) -> ReminderRunner:
    """The runner for ``peer``'s agents; ``parts()`` gives the bot's sender, its nio client
    and whether its first sync is done (nothing is delivered before)."""

    def stores() -> list[Reminders]:
        return [Reminders(peer.ledger, a.db, a.key) for a in peer.agents.values()]

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

    return ReminderRunner(stores, deliver)


__all__ = ["reminder_runner"]

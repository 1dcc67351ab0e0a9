"""What the bot does with an invite, once ``Router.answer_invite`` has decided: join an
allowed person's room; greet a stranger's DM (join, send the not-allowed notice once, leave:
the README's "one short notice", never a room the bot stays in); decline the rest. Each step
is a homeserver request on the shared retry policy (``Sender``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from nio import JoinResponse

from chazbot.transports.matrix.routing import InviteAnswer
from chazbot.transports.matrix.rules import not_allowed_notice, transaction_id
from chazbot.transports.matrix.sending import Sender

log = logging.getLogger("chazbot.transports.matrix")


async def act_on_invite(
    sender: Sender, answer: InviteAnswer, room_id: str, admins: Sequence[str]
) -> None:
    """Do ``answer`` to the invite to ``room_id`` (``admins``: whom the notice names)."""
    if answer == "decline":
        await _leave(sender, room_id, f"declining the invite to {room_id}")
        return
    joined = await sender.call(f"joining {room_id}", lambda: sender.client.join(room_id))
    if answer == "join":
        if isinstance(joined, JoinResponse):
            log.info("matrix: joined %s", room_id)
        return
    try:  # greet: the notice, then leave whatever the send did
        if isinstance(joined, JoinResponse):
            content = {"msgtype": "m.notice", "body": not_allowed_notice(admins)}
            await sender.send(room_id, content, transaction_id(f"invite:{room_id}", 0))
    finally:
        await _leave(sender, room_id, f"leaving {room_id}")


async def _leave(sender: Sender, room_id: str, what: str) -> None:
    await sender.call(what, lambda: sender.client.room_leave(room_id))


__all__ = ["act_on_invite"]

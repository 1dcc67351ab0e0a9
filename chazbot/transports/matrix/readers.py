"""Who heard a message and since when a room's readers could read it (SPEC §5c), for the
bot's answer to one job: the room's audience now narrowed to the message's time.

- ``Job.heard_by`` (the sync's reckoning of who was in the room when the event was sent):
  whoever else is there now came later and is not among its rows' audience.
- Under a ``joined`` or ``invited`` history, ``Audience.since``: the newest join or invite of
  the people there now, from the room's state, so the conversation the model is shown (and a
  captured row's quote) starts there. Unknown: now (fail closed: only the message itself).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from nio import RoomGetStateResponse

from chazbot.errors import ChazError
from chazbot.memory.audience import CLOSED_HISTORY, Audience

if TYPE_CHECKING:
    from chazbot.transports.matrix.routing import Job
    from chazbot.transports.matrix.sending import Sender

log = logging.getLogger(__name__)


async def as_heard(sender: Sender | None, job: Job, audience: Audience) -> Audience:
    """``audience`` (the room's now) as it answers ``job``: who heard it, and since when
    everyone there could read the room."""
    if job.heard_by is not None:  # who came after the message did not hear it
        audience = audience.heard_then(job.heard_by)
    closed = audience.bounded and audience.history in CLOSED_HISTORY
    if closed and job.kind != "command":  # a command is shown no conversation
        since = await readers_since(sender, job.room_id, audience.present)
        audience = dataclasses.replace(audience, since=since)
    return audience


async def readers_since(sender: Sender | None, room_id: str, present: frozenset[str]) -> int:
    """Since when (µs) everyone in ``present`` could read ``room_id``: the newest join or
    invite among them, from the room's state. Unknown: now."""
    now = int(time.time() * 1_000_000)
    if sender is None or not present:
        return now
    client = sender.client
    try:
        answer = await sender.call(
            f"reading the members of {room_id}", lambda: client.room_get_state(room_id)
        )
    except ChazError as exc:
        log.warning("matrix: %s: members' join times unknown: %s", room_id, exc)
        return now
    if not isinstance(answer, RoomGetStateResponse):
        return now
    stamps: dict[str, int] = {}
    for event in answer.events:
        content = event.get("content") if isinstance(event, dict) else None
        who, ts = event.get("state_key"), event.get("origin_server_ts")
        if (
            event.get("type") == "m.room.member"
            and who in present
            and isinstance(content, dict)
            and content.get("membership") in ("join", "invite")
            and isinstance(ts, int)
        ):
            stamps[who] = ts
    if set(stamps) != present:
        return now
    return max(stamps.values()) * 1000


__all__ = ["as_heard", "readers_since"]

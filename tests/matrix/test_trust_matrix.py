"""#33 over a real Synapse: the audience rule holds against a member looking for the gaps.

- An empty room sees everything: Mallory (allowed, not an admin) queues a search and a
  question behind a slow turn and leaves before the answers; with nobody in the room the
  rule "everyone now in the room is in the row's audience" held for every row.
- A newcomer reads a room's past: Bob, invited into Alice's DM later, got her row from
  ``search`` whatever the room's history visibility said.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from chazbot.transports.matrix.rules import ROOM_CHANGED_NOTICE
from tests.support.shared_bot import SharedBot, humans, shared_bot, standin_llm
from tests.support.standin_llm import StandinLLM
from tests.support.synapse import Human, SynapseServer, User, requires_synapse
from tests.support.waits import wait_until

# one bot for the module's tests, in the module's one event loop
pytestmark = [requires_synapse, pytest.mark.timeout(300), pytest.mark.asyncio(loop_scope="module")]
__all__ = ["humans", "shared_bot", "standin_llm"]  # the module's fixtures

Humans = Callable[..., Awaitable[Human]]
LOCKER = "LOCK-9921"


@pytest.fixture(scope="module")
def shared_bot_top() -> dict[str, Any]:
    return {"agents": [{"name": "chaz", "capture": "off"}]}


def room_messages(synapse: SynapseServer, admin: User, room_id: str) -> list[dict[str, Any]]:
    """Every m.room.message of a room, as the homeserver keeps them (admin API): what anyone
    who joins later could be shown."""
    path = f"/_synapse/admin/v1/rooms/{urllib.parse.quote(room_id)}/messages?dir=f&limit=500"
    found = synapse._request("GET", path, token=admin.access_token)
    return [e for e in found.get("chunk", []) if e.get("type") == "m.room.message"]


def replies_to(events: list[dict[str, Any]], event_id: str) -> list[str]:
    return [
        str(e["content"].get("body", ""))
        for e in events
        if e["content"].get("m.relates_to", {}).get("m.in_reply_to", {}).get("event_id") == event_id
    ]


async def test_an_emptied_room_is_told_only_its_own_rows(
    shared_bot: SharedBot,
    humans: Humans,
    standin_llm: StandinLLM,
    synapse: SynapseServer,
    synapse_admin: User,
) -> None:
    alice, mallory = await humans("alice"), await humans("mallory")
    proc, bot = shared_bot
    dm_alice = await alice.create_room([bot.user_id], direct=True)
    await alice.wait_member(dm_alice, bot.user_id)
    told = await alice.ask(dm_alice, f"remember locker is my locker code is {LOCKER}", timeout=30)
    assert told.body.startswith("Noted"), told.body
    dm_mallory = await mallory.create_room([bot.user_id], direct=True)
    await mallory.wait_member(dm_mallory, bot.user_id)
    lure = await mallory.create_room([bot.user_id], name="lure")
    await mallory.wait_member(lure, bot.user_id)

    standin_llm.hang(1)  # a slow turn: what Mallory queues behind it runs after she left
    slow = await mallory.send(lure, "!chaz tell me a long story")
    await wait_until(lambda: standin_llm._hangs == 0, 30, "the slow turn to reach the model")
    search = await mallory.send(lure, "!chaz memory search self locker")
    question = await mallory.send(lure, "!chaz what is the locker code?")
    left = await mallory.client.room_leave(lure)
    assert type(left).__name__ == "RoomLeaveResponse", left
    # a reply in her DM comes from a sync at or after her leave: the bot knows she left
    await mallory.ask(dm_mallory, "!chaz memory list", timeout=30)
    standin_llm.release()

    def answered() -> list[dict[str, Any]] | None:
        events = room_messages(synapse, synapse_admin, lure)
        done = all(replies_to(events, e) for e in (slow, search, question))
        return events if done else None

    events = await wait_until(answered, 60, "the three answers in the emptied room")
    everything = "\n".join(str(e["content"].get("body", "")) for e in events)
    assert LOCKER not in everything, everything
    # the slow turn was prepared for Mallory; when it was sent nobody was there to bound
    assert replies_to(events, slow) == [ROOM_CHANGED_NOTICE], replies_to(events, slow)
    # the same search from Alice's own DM still finds it
    found = await alice.ask(dm_alice, "!chaz memory search self locker")
    assert LOCKER in found.body
    await asyncio.sleep(0)  # let the bot's log flush before the fixture prints it
    assert proc.log()


async def test_a_newcomer_reads_no_past_that_matrix_would_hide(
    shared_bot: SharedBot, humans: Humans
) -> None:
    alice, bob = await humans("alice"), await humans("bob")
    _, bot = shared_bot
    rooms = {}
    for history in ("joined", "shared"):
        room = await alice.create_room([bot.user_id], direct=True)
        await alice.wait_member(room, bot.user_id)
        state = await alice.client.room_put_state(
            room, "m.room.history_visibility", {"history_visibility": history}
        )
        assert type(state).__name__ == "RoomPutStateResponse", state
        told = await alice.ask(room, f"remember locker is my locker code is {LOCKER}", timeout=30)
        assert told.body.startswith("Noted"), told.body
        invited = await alice.client.room_invite(room, bob.user_id)
        assert type(invited).__name__ == "RoomInviteResponse", invited
        await bob.wait_invite(room)
        await bob.join(room)
        await alice.wait_member(room, bob.user_id)
        rooms[history] = room
    # joined: Bob could not read Alice's message in Matrix, so the bot does not tell it
    hidden = await bob.ask(rooms["joined"], "!chaz memory search self locker")
    assert LOCKER not in hidden.body, hidden.body
    asked = await bob.ask(rooms["joined"], "!chaz recall locker", timeout=30)
    assert LOCKER not in asked.body, asked.body
    # shared: every member may read the room's whole history, so the bot may repeat it
    shown = await bob.ask(rooms["shared"], "!chaz memory search self locker")
    assert LOCKER in shown.body, shown.body

"""#47 over a real Synapse: a room past the audience list bound (``matrix.audience_list_max``,
set to 1 here so a room of two is "big") keeps no list of who heard a row. Under ``joined``
history the rule asked who is in that room *now*: Carol, who joined later, was told Bob's
earlier row in her DM with the bot. Now such a row is told only in its own room, to those the
rule can name (with no list: nobody). The same room under ``shared`` history shows its rows to
whoever has joined it now, Carol too once she joined (Matrix lets her read them there), but
not while she is only invited."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests.support.standin_llm import StandinLLM, message_text
from tests.support.synapse import ChazbotProcess, Human, User, requires_synapse

pytestmark = [requires_synapse, pytest.mark.timeout(300)]

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]


async def test_a_big_rooms_rows_under_joined_history_never_reach_a_later_joiners_dm(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM
) -> None:
    alice, bob, carol = await humans("alice"), await humans("bob"), await humans("carol")
    people = [alice.user_id, bob.user_id, carol.user_id]
    proc, bot = await chazbot(
        standin_llm.url,
        people,
        [],
        top={"agents": [{"name": "chaz", "capture": "facts"}]},
        audience_list_max=1,
    )
    secrets = {"joined": "DOOR-4711", "shared": "GATE-2906"}
    rooms: dict[str, str] = {}
    for history, secret in secrets.items():
        room = await alice.create_room([bot.user_id, bob.user_id], name=f"big {history}")
        state = await alice.client.room_put_state(
            room, "m.room.history_visibility", {"history_visibility": history}
        )
        assert type(state).__name__ == "RoomPutStateResponse", state
        await bob.wait_invite(room)
        await bob.join(room)
        await alice.wait_member(room, bot.user_id)
        await alice.wait_member(room, bob.user_id)
        said = await bob.ask(room, f"!chaz remember {history}.code is {secret}", timeout=30)
        assert said.body.startswith("Noted"), said.body
        rooms[history] = room
    # Carol is invited to both rooms after the rows were said: invited, she reads neither
    # (Matrix shows a shared history to members who joined); then she joins both and asks in
    # her DM with the bot
    dm = await carol.create_room([bot.user_id], direct=True)
    await carol.wait_member(dm, bot.user_id)
    for room in rooms.values():
        invited = await alice.client.room_invite(room, carol.user_id)
        assert type(invited).__name__ == "RoomInviteResponse", invited
        await carol.wait_invite(room)
    for room in rooms.values():
        await alice.wait_member(room, carol.user_id, "invite")
    invited_only = (await carol.ask(dm, "!chaz memory search self code", timeout=30)).body
    assert not any(s in invited_only for s in secrets.values()), invited_only
    for room in rooms.values():
        await carol.join(room)
        await alice.wait_member(room, carol.user_id)
    searched = (await carol.ask(dm, "!chaz memory search self code", timeout=30)).body
    assert secrets["shared"] in searched, searched  # shared history: hers to read there
    assert secrets["joined"] not in searched, searched
    question = "what is the door code?"
    answer = (await carol.ask(dm, question, timeout=30)).body
    asked = next(
        b for b in standin_llm.requests if any(question in message_text(m) for m in b["messages"])
    )
    assert secrets["joined"] not in "\n".join(message_text(m) for m in asked["messages"])
    assert secrets["joined"] not in answer
    # nor in Bob's own DM: who heard it in the big room is not known
    bob_dm = await bob.create_room([bot.user_id], direct=True)
    await bob.wait_member(bob_dm, bot.user_id)
    found = (await bob.ask(bob_dm, "!chaz memory search self code", timeout=30)).body
    assert secrets["joined"] not in found and secrets["shared"] in found, found
    assert "Traceback" not in proc.log()

"""Red team of the audience rule over a real Synapse (SPEC §5c): "the room's joined members
then" means when the message was sent, not when the bot got round to it.

20. Alice's DM with the bot has ``joined`` history. The bot is busy with her first message
    (the model hangs) when she tells it her locker code; before the bot reaches that second
    message, Mallory is invited and joins. Matrix never shows Mallory the locker message; the
    row captured from it must not name her among those who heard it: not told to her in the
    room, nor in her own DM with the bot.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests.support.standin_llm import StandinLLM, message_text
from tests.support.synapse import ChazbotProcess, Human, User, requires_synapse
from tests.support.waits import wait_until

pytestmark = [requires_synapse, pytest.mark.timeout(300)]

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]
LOCKER = "locker-5512"


async def test_who_heard_a_message_is_who_was_there_when_it_was_sent(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM
) -> None:
    alice, mallory = await humans("alice"), await humans("mallory")
    _, bot = await chazbot(
        standin_llm.url,
        [alice.user_id, mallory.user_id],
        [],
        top={"agents": [{"name": "chaz", "capture": "messages"}]},
    )
    room = await alice.create_room([bot.user_id], direct=True)
    await alice.wait_member(room, bot.user_id)
    state = await alice.client.room_put_state(
        room, "m.room.history_visibility", {"history_visibility": "joined"}
    )
    assert type(state).__name__ == "RoomPutStateResponse", state
    other = await alice.create_room([bot.user_id], direct=True)  # to see the bot's sync move
    await alice.wait_member(other, bot.user_id)
    mallory_dm = await mallory.create_room([bot.user_id], direct=True)
    await mallory.wait_member(mallory_dm, bot.user_id)

    asked = len(standin_llm.requests)
    standin_llm.hang(1)
    first = await alice.send(room, "hello, are you there?")
    await wait_until(lambda: len(standin_llm.requests) > asked, 30, "the first turn's LLM call")
    second = await alice.send(room, f"My gym locker code is {LOCKER}")
    invited = await alice.client.room_invite(room, mallory.user_id)
    assert type(invited).__name__ == "RoomInviteResponse", invited
    await mallory.wait_invite(room)
    await mallory.join(room)
    await alice.wait_member(room, mallory.user_id)
    # the bot answers in another room after the join: its sync has passed the join
    await alice.ask(other, "!chaz memory capture", timeout=30)
    standin_llm.release()
    await alice.wait_reply(first, 60)
    await alice.wait_reply(second, 60)

    async def captured() -> bool:
        found = await alice.ask(other, "!chaz memory mine", timeout=30)
        return LOCKER in found.body

    # Alice's own view (her other DM: only she reads it) finds the row once capture ran
    await wait_until(captured, 60, "the locker message captured")
    for where in (room, mallory_dm):
        told = await mallory.ask(where, f"!chaz memory search self {LOCKER}", timeout=30)
        assert LOCKER not in told.body, (where, told.body)


async def test_a_newcomer_is_not_told_the_conversation_from_before_she_came(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM
) -> None:
    """23. A group of Alice and Bob with ``joined`` history: Bob says his salary; Mallory is
    invited and joins, and asks the bot what Bob just said. The model is not shown Bob's
    message (Matrix never showed it to her), while Alice and Bob, among themselves, would be."""
    alice, bob, mallory = await humans("alice"), await humans("bob"), await humans("mallory")
    people = [alice.user_id, bob.user_id, mallory.user_id]
    _, bot = await chazbot(
        standin_llm.url, people, [], top={"agents": [{"name": "chaz", "capture": "off"}]}
    )
    group = await alice.create_room([bot.user_id, bob.user_id], name="alice and bob")
    state = await alice.client.room_put_state(
        group, "m.room.history_visibility", {"history_visibility": "joined"}
    )
    assert type(state).__name__ == "RoomPutStateResponse", state
    await bob.wait_invite(group)
    await bob.join(group)
    await alice.wait_member(group, bot.user_id)
    await alice.wait_member(group, bob.user_id)
    await bob.ask(group, "!chaz my salary is 91k a year, just so you know", timeout=30)
    invited = await alice.client.room_invite(group, mallory.user_id)
    assert type(invited).__name__ == "RoomInviteResponse", invited
    await mallory.wait_invite(group)
    await mallory.join(group)
    await alice.wait_member(group, mallory.user_id)
    question = "what did bob just say about money?"
    await mallory.ask(group, f"!chaz {question}", timeout=30)
    body = next(
        b
        for b in reversed(standin_llm.requests)
        if any(question in message_text(m) for m in b["messages"])
    )
    shown = "\n".join(message_text(m) for m in body["messages"])
    assert "91k" not in shown, shown

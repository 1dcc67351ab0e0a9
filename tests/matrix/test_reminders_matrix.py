"""#37 over a real Synapse: a reminder set in words arrives in the room it was set in, and
only there; the confirmation says the time understood."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from chazbot.reminders.wording import person_name
from tests.support.shared_bot import SharedBot, humans, shared_bot, standin_llm
from tests.support.standin_llm import StandinLLM
from tests.support.synapse import Human, requires_synapse
from tests.support.waits import wait_until

# one bot for the module's tests, in the module's one event loop
pytestmark = [requires_synapse, pytest.mark.timeout(300), pytest.mark.asyncio(loop_scope="module")]
__all__ = ["humans", "shared_bot", "standin_llm"]  # the module's fixtures

Humans = Callable[..., Awaitable[Human]]


@pytest.fixture(scope="module")
def shared_bot_top() -> dict[str, Any]:
    return {"agents": [{"name": "chaz", "capture": "off"}], "timezone": "Europe/Berlin"}


async def test_a_reminder_set_in_words_arrives_in_its_room_only(
    shared_bot: SharedBot, humans: Humans, standin_llm: StandinLLM
) -> None:
    alice = await humans("alice")
    _, bot = shared_bot
    await alice.client.set_displayname("Ana Alves")  # named so in the rooms made below (#50)
    dm = await alice.create_room([bot.user_id], direct=True)
    await alice.wait_member(dm, bot.user_id)
    group = await alice.create_room([bot.user_id], name="elsewhere")
    await alice.wait_member(group, bot.user_id)
    asked = len(standin_llm.requests)
    said = await alice.ask(dm, "remind me in 3 seconds to water the plants", timeout=30)
    assert said.body.startswith("OK, I'll remind you here on"), said.body
    assert "(Europe/Berlin)" in said.body and "water the plants" in said.body
    assert len(standin_llm.requests) == asked  # answered without the model

    def delivered() -> list[str]:
        return [
            s.body
            for s in alice.messages(dm, sender=bot.user_id)
            if s.body.startswith("⏰ Reminder")
        ]

    found = await wait_until(delivered, 40, "the reminder in the DM")
    assert found == ["⏰ Reminder for Ana Alves: water the plants"], found  # not the MXID
    listed = await alice.ask(dm, "!chaz reminders")
    assert "No reminders here" in listed.body, listed.body
    # never in another room
    assert not [s for s in alice.messages(group, sender=bot.user_id) if "⏰" in s.body]


async def test_a_delivered_reminder_carries_only_what_its_room_may_be_told(
    shared_bot: SharedBot, humans: Humans
) -> None:
    """Alice tells the bot in her DM where Ines lives; the same reminder delivered in her DM
    carries it, delivered in a group with Bob it does not (the bot's own reckoning of who
    reads the room at delivery, as for a reply)."""
    alice, bob = await humans("alice"), await humans("bob")
    _, bot = shared_bot
    dm = await alice.create_room([bot.user_id], direct=True)
    await alice.wait_member(dm, bot.user_id)
    group = await alice.create_room([bot.user_id, bob.user_id], name="family")
    await bob.wait_invite(group)
    await bob.join(group)
    await alice.wait_member(group, bot.user_id)
    await alice.wait_member(group, bob.user_id)
    told = await alice.ask(dm, "remember that ines.city is Ines moved to Porto last month")
    assert told.body.startswith("Noted"), told.body
    for room in (dm, group):
        said = await alice.ask(room, "!chaz remind in 2 seconds to call Ines", timeout=30)
        assert said.body.startswith("OK, I'll remind you here on"), said.body

    def delivered(room: str) -> list[str]:
        return [
            s.body
            for s in alice.messages(room, sender=bot.user_id)
            if s.body.startswith("⏰ Reminder")
        ]

    in_dm = await wait_until(lambda: delivered(dm), 40, "the reminder in the DM")
    in_group = await wait_until(lambda: delivered(group), 40, "the reminder in the group")
    head = f"⏰ Reminder for {person_name(alice.user_id)}: call Ines"
    assert in_dm == [f"{head}\n↳ Ines moved to Porto last month"]
    assert in_group == [head], in_group

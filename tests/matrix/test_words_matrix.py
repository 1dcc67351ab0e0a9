"""#36 over a real Synapse: words act only when meant, in the person's language, and a forget
in words can be undone. The agent has no remember/forget tools (as the embedded model), so
the bot itself answers these, whatever the model; the stand-in answers the rest."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests.support.standin_llm import StandinLLM
from tests.support.synapse import ChazbotProcess, Human, User, requires_synapse

pytestmark = [requires_synapse, pytest.mark.timeout(300)]

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]


async def test_requests_about_the_world_forget_nothing_and_a_forget_is_undone(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM
) -> None:
    alice = await humans("alice")
    agent = {"name": "chaz", "capture": "messages", "allowed_tools": []}
    _, bot = await chazbot(standin_llm.url, [alice.user_id], [], top={"agents": [agent]})
    dm = await alice.create_room([bot.user_id], direct=True)
    await alice.wait_member(dm, bot.user_id)

    async def say(text: str) -> str:
        return (await alice.ask(dm, text, timeout=30)).body

    assert (await say("Merk dir, dass mein WLAN-Passwort tulip-42 ist")).startswith("Notiert")
    assert (await say("Remember that my onion soup needs three onions")).startswith("Noted")
    for world in (
        "Remove the onions from the recipe please",
        "Delete the meeting from my calendar",
        "Forget it, I'll do it myself",
        "Drop me a line when you are free",
        "Remember when we went to Paris?",
    ):
        await say(world)
    mine = await say("!chaz memory mine")
    assert "tulip-42" in mine and "three onions" in mine, mine
    assert "Paris" not in mine, mine  # a question is never stored as a fact
    forgot = await say("Vergiss mein WLAN-Passwort")
    assert forgot.startswith("Vergessen:") and "rückgängig" in forgot, forgot
    assert "tulip-42" not in await say("!chaz memory mine")
    assert (await say("Mach das rückgängig")).startswith("Zurückgeholt")
    assert "tulip-42" in await say("!chaz memory mine")

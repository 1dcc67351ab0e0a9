"""A first conversation in words (#17): intents, what is worth keeping, honest answers.

Found by a new user with the embedded model: "Please forget my manager's name." got an
apology and was itself stored; "Hello!" was stored; "What is my cat's name?" got the dog's
name; "What can you do?" got "You can say hello!". Each is reproduced here against a real
peer (real SQLite); the model is a stand-in that calls no tools, as the embedded one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import chazbot
from chazbot.agent.capture import capture_turn
from chazbot.agent.chat_model import ChatResult
from chazbot.agent.turn import run_turn
from chazbot.agent.words import as_said_to_them, asks, intent, personal, worth_keeping
from chazbot.config import AgentConfig, Config
from chazbot.memory.audience import room_audience

ALICE, BOB = "@alice:example.org", "@bob:example.org"


class NoToolsModel:
    """A chat model that calls no tools (as the embedded ones); records what it was sent."""

    supports_tools = False
    name = "no-tools"

    def __init__(self, reply: str = "Biscuit.") -> None:
        self.reply = reply
        self.requests: list[list[dict[str, Any]]] = []

    async def complete(
        self, messages: list[dict[str, Any]], tools: Any = None, model: Any = None
    ) -> ChatResult:
        self.requests.append(messages)
        return ChatResult(content=self.reply, tool_calls=[])

    async def aclose(self) -> None:
        return None


def test_intents_and_what_is_kept() -> None:
    assert intent("Please forget my manager's name.") is not None
    assert intent("Please forget my manager's name.").what == "my manager's name"  # type: ignore[union-attr]
    assert intent("forget everything about me").what == ""  # type: ignore[union-attr]
    assert intent("What can you do?").kind == "intro"  # type: ignore[union-attr]
    assert intent("help").kind == "intro"  # type: ignore[union-attr]
    assert intent("what do you know about me?").kind == "about_me"  # type: ignore[union-attr]
    assert intent("Remember that my dog is Rex").what == "my dog is Rex"  # type: ignore[union-attr]
    for ordinary in ("help me plan a trip", "My dog is Rex.", "What is my dog called?"):
        assert intent(ordinary) is None, ordinary
    for not_kept in ("Hello!", "thanks a lot, chaz", "Please forget my manager's name.", "help"):
        assert not worth_keeping(not_kept, ("chaz",)), not_kept
    for kept in ("My dog is Rex.", "Remember that my dog is Rex", "hello, I moved to Leeds"):
        assert worth_keeping(kept, ("chaz",)), kept
    assert as_said_to_them("My dog is Biscuit and I am allergic to it.") == (
        "Your dog is Biscuit and you are allergic to it."
    )
    assert asks("What is my cat's name?") and personal("What is my cat's name?")
    assert not personal("What is the capital of France?")


async def test_greetings_and_requests_are_not_captured(tmp_path: Path) -> None:
    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="messages")])
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        session = await peer.session("s")
        for text in ("Hello!", "Please forget my manager's name.", "thanks!", "My dog is Rex."):
            await session.add_message("user", text, ALICE)
            await capture_turn(chaz, session, None, "messages", text, ALICE, "ok")
        assert [h.value.split(": ", 1)[1] for h in await chaz.recall("")] == ["My dog is Rex."]


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])


async def test_forget_in_words_takes_only_the_persons_matching_rows(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        dm = room_audience("dm-alice", [ALICE], lambda u: False)
        group = room_audience("group", [ALICE, BOB], lambda u: False)
        alice = chaz.memory.within(peer.hearing(chaz, ALICE, dm))
        bob = chaz.memory.within(peer.hearing(chaz, BOB, group))
        await alice.remember("a/1", "My manager is called Priya.")
        await alice.remember("a/2", "My sister's name is Ada.")
        await bob.remember("b/1", "My manager is called Zed.")
        model = NoToolsModel()
        session = await peer.session("dm-alice")

        async def say(text: str) -> str:
            result = await run_turn(peer, chaz, session, text, ALICE, model, alice, "!chaz ")
            return result.text

        reply = await say("Please forget my manager's name.")
        assert reply == 'Forgotten: "My manager is called Priya.".', reply
        values = {h.value for h in await chaz.recall("")}
        assert values == {"My sister's name is Ada.", "My manager is called Zed."}  # Bob's stays
        about = await say("What do you know about me?")
        assert "Ada" in about and "Priya" not in about and "Zed" not in about
        intro = await say("What can you do?")
        assert "forget" in intro and "!chaz memory mine" in intro and "!chaz help" in intro
        assert "group room" in intro
        # asked about what was never told, with nothing recalled: no invented answer
        dont = await say("What is my cat's name?")
        assert "don't know" in dont and model.requests == []
        assert await say("Remember that I drive a blue Volvo") == (
            "I'll remember that I drive a blue Volvo."
        )
        assert any("blue Volvo" in h.value for h in await alice.recall("Volvo"))
        everything = await say("forget everything")
        assert everything.startswith("Forgotten:") and "Ada" in everything, everything
        assert "Volvo" in everything
        assert "haven't told me" in await say("what do you know about me?")
        assert [h.value for h in await chaz.recall("")] == ["My manager is called Zed."]


async def test_help_says_how_to_address_the_bot_in_a_group(tmp_path: Path, cfg: Config) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        reply = await peer.command("help", prefix="!chaz ")
        assert "In a group room, start a message with !chaz or mention the bot" in reply.text
        assert "a DM (a room of just you and the bot)" in reply.text

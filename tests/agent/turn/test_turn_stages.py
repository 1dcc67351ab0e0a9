"""The turn's stages, each on its own (``chazbot.agent.turn``): the context resolved once
(``Peer.turn_context``), requests in words, recall and the prompt, the model and its tools
(every call through ``TurnTools.dispatch``), and the answer check. Real peers on real SQLite;
the chat model is a script in this process."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import chazbot
from chazbot.agent.chat_model import ChatModel, ChatResult, ToolCall
from chazbot.agent.grounding import evidence
from chazbot.agent.pictures import CANNOT_SEE, Picture
from chazbot.agent.recall import MEMORY_RULE
from chazbot.agent.turn import Incoming, ModelCan, TurnContext, TurnResult, take_turn
from chazbot.agent.turn.check import check_answer
from chazbot.agent.turn.dispatch import TurnTools
from chazbot.agent.turn.model import ask_model
from chazbot.agent.turn.prompt import NOTHING_RECALLED, Prompt, recall_and_prompt
from chazbot.agent.turn.quick import answer_in_words
from chazbot.config import AgentConfig, Config, EmbeddingConfig
from chazbot.errors import BackendError, PermissionDenied
from chazbot.memory.audience import room_audience
from chazbot.peer import Peer
from tests.support.standin_chat import Scripted
from tests.support.standin_llm import StandinLLM

ALICE = "@alice:example.org"
FRIDAY = datetime(2026, 12, 4, 23, 30, tzinfo=UTC)  # Saturday already in Berlin
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64


def said(text: str) -> ChatResult:
    return ChatResult(text, [])


def calls(*named: tuple[str, str]) -> ChatResult:
    return ChatResult(None, [ToolCall(f"c{n}", name, args) for n, (name, args) in enumerate(named)])


@asynccontextmanager
async def a_peer(tmp_path: Path, **agent: Any) -> AsyncIterator[Peer]:
    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", **agent)])
    async with chazbot.open(tmp_path, cfg) as peer:
        yield peer


async def context(
    peer: Peer, llm: ChatModel | None, sender: str = "local", **kw: Any
) -> TurnContext:
    chaz = peer.agent("chaz")
    session = await peer.session("room")
    return await TurnContext.open(peer, chaz, session, sender, llm, clock=lambda: FRIDAY, **kw)


# ---- the context -------------------------------------------------------------------------


async def test_the_context_is_resolved_once_from_the_peer_the_session_and_the_model(
    tmp_path: Path,
) -> None:
    cfg = Config(
        state_dir=tmp_path,
        agents=[AgentConfig(name="chaz", capture="messages"), AgentConfig(name="dot")],
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        session = await peer.session("room")
        dot = peer.agent("dot")
        await peer.reminders.of(dot.db, dot.key).set_zone(ALICE, "Europe/Berlin")
        await session.set_agent("dot")
        dm = room_audience("room", [ALICE], lambda u: False)
        ctx = await peer.turn_context(session, None, ALICE, dm, "!chaz ")
        assert ctx.agent is dot and ctx.session is session and ctx.sender == ALICE
        assert ctx.zone == "Europe/Berlin" and ctx.default_zone == cfg.timezone
        assert ctx.readers is dm and ctx.memory.hearing.prefix == "!chaz "
        assert ctx.can == ModelCan.of(ctx.llm)
        # the room's switch and the agent's setting, read together
        ctx = await peer.turn_context(session, "chaz", ALICE)
        assert ctx.agent is peer.agent("chaz") and ctx.capture == "messages" and ctx.acknowledge
        assert ctx.readers is None and ctx.zone == cfg.timezone
        await session.set_capture(False)
        ctx = await peer.turn_context(session, "chaz", ALICE)
        assert ctx.capture == "off" and not ctx.acknowledge


async def test_an_agent_the_room_does_not_allow_gets_no_context(tmp_path: Path) -> None:
    cfg = Config.model_validate(
        {
            "state_dir": str(tmp_path),
            "agents": [{"name": "chaz"}, {"name": "dot"}],
            "matrix": {
                "homeserver_url": "http://127.0.0.1:1",
                "user_id": "@chaz:example.org",
                "room_agents": {"!only:example.org": ["chaz"]},
            },
        }
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        session = await peer.session("matrix:!only:example.org")
        with pytest.raises(PermissionDenied, match="dot may not answer in this room"):
            await peer.turn_context(session, "dot", ALICE)
        assert (await peer.turn_context(session, None, ALICE)).agent.name == "chaz"


def test_what_a_model_can_do_is_what_its_protocol_declares() -> None:
    assert ModelCan.of(None) == ModelCan(tools=False, vision=False)
    assert ModelCan.of(Scripted(tools=True, vision=True)) == ModelCan(tools=True, vision=True)
    assert ModelCan.of(Scripted(tools=False)) == ModelCan(tools=False, vision=False)


# ---- stage 1: requests in words -------------------------------------------------------------


async def test_requests_in_words_are_answered_without_the_model(tmp_path: Path) -> None:
    async with a_peer(tmp_path) as peer:
        ctx = await context(peer, Scripted(), ALICE)
        done = await answer_in_words(ctx, Incoming("remind me in 10 minutes to stretch"))
        assert done is not None and done.answered_in_words and "stretch" in done.text, done
        assert await ctx.reminders.in_room("room") and ctx.session.name == "room"
        # a model that calls tools remembers with its own tool; a small one is answered here
        assert await answer_in_words(ctx, Incoming("remember that my dog is Rex")) is None
        small = await context(peer, Scripted(tools=False), ALICE)
        done = await answer_in_words(small, Incoming("remember that my dog is Rex"))
        assert done is not None and done.answered_in_words, done
        assert any("Rex" in h.value for h in await peer.agent("chaz").recall("dog"))
        history = [(m.role, m.content) for m in await ctx.session.history()]
        assert ("assistant", done.text) in history  # the answer is kept in the history
        assert await answer_in_words(ctx, Incoming("Write me a poem about autumn")) is None


async def test_a_told_fact_is_acknowledged_only_where_capture_keeps_it(tmp_path: Path) -> None:
    async with a_peer(tmp_path) as peer:
        told = Incoming("My dog is Rex.")
        keeping = await context(peer, None, ALICE, capture="messages")
        done = await answer_in_words(keeping, told)
        assert done is not None and done.text == "Noted: your dog is Rex." and done.ok
        assert not done.answered_in_words  # capture still keeps it
        assert await answer_in_words(await context(peer, None, ALICE), told) is None
        with_a_picture = Incoming("My dog is Rex.", [Picture(PNG, "image/png")])
        assert await answer_in_words(keeping, with_a_picture) is None


# ---- stage 2: recall and the prompt ---------------------------------------------------------


async def test_the_prompt_holds_the_memory_rule_the_block_and_the_date(tmp_path: Path) -> None:
    async with a_peer(tmp_path, system_prompt="You are chaz.") as peer:
        await peer.agent("chaz").remember("ops.deploy", "The deploy window is Friday at 10.")
        await peer.reminders.of(peer.agent("chaz").db, peer.agent("chaz").key).set_zone(
            ALICE, "Europe/Berlin"
        )
        ctx = await context(peer, Scripted(tools=True), ALICE)
        await ctx.session.add_message("user", "When is the deploy window?", ALICE)
        prompt = await recall_and_prompt(ctx, Incoming("When is the deploy window?"))
        assert isinstance(prompt, Prompt) and prompt.hits == 1
        assert [r.key for r in prompt.shown] == ["ops.deploy"]
        system = prompt.messages[0]
        assert system["role"] == "system" and system["content"].startswith("You are chaz.")
        assert MEMORY_RULE in system["content"]
        assert "Saturday 05 December 2026, 00:30 in Europe/Berlin" in system["content"]
        assert prompt.messages[-2] == {"role": "user", "content": "When is the deploy window?"}
        block = prompt.messages[-1]
        assert block["role"] == "user" and "Friday at 10" in block["content"]
        # a model without tools is not told the date
        small = await context(peer, Scripted(tools=False), ALICE)
        prompt = await recall_and_prompt(small, Incoming("When is the deploy window?"))
        assert isinstance(prompt, Prompt) and "Now it is" not in prompt.messages[0]["content"]


async def test_nothing_recalled_for_a_question_says_so_or_a_small_model_does_not_know(
    tmp_path: Path,
) -> None:
    async with a_peer(tmp_path) as peer:
        big = await context(peer, Scripted(tools=True), ALICE)
        prompt = await recall_and_prompt(big, Incoming("What is my son's name?"))
        assert isinstance(prompt, Prompt) and prompt.hits == 0 and not prompt.shown
        assert NOTHING_RECALLED in prompt.messages[0]["content"]
        small = await context(peer, Scripted(tools=False), ALICE)
        answer = await recall_and_prompt(small, Incoming("What is my son's name?"))
        assert isinstance(answer, TurnResult) and "don't know" in answer.text, answer
        history = await small.session.history()
        assert (history[-1].role, history[-1].content) == ("assistant", answer.text)


@pytest.mark.parametrize("vision", [True, False])
async def test_pictures_go_to_a_model_that_sees_only(tmp_path: Path, vision: bool) -> None:
    async with a_peer(tmp_path) as peer:
        ctx = await context(peer, Scripted(vision=vision), ALICE)
        await ctx.session.add_message("user", "our new kitchen", ALICE)
        sent = Incoming("our new kitchen", [Picture(PNG, "image/png")])
        prompt = await recall_and_prompt(ctx, sent)
        assert isinstance(prompt, Prompt)
        content = prompt.messages[-1]["content"]
        if vision:
            assert content[0]["text"] == "our new kitchen"
            assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")
        else:
            assert content == "our new kitchen"


# ---- stage 3: the model and its tools -------------------------------------------------------


async def test_each_tool_call_goes_through_dispatch_and_back_to_the_model(
    tmp_path: Path,
) -> None:
    async with a_peer(tmp_path, allowed_tools=["remember", "recall"]) as peer:
        model = Scripted(
            calls(("remember", '{"key": "pets.dog", "value": "Alice\'s dog is Rex"}')),
            calls(("recall", '{"query": "dog"}'), ("schedule_once", "{}"), ("made_up", "{}")),
            said("Your dog is Rex."),
        )
        ctx = await context(peer, model, ALICE)
        answered = await ask_model(ctx, model, Prompt([{"role": "user", "content": "hi"}]))
        assert answered.reply == "Your dog is Rex." and not answered.failure
        assert answered.tool_calls == [
            ("remember", True),
            ("recall", True),
            ("schedule_once", False),  # not among the agent's allowed tools
            ("made_up", False),
        ]
        assert [t["function"]["name"] for t in model.offered[0] or []] == ["remember", "recall"]
        assert any("Rex" in t for t in answered.told)  # what recall showed the model
        last = model.seen[-1]
        outputs = [m["content"] for m in last if m["role"] == "tool"]
        assert len(outputs) == 4 and "made_up" in outputs[-1], outputs
        assert any("Rex" in h.value for h in await peer.agent("chaz").recall("dog"))


async def test_dispatch_refuses_a_tool_the_agent_may_not_call(tmp_path: Path) -> None:
    async with a_peer(tmp_path, allowed_tools=["recall"]) as peer:
        tools = TurnTools(await context(peer, Scripted(), ALICE))
        refused = await tools.dispatch(ToolCall("c", "remember", '{"key": "a", "value": "b"}'))
        assert not refused.ok and "remember" in refused.output
        assert await peer.agent("chaz").recall("") == []  # nothing was written
        assert (await tools.dispatch(ToolCall("c", "recall", "{}"))).ok
        assert [t["function"]["name"] for t in tools.offered() or []] == ["recall"]
    async with a_peer(tmp_path / "none", allowed_tools=[]) as peer:
        assert TurnTools(await context(peer, Scripted(), ALICE)).offered() is None


async def test_a_failing_backend_and_a_model_that_never_answers(tmp_path: Path) -> None:
    async with a_peer(tmp_path, max_iterations=2) as peer:
        prompt = Prompt([{"role": "user", "content": "hi"}])
        broken = Scripted(BackendError("connection refused"))
        answered = await ask_model(await context(peer, broken), broken, prompt)
        assert answered.reply is None
        assert answered.failure == "The language model failed: connection refused"
        looping = Scripted(*[calls(("recall", "{}"))] * 3)
        answered = await ask_model(await context(peer, looping), looping, prompt)
        assert answered.reply == "I stopped after 2 steps without a final answer."
        assert answered.tool_calls == [("recall", True), ("recall", True)]


# ---- stage 4: the answer check --------------------------------------------------------------


async def test_the_answer_check(tmp_path: Path) -> None:
    async with a_peer(tmp_path) as peer:
        await peer.agent("chaz").remember("family.son", "Alice's son is called Tom.")
        ctx = await context(peer, Scripted(vision=False), ALICE)
        assert (await check_answer(ctx, Incoming("hi"), "  ", [], [])).reply == "(no reply)"
        picture = Incoming("our kitchen", [Picture(PNG, "image/png")])
        checked = await check_answer(ctx, picture, "Nice!", [], [])
        assert checked.reply == f"{CANNOT_SEE} Nice!" and checked.withheld is None
        question = Incoming("What is my son's name?")
        await ctx.session.add_message("user", question.text, ALICE)
        prompt = await recall_and_prompt(ctx, question)
        assert isinstance(prompt, Prompt) and prompt.shown
        rows, told = prompt.shown, [evidence(r) for r in prompt.shown]
        assert (await check_answer(ctx, question, "Tom.", told, rows)).withheld is None
        made_up = await check_answer(ctx, question, "Your son is Maximilian.", told, rows)
        assert made_up.withheld == "Your son is Maximilian." and "Maximilian" not in made_up.reply


# ---- the pipeline ---------------------------------------------------------------------------


async def test_the_pipeline_keeps_both_sides_of_the_turn(tmp_path: Path) -> None:
    async with a_peer(tmp_path) as peer:
        model = Scripted(calls(("recall", "{}")), said("Hello, Alice."))
        ctx = await context(peer, model, ALICE)
        result = await take_turn(ctx, Incoming("Hello there"))
        assert (
            result.ok and result.text == "Hello, Alice." and result.tool_calls == [("recall", True)]
        )
        history = [(m.role, m.content) for m in await ctx.session.history()]
        assert history[-2:] == [("user", "Hello there"), ("assistant", "Hello, Alice.")]
        none = await take_turn(await context(peer, None, ALICE), Incoming("Hello again"))
        assert not none.ok and "No LLM is configured" in none.text


async def test_a_voice_notes_turn_is_offered_no_tool_that_takes_something_away(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    """#47: a misheard or hostile "forget everything" in a voice note waits for a typed yes
    on the word path; on the model's path the transcript's turn is offered no ``forget`` (nor
    ``cancel_schedule``), and a call of it anyway is refused; typed, the same turn forgets."""
    cfg = Config(
        state_dir=tmp_path,
        llm=standin_llm.config(),
        agents=[AgentConfig(name="chaz", allowed_tools=["recall", "forget", "cancel_schedule"])],
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        await chaz.remember("pets.dog", "Alice's dog is Rex")
        heard = await peer.chat('call forget {"key": "pets.dog"}', sender=ALICE, spoken=True)
        assert heard.tool_calls == [("forget", False)], heard
        offered = {t["function"]["name"] for t in standin_llm.requests[-1]["tools"]}
        assert offered == {"recall"}, offered
        assert [h.key for h in await chaz.recall("dog")] == ["pets.dog"]  # still there
        typed = await peer.chat('call forget {"key": "pets.dog"}', sender=ALICE)
        assert typed.tool_calls == [("forget", True)], typed
        assert await chaz.recall("dog") == []
        ctx = dataclasses.replace(await context(peer, Scripted(), ALICE), spoken=True)
        assert not {"forget", "cancel_schedule"} & set(TurnTools(ctx).allowed)


async def test_a_forget_in_words_is_carried_out_with_a_model_that_has_the_forget_tool(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    """SPEC §5c: "forget …" in words does the same with every chat model. A composing model
    offered ``forget`` used to be handed the request, and one that did not call the tool
    forgot nothing (the bench's paraphraser: 0 of 12 forgets); the word path forgets the row
    by meaning, with its undo, and the model is not asked."""
    cfg = Config(
        state_dir=tmp_path,
        llm=standin_llm.config(),
        agents=[AgentConfig(name="chaz", capture="messages", allowed_tools=["recall", "forget"])],
        embedding=EmbeddingConfig(backend="local"),
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        dm = room_audience("dm", [ALICE], lambda u: True)

        async def rows() -> list[str]:
            return sorted(
                r.value for r in (await peer.memory.view(peer.agent("chaz").db)).visible.values()
            )

        await peer.chat("My dog is called Rex.", session="dm", sender=ALICE, audience=dm)
        await peer.chat("I work at the bakery.", session="dm", sender=ALICE, audience=dm)
        await peer.wait_captures()
        await peer.memory.wait_vectors(60)
        told = await rows()
        assert any("Rex" in r for r in told) and any("bakery" in r for r in told), told
        asked = len(standin_llm.requests)
        reply = await peer.chat(
            "Please forget my dog Rex.", session="dm", sender=ALICE, audience=dm
        )
        assert "Rex" in reply.text and reply.tool_calls == [], reply
        assert len(standin_llm.requests) == asked  # the model was not handed the forget
        if "1." in reply.text:  # listed, or "do you mean this?": the person picks
            reply = await peer.chat("1", session="dm", sender=ALICE, audience=dm)
            assert len(standin_llm.requests) == asked, reply
        left = await rows()
        assert not any("Rex" in r for r in left) and any("bakery" in r for r in left), reply.text
        await peer.chat("undo", session="dm", sender=ALICE, audience=dm)
        assert await rows() == told

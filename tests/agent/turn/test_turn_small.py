"""Small turn fixes: tool-name metric labels, the date in the prompt, "I don't know" in the
person's language (#36, #37)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import chazbot
from bench.honesty import HONEST
from chazbot import metrics
from chazbot.agent.asked import dont_know
from chazbot.agent.lexicon import reply
from chazbot.agent.turn import now_line, run_turn
from chazbot.config import AgentConfig, Config
from chazbot.memory.audience import room_audience
from tests.support.standin_chat import OneAnswer
from tests.support.standin_llm import StandinLLM

ALICE = "@alice:example.org"


def config(tmp_path: Path, llm: StandinLLM, **kw: Any) -> Config:
    return Config(state_dir=tmp_path, llm=llm.config(), **kw)


def tool_labels() -> set[str]:
    return {
        s.labels["tool"]
        for family in metrics.TOOL_CALLS.collect()
        for s in family.samples
        if "tool" in s.labels
    }


async def test_made_up_tool_names_add_at_most_one_metric_label(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    before = tool_labels()
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        for n in range(50):
            r = await peer.chat(f"call invented_tool_{n} {{}}", session="room-a")
            assert r.tool_calls and r.tool_calls[0] == (f"invented_tool_{n}", False), r
        r = await peer.chat("call recall {}", session="room-a")
        assert r.tool_calls and r.tool_calls[0][0] == "recall"
    added = tool_labels() - before
    assert added <= {"unknown", "recall"}, sorted(added)
    assert not any(label.startswith("invented_tool_") for label in tool_labels())
    assert "unknown" in tool_labels()


FRIDAY = datetime(2026, 12, 4, 23, 30, tzinfo=UTC)  # Saturday already in Berlin


async def test_a_model_with_tools_is_told_the_date_in_the_persons_zone(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        session = await peer.session("room-a")
        agent = await peer.session_agent(session)
        await peer.reminders.of(agent.db, agent.key).set_zone("@ann:x", "Europe/Berlin")
        llm = peer.models.llm_for(agent)
        await run_turn(peer, agent, session, "hello there", "@ann:x", llm, clock=lambda: FRIDAY)
        system = standin_llm.requests[-1]["messages"][0]["content"]
        assert "Saturday 05 December 2026, 00:30 in Europe/Berlin" in system, system
        # someone with no zone of their own: the default zone passed in
        await run_turn(
            peer,
            agent,
            session,
            "hello again",
            "@bob:x",
            llm,
            None,
            "America/New_York",
            clock=lambda: FRIDAY,
        )
        system = standin_llm.requests[-1]["messages"][0]["content"]
        assert "Friday 04 December 2026, 18:30 in America/New_York" in system, system
        # the embedded model (no tools) is not told (docs/memory.md says what it did with it)
        small = OneAnswer("Hello.", tools=False)
        await run_turn(peer, agent, session, "hi", "@ann:x", small, clock=lambda: FRIDAY)
        assert small.seen and "Now it is" not in small.seen[-1][0]["content"]
    assert "Friday 04 December 2026, 23:30 in UTC" in now_line(FRIDAY, "Mars/Olympus")


ASKED = {
    "en": ("What is my son's name?", "don't know"),
    "de": ("Wie heißt mein Sohn?", "weiß ich nicht"),
    "fr": ("Comment s'appelle mon fils ?", "Je ne le sais pas"),
    "es": ("¿Cómo se llama mi hijo?", "No lo sé"),
    "nl": ("Hoe heet mijn zoon?", "weet ik niet"),
}
ALSO = {  # "what/where …" questions, told apart by their question words
    "de": "Wo wohnt meine Schwester?",
    "fr": "Quel est mon film préféré ?",
    "es": "¿Dónde vive mi hermana?",
    "nl": "Wat is mijn lievelingsfilm?",
    "en": "Where was I born?",
}


@pytest.mark.parametrize("lang", sorted(ASKED))
async def test_i_dont_know_in_the_language_asked_in(tmp_path: Path, lang: str) -> None:
    question, words = ASKED[lang]
    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        dm = room_audience("dm", [ALICE], lambda u: False)
        alice = chaz.memory.within(peer.hearing(chaz, ALICE, dm))
        await alice.remember("a/1", f"{ALICE} (2026-12-02): My daughter is called Lina.")
        session = await peer.session("dm")
        for text in (question, ALSO[lang]):
            for tools in (False, True):  # withheld before the model, or after it answered
                model = OneAnswer("Lina is the name.", tools)
                result = await run_turn(peer, chaz, session, text, ALICE, model, alice)
                assert words.lower() in result.text.lower(), (text, tools, result.text)
                assert result.text == dont_know(text) == reply(lang, "dont_know")
                assert HONEST.search(result.text), result.text  # bench/honesty.py counts it


async def test_recall_context_bench_reads_the_block_the_model_was_sent(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    """bench/recall_context.py scores what auto-recall put in the block, whatever the reply
    (an answer the check withheld is replaced by what the person said, or "I don't know")."""
    from bench.recall_context import block_bullets

    standin_llm.respond_with({"role": "assistant", "content": "Your sister is called Marta."})
    cfg = Config(state_dir=tmp_path, llm=standin_llm.config(), agents=[AgentConfig(name="chaz")])
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        dm = room_audience("dm", [ALICE], lambda u: False)
        alice = chaz.memory.within(peer.hearing(chaz, ALICE, dm))
        await alice.remember("a/1", f"{ALICE} (2026-12-02): My sister lives in Lisbon.")
        session = await peer.session("dm")
        sent = len(standin_llm.requests)
        llm = peer.models.llm_for(chaz)
        result = await run_turn(
            peer, chaz, session, "Where does my sister live?", ALICE, llm, alice
        )
        assert result.withheld == "Your sister is called Marta."  # the check refused it
        # and the one row she told that answers is said back in her words (asked.unsupported)
        assert result.text == "You told me: your sister lives in Lisbon.", result.text
        bullets = block_bullets(standin_llm.requests[sent:])
        assert len(bullets) == 1 and "lisbon" in bullets[0], bullets
        assert block_bullets([]) == []

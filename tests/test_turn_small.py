"""Small turn fixes: tool-name metric labels, the date in the prompt, "I don't know" in the
person's language (#36, #37)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import chazbot
from chazbot import metrics
from chazbot.agent.turn import run_turn
from chazbot.reminders.store import Reminders
from chazbot.config import Config
from tests.standin_llm import StandinLLM


def config(tmp_path: Path, llm: StandinLLM, **kw: object) -> Config:
    return Config(state_dir=tmp_path, llm=llm.config(), **kw)  # type: ignore[arg-type]


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
        await Reminders(peer.ledger, agent.db, agent.key).set_zone("@ann:x", "Europe/Berlin")
        llm = peer.models.llm_for(agent)
        await run_turn(peer, agent, session, "hello there", "@ann:x", llm, clock=lambda: FRIDAY)
        system = standin_llm.requests[-1]["messages"][0]["content"]
        assert "Saturday 05 December 2026, 00:30 in Europe/Berlin" in system, system
        # someone with no zone of their own: the default zone passed in
        await run_turn(
            peer, agent, session, "hello again", "@bob:x", llm, None, "America/New_York",
            clock=lambda: FRIDAY,
        )
        system = standin_llm.requests[-1]["messages"][0]["content"]
        assert "Friday 04 December 2026, 18:30 in America/New_York" in system, system

"""Capture (SPEC §5b): agents remember what people tell them without tool calls.

Real SQLite files and the rule-driven stand-in LLM: ``messages`` rows that stand alone,
``facts`` that update keys instead of duplicating them, the per-room switch, bounds, and
failures that never break a turn.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import chazbot
from chazbot.agent.capture import (
    CAPTURE_TAG,
    MAX_FACTS_PER_TURN,
    MAX_MESSAGE_CHARS,
    Said,
    effective_mode,
    find_said,
    message_row,
    only_questions,
    parse_facts,
    speaker_name,
)
from chazbot.agent.session import Message
from chazbot.config import AgentConfig, CaptureMode, Config
from chazbot.memory.rows import Hit
from chazbot.memory.transfer import export_lines
from chazbot.peer import Peer
from tests.support.standin_chat import OneAnswer
from tests.support.standin_llm import StandinLLM, memory_block

ALICE = "@alice:example.org"
BOB = "@bob:example.org"


def config(tmp_path: Path, llm: StandinLLM, capture: CaptureMode = "messages", **kw: Any) -> Config:
    agents = [AgentConfig(name="chaz", capture=capture)]
    return Config(state_dir=tmp_path, llm=llm.config(), agents=agents, **kw)


async def said_to(peer: Peer, text: str, session: str, sender: str = ALICE) -> None:
    result = await peer.chat(text, session=session, sender=sender)
    assert result.ok, result.text
    await peer.wait_captures()


async def captured(peer: Peer) -> list[Hit]:
    return [h for h in await peer.agent("chaz").recall("", [CAPTURE_TAG], 100)]


# ---- pure parts ------------------------------------------------------------------------


def msg(n: int, role: str, content: str, sender: str) -> Message:
    return Message(n, role, content, sender, 1_764_633_600_000_000 + n)


def test_messages_row_stands_alone_and_names_what_it_replied_to() -> None:
    dm = [
        msg(0, "user", "hi", ALICE),
        msg(1, "assistant", "Hello! Where does your family live?", "chaz"),
        msg(2, "user", "my sister Ada lives in Lyon", ALICE),
        msg(3, "assistant", "Nice.", "chaz"),
    ]
    said = find_said(dm, "my sister Ada lives in Lyon", ALICE, "sha256:db", "chaz")
    assert said is not None
    key, value, tags = message_row(said)
    assert key == f"{ALICE}/2025-12-02/{said.source_id}" and len(said.source_id) == 8
    assert value == (
        f"{ALICE} (2025-12-02): my sister Ada lives in Lyon "
        "[replying to chaz: Hello! Where does your family live?]"
    )
    assert tags == [CAPTURE_TAG]
    # In a group, people answer people: the other person's message, not the bot's reply.
    group = [
        msg(0, "user", "Did you go hiking?", BOB),
        msg(1, "assistant", "You said: Did you go hiking?", "chaz"),
        msg(2, "user", "yes, up Mont Blanc", ALICE),
    ]
    said = find_said(group, "yes, up Mont Blanc", ALICE, "sha256:db", "chaz")
    assert said is not None and said.replied_to == (BOB, "Did you go hiking?")
    assert message_row(said)[1].endswith(
        f"yes, up Mont Blanc [replying to {BOB}: Did you go hiking?]"
    )
    # The agent's own reply is kept only when it asked something or the message is a
    # fragment: its statements are model output, noise in recall. A person's always is.
    dm = [msg(0, "assistant", "Lyon is nice.", "chaz"), msg(1, "user", "My dog is Rex.", ALICE)]
    said = find_said(dm, "My dog is Rex.", ALICE, "sha256:db", "chaz")
    assert said is not None and said.replied_to is None
    dm = [msg(0, "assistant", "Lyon is nice.", "chaz"), msg(1, "user", "Lyon", ALICE)]
    said = find_said(dm, "Lyon", ALICE, "sha256:db", "chaz")
    assert said is not None and said.replied_to == ("chaz", "Lyon is nice.")
    group = [msg(0, "user", "Lyon is nice.", BOB), msg(1, "user", "My dog is Rex.", ALICE)]
    said = find_said(group, "My dog is Rex.", ALICE, "sha256:db", "chaz")
    assert said is not None and said.replied_to == (BOB, "Lyon is nice.")
    # Its own earlier message is a boundary: nothing before it is what this replies to.
    alone = [msg(0, "user", "first", ALICE), msg(1, "user", "second", ALICE)]
    said = find_said(alone, "second", ALICE, "sha256:db", "chaz")
    assert said is not None and said.replied_to is None
    assert find_said(alone, "never said", ALICE, "sha256:db", "chaz") is None
    # the id is stable per message and differs between messages and sessions
    a = find_said(alone, "first", ALICE, "sha256:db", "chaz")
    b = find_said(alone, "first", ALICE, "sha256:other", "chaz")
    assert a is not None and b is not None and a.source_id != b.source_id


def test_rows_are_bounded_and_flattened() -> None:
    when = datetime(2026, 12, 2, tzinfo=UTC)
    said = Said("x" * 64, when, "word\n" * 5000, ("chaz", "why " * 1000 + "?"), "0123abcd")
    key, value, _ = message_row(said)
    assert len(key) <= 256 and "\n" not in value
    assert len(value) < MAX_MESSAGE_CHARS + 500 and value.count("…") == 2
    # a full MXID, never a localpart: @alice:evil.org is not @alice:example.org
    assert speaker_name("@alice:example.org") == "@alice:example.org"
    assert speaker_name("@alice:evil.org") != speaker_name("@alice:example.org")
    assert speaker_name("  ") == "someone"
    assert speaker_name("Jon  Smith") == "Jon Smith"
    assert message_row(Said("Jon Smith", when, "hi", None, "00"))[0] == "Jon_Smith/2026-12-02/00"


def test_effective_mode() -> None:
    tools, no_tools = OneAnswer(tools=True), OneAnswer(tools=False)
    assert effective_mode("auto", tools) == "facts"
    assert effective_mode("auto", no_tools) == "messages"
    assert effective_mode("facts", no_tools) == "messages"
    assert effective_mode("messages", tools) == "messages"
    assert effective_mode("off", tools) == "off"
    assert effective_mode("auto", None) == "messages"


def test_parse_facts_validates_bounds_and_reuses_close_keys() -> None:
    said = Said("alice", datetime(2026, 12, 2, tzinfo=UTC), "t", None, "00")
    close = [
        Hit("alice/alice.sister", "Alice's sister is Ada (alice, 2026-11-01)", (), said.when, 1.0),
        Hit("alice/alice.city", "Alice lives in Paris (alice, 2026-11-01)", (), said.when, 1.0),
    ]
    many = [{"key": f"k{i}", "value": f"v{i}"} for i in range(20)]
    raw = [
        "not json",
        json.dumps({"memories": "nope"}),
        json.dumps(
            {
                "memories": [
                    {"key": "Alice.Sister", "value": "Alice's sister is Beatrice"},
                    {"key": "alice.city", "value": "Alice lives in Paris"},  # unchanged
                    {"key": "", "value": "empty key"},
                    {"key": "k", "value": 3},
                    "not an object",
                    {"key": "alice.pet", "value": "Alice has a cat (alice, 2026-01-01)"},
                ]
            }
        ),
        json.dumps({"memories": many}),
    ]
    facts = parse_facts(raw, said, close)
    # keys go to the speaker's namespace, so another speaker's statement never replaces them
    assert facts[:2] == [
        ("alice/alice.sister", "Alice's sister is Beatrice (alice, 2026-12-02)"),
        ("alice/alice.pet", "Alice has a cat (alice, 2026-12-02)"),
    ]
    mallory = Said("@mallory:evil.org", said.when, "t", None, "00")
    stolen = parse_facts(
        [json.dumps({"memories": [{"key": "alice/alice.sister", "value": "X"}]})], mallory, []
    )
    assert stolen == [("@mallory:evil.org/alice/alice.sister", "X (@mallory:evil.org, 2026-12-02)")]
    assert len(facts) == MAX_FACTS_PER_TURN


# ---- through the agent ---------------------------------------------------------------------


async def test_messages_capture_is_recalled_in_another_room_and_forgotten(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        await said_to(peer, "hello there", "room-a")  # a greeting is not a memory (#17)
        await said_to(peer, "My sister Ada lives in Lyon.", "room-a")
        assert (await peer.command("/memory list", session="room-a")).ok  # never captured
        rows = await captured(peer)
        assert len(rows) == 1
        row = next(h for h in rows if "Lyon" in h.value)
        today = datetime.now(UTC).date().isoformat()
        assert row.key.startswith(f"{ALICE}/{today}/")
        # a statement that answers a statement stands alone: no context
        assert row.value == f"{ALICE} ({today}): My sister Ada lives in Lyon."

        # Another room: /memory search finds it, and the next turn's prompt carries it.
        found = await peer.command("/memory search self Lyon", session="room-b")
        assert found.ok and row.key in found.text, found.text
        await said_to(peer, "where does Ada live?", "room-b")
        block = memory_block(standin_llm.requests[-1])
        assert block is not None and f"- [{row.key}]: {row.value}" in block
        lines = await export_lines(peer.memory, peer.agent("chaz").db)
        exported = [json.loads(line) for line in lines]
        assert any(e["key"] == row.key and e["value"] == row.value for e in exported)

        # forget removes it from both
        assert (await peer.command(f"/memory forget {row.key}", session="room-b")).ok
        found = await peer.command("/memory search self Lyon", session="room-b")
        assert row.key not in found.text
        await said_to(peer, "tell me about Ada", "room-b")
        block = memory_block(standin_llm.requests[-1]) or ""
        assert row.key not in block and "Lyon" not in block
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:  # after a restart
        assert all(row.key != h.key for h in await captured(peer))


async def test_room_switch_turns_capture_off_and_on_and_persists(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        shown = await peer.command("/memory capture", session="quiet")
        assert shown.ok and "Capture is on in this room (messages)" in shown.text
        off = await peer.command("/memory capture OFF", session="quiet")
        assert off.ok and "Capture is off in this room (turned off in this room)" in off.text
        bad = await peer.command("/memory capture maybe", session="quiet")
        assert not bad.ok and "on, off" in bad.text
        await said_to(peer, "a secret about zebras", "quiet")
        await said_to(peer, "a note about giraffes", "loud")
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        await said_to(peer, "more about zebras", "quiet")  # still off after a restart
        assert [h.value.split(": ", 1)[1] for h in await captured(peer)] == [
            "a note about giraffes"
        ]
        assert (await peer.command("/memory capture on", session="quiet")).ok
        await said_to(peer, "zebras again", "quiet")
        assert len(await captured(peer)) == 2

    # An agent whose capture is off in the config: off everywhere until a room turns it on.
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm, capture="off")) as peer:
        shown = await peer.command("/memory capture", session="fresh")
        assert "chaz's capture is off in the config" in shown.text
        await said_to(peer, "nothing kept about lions", "fresh")
        assert len(await captured(peer)) == 2
        await peer.command("/memory capture on", session="fresh")
        await said_to(peer, "my pet is a lion", "fresh")  # on: the model's mode, facts
        assert len(await captured(peer)) == 3


async def test_facts_capture_updates_keys_instead_of_duplicating(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm, capture="auto")) as peer:
        assert await peer.models.capture_mode(peer.agent("chaz")) == "facts"  # tools: facts
        await said_to(peer, "Hi! my sister's name is Ada. And my city is Lyon.", "a")
        rows = {h.key: h.value for h in await captured(peer)}
        today = datetime.now(UTC).date().isoformat()
        assert rows == {
            f"{ALICE}/sister's name": f"{ALICE}'s sister's name is Ada ({ALICE}, {today})",
            f"{ALICE}/city": f"{ALICE}'s city is Lyon ({ALICE}, {today})",
        }
        request = standin_llm.capture_requests[-1]
        assert request["tools"][0]["function"]["name"] == "save_memories"
        assert all("save_memories" not in str(r.get("tools")) for r in standin_llm.requests)

        await said_to(peer, "Actually My Sister's Name is Beatrice", "b")
        shown = standin_llm.capture_requests[-1]["messages"][-1]["content"]
        assert f"- [{ALICE}/sister's name]: {ALICE}'s sister's name is Ada" in shown  # close keys
        rows = {h.key: h.value for h in await captured(peer)}
        assert rows[f"{ALICE}/sister's name"] == (
            f"{ALICE}'s Sister's Name is Beatrice ({ALICE}, {today})"
        )
        assert len(rows) == 2  # updated, not duplicated
        await said_to(peer, "nothing to keep here", "b")
        assert len(await captured(peer)) == 2


async def test_capture_failure_never_breaks_the_turn(
    tmp_path: Path, standin_llm: StandinLLM, caplog: pytest.LogCaptureFixture
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm, capture="facts")) as peer:
        standin_llm.fail_capture(2)  # the first try and its one retry
        with caplog.at_level(logging.WARNING):
            result = await peer.chat("my dog is Rex", session="s", sender=ALICE)
            assert result.ok and result.text == "Noted: your dog is Rex."  # (#40)
            await peer.wait_captures()
        failures = [
            r for r in caplog.records if r.name in ("chazbot.agent.capture", "chazbot.peer")
        ]
        assert len(failures) == 1 and "\n" not in failures[0].getMessage()
        assert await captured(peer) == []
        await said_to(peer, "my cat is Tom", "s")  # the next turn captures again
        assert [h.key for h in await captured(peer)] == [f"{ALICE}/cat"]
        # a failed turn (the LLM is down) captures nothing
        standin_llm.fail(2)
        # (a question: a told fact is noted without the model, #40)
        result = await peer.chat("my bird is Tweety, right?", session="s", sender=ALICE)
        await peer.wait_captures()
        assert not result.ok and [h.key for h in await captured(peer)] == [f"{ALICE}/cat"]


async def test_messages_without_words_and_long_messages(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        await said_to(peer, "👍 !!", "s")
        assert await captured(peer) == []
        await said_to(peer, "lorem " * 3000, "s")
        [row] = await captured(peer)
        assert len(row.value) < MAX_MESSAGE_CHARS + 100 and row.value.endswith("…")


def test_only_questions() -> None:
    assert only_questions("What is my dog called?") and only_questions("Why? And when?\nWho?")
    assert not only_questions("Lyon") and not only_questions("Hi! What is my dog called?")
    assert not only_questions("My dog is Max. Did I say that?") and not only_questions("?? !!")


async def test_messages_capture_skips_bare_questions(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    """Found by bench/localchat.py: stored questions took the top-3 places of the facts they
    asked about. A question is not stored; a short answer to the agent's question is."""
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        await said_to(peer, "What is my dog called?", "s")
        assert await captured(peer) == []
        await said_to(peer, "It is Biscuit. Can you remember that?", "s")
        [row] = await captured(peer)
        assert row.value.startswith(f"{ALICE} (")


async def test_the_start_line_names_model_embedder_and_capture(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    cfg = config(tmp_path, standin_llm, embedding=None)
    async with chazbot.open(tmp_path, cfg) as peer:
        line = await peer.describe()
        assert line == (
            f"chat model standin-model at {standin_llm.url}; embedder none (BM25 only); "
            "capture messages"
        )
    agents = [AgentConfig(name="a", capture="auto"), AgentConfig(name="b", capture="off")]
    cfg = Config(state_dir=tmp_path / "two", llm=standin_llm.config(), agents=agents)
    async with chazbot.open(tmp_path / "two", cfg) as peer:
        assert (await peer.describe()).endswith("capture a=facts, b=off")

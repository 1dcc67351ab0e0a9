"""Agent turns against the rule-driven stand-in LLM: tools, auto-recall, sessions, failures."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import chazbot
from chazbot.agent.recall import (
    NOTE,
    RecallSettings,
    choose_banks,
    focus_query,
    format_block,
    fuse_rankings,
    recall_query,
)
from chazbot.config import AgentConfig, Config
from chazbot.memory.rows import MemoryRow
from chazbot.transports.terminal import chat_loop
from tests.support.standin_llm import StandinLLM, memory_block


def config(tmp_path: Path, llm: StandinLLM, **kw: Any) -> Config:
    return Config(state_dir=tmp_path, llm=llm.config(), **kw)


async def test_remember_in_one_session_recall_in_another_by_auto_recall(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        r = await peer.chat("remember the deploy host is zeus.example.org", session="room-a")
        assert r.ok and r.text.startswith("Noted:"), r.text
        assert r.tool_calls == [("remember", True)]
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:  # after a restart
        r = await peer.chat("which deploy host do we use?", session="room-b")
        assert r.ok and "zeus.example.org" in r.text, r.text
        last = standin_llm.requests[-1]
        # the block comes after the conversation, never inside the system prompt
        assert last["messages"][-1]["content"].startswith("## Relevant Memories")
        assert "zeus" not in last["messages"][0]["content"]


async def test_auto_recall_block_exact_with_own_memory_and_two_banks(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    cfg = config(
        tmp_path,
        standin_llm,
        agents=[AgentConfig(name="ava", default_memory_banks=["conventions"])],
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        ava = peer.agent("ava")
        await peer.command("/memory new notes")
        await peer.command("/memory grant notes ava write")
        await peer.command("/memory attach notes", session="s1")
        await ava.remember("deploy process", "Build via nix build && scp to prod")
        await ava.remember("api endpoint", "https://api.example.com/v2 deploy")
        await ava.remember("naming", "Use kebab-case for deploy crates", bank="conventions")
        await ava.remember("release", "deploy on tuesdays only", bank="notes")
        await ava.remember("unrelated", "the cat sleeps", bank="notes")
        await peer.chat("how do we deploy?", session="s1")
        assert memory_block(standin_llm.requests[-1]) == (
            "## Relevant Memories\n"
            f"{NOTE}\n"
            "- [api endpoint]: https://api.example.com/v2 deploy\n"
            "- [deploy process]: Build via nix build && scp to prod\n"
            "\n"
            "_(from bank: notes)_\n"
            "- [release]: deploy on tuesdays only\n"
            "\n"
            "_(from bank: conventions)_\n"
            "- [naming]: Use kebab-case for deploy crates"
        )
        # auto_recall_banks narrows the banks; max_entries caps each store
        await peer.command("/memory config set auto_recall_banks conventions")
        await peer.command("/memory config set max_entries 1")
        await peer.chat("deploy again?", session="s1")
        block = memory_block(standin_llm.requests[-1])
        assert block is not None and "notes" not in block and block.count("- [") == 2
        # disabled: no block, tools still work
        await peer.command("/memory config set auto_recall_enabled false")
        await peer.chat("deploy please", session="s1")
        assert memory_block(standin_llm.requests[-1]) is None


async def test_no_block_when_nothing_matches(tmp_path: Path, standin_llm: StandinLLM) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        await peer.agent("chaz").remember("pet", "a cat named Miso")
        r = await peer.chat("what is the weather like?")
        assert r.text == "You said: what is the weather like?"
        assert memory_block(standin_llm.requests[-1]) is None
        assert r.recalled == 0


async def test_unreadable_banks_are_skipped_silently(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        await peer.command("/memory new notes")
        await peer.command("/memory grant notes chaz read")
        await peer.command("/memory attach notes")
        await peer.agent("chaz").remember("own", "deploy rules of our own")
        hosted = await peer.registry.get("bank", "notes")
        assert hosted is not None
        await peer.command("/memory revoke notes chaz")
        r = await peer.chat("deploy?")
        assert r.ok
        block = memory_block(standin_llm.requests[-1])
        assert block is not None and "notes" not in block and "[own]" in block


async def test_tool_not_in_allowed_tools_is_refused(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    cfg = config(
        tmp_path, standin_llm, agents=[AgentConfig(name="quiet", allowed_tools=["recall"])]
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        r = await peer.chat('call remember {"key": "k", "value": "v"}')
        assert r.tool_calls == [("remember", False)]
        assert "not allowed" in r.text and "recall" in r.text
        tools = [t["function"]["name"] for t in standin_llm.requests[0]["tools"]]
        assert tools == ["recall"]
        assert await peer.agent("quiet").recall("") == []


async def test_bad_tool_arguments_go_back_to_the_model(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        r = await peer.chat("call remember {not json")
        assert r.ok and "not valid JSON" in r.text
        r = await peer.chat('call remember {"key": "", "value": "v"}')
        assert "key must be 1-256" in r.text
        r = await peer.chat('call recall {"query": "x", "bank": "nope"}')
        assert "banks you can use: self" in r.text
        r = await peer.chat('call remember {"key": "k", "value": "v", "colour": 1}')
        assert "unknown argument" in r.text


async def test_429_then_success_is_retried(tmp_path: Path, standin_llm: StandinLLM) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        standin_llm.fail(1, 429, retry_after=0.05)
        r = await peer.chat("hello there")
        assert r.ok and r.text == "You said: hello there"
        assert len(standin_llm.requests) == 2


async def test_dead_backend_gives_one_clear_line(tmp_path: Path, standin_llm: StandinLLM) -> None:
    await standin_llm.stop()
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        r = await peer.chat("hello")
        assert not r.ok and "\n" not in r.text and "unreachable" in r.text
        assert (await peer.command("/memory list")).ok  # commands keep working


async def test_clear_starts_a_fresh_context(tmp_path: Path, standin_llm: StandinLLM) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        await peer.chat("first message")
        await peer.chat("second message")
        assert len(standin_llm.requests[-1]["messages"]) == 4  # system, user, assistant, user
        assert (await peer.command("/clear")).ok
        await peer.chat("third message")
        users = [m for m in standin_llm.requests[-1]["messages"] if m["role"] == "user"]
        assert [m["content"] for m in users] == ["third message"]
        session = await peer.session("cli")
        assert len(await session.history()) == 2  # the log still has everything
        rows = await peer.ledger.rows(session.db, "history")
        assert len(rows) == 6


async def test_terminal_chat_is_scriptable(tmp_path: Path, standin_llm: StandinLLM) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        out = io.StringIO()
        script = io.StringIO("hello\n/memory new notes\n\n/memory bogus\nremember color is teal\n")
        assert await chat_loop(peer, None, "term", script, out) == 0
        lines = out.getvalue().splitlines()
        assert lines[0] == "You said: hello"
        assert lines[1].startswith("Created bank notes")
        assert "subcommand" in lines[2]
        assert lines[3].startswith("Noted:")


def test_recall_query_and_block_are_pure() -> None:
    messages = ["The", "deploy of THE api", "x", "is it on Friday?", "old", "newest: deploy friday"]
    assert recall_query(messages) == "newest deploy friday old api"  # newest message first
    assert format_block([], []) is None
    row = MemoryRow(1, "r", "k", "v", (), 0, (1, "e", 0), "a")
    assert (
        format_block([], [("b", [row])])
        == f"## Relevant Memories\n{NOTE}\n_(from bank: b)_\n- [k]: v"
    )
    assert choose_banks(["a", "b"], ["b", "c"], RecallSettings()) == ["a", "b", "c"]
    assert choose_banks(["a", "b"], ["c"], RecallSettings(banks=("C", "a"))) == ["a", "c"]
    assert choose_banks(["a"], [], RecallSettings(banks=())) == []
    assert focus_query(messages) == "newest deploy friday" and focus_query(["is it?"]) == ""


def test_two_rankings_fuse_by_rrf_ties_to_the_first() -> None:
    def row(key: str) -> MemoryRow:
        return MemoryRow(1, "r", key, "v", (), 0, (1, "e", 0), "a")

    a, b, c, d = row("a"), row("b"), row("c"), row("d")
    # b is 2nd in both: it beats a and c, each 1st in one list only; a ties c, the first wins
    assert [r.key for r in fuse_rankings([[a, b, d], [c, b]], 3)] == ["b", "a", "c"]
    assert [r.key for r in fuse_rankings([[a, b]], 5)] == ["a", "b"]
    assert fuse_rankings([[], []], 3) == []


async def test_auto_recall_finds_what_was_just_asked_not_the_earlier_topic(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    """Found by bench/localchat.py: asked one after another in one room, each question's
    block held the earlier questions' facts (they share more words with the last 5
    messages) and the model answered the dog question with the sister's city."""
    cfg = config(tmp_path, standin_llm, agents=[AgentConfig(name="chaz", capture="off")])
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        await chaz.remember("sister.name", "My sister's name is Ada, my sister")
        await chaz.remember("sister.city", "My sister lives in Lyon, sister's city")
        await chaz.remember("sister.job", "My sister works as a sister nurse")
        await chaz.remember("dog", "My dog is called Biscuit")
        for question in (
            "What is my sister's name? my sister",
            "Where does my sister live? sister sister",
            "What is my dog called?",
        ):
            assert (await peer.chat(question, session="s")).ok
        block = memory_block(standin_llm.requests[-1])
        assert block is not None
        assert block.splitlines()[2] == "- [dog]: My dog is called Biscuit", block

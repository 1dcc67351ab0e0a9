"""Each text of a turn embedded once (issue #48): the embedder is most of a turn's CPU, and a
text sent to it twice is work done twice.

Real peers on real SQLite; the chat model and the embedder are the loopback stand-ins
(``tests/support/standin_llm.py``, ``tests/support/standin_embeddings.py``), whose requests
are counted:
- capture's look for close memories (``facts``) searched the whole message, embedded again
  beside the focus words auto-recall had just embedded for the same message;
- the same question in two rooms at once was embedded once per room;
- rows owed their vectors with the same text were each sent in the batch.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import chazbot
from chazbot.agent.recall import focus_query
from chazbot.config import AgentConfig, Config
from chazbot.peer import Peer
from tests.support.standin_embeddings import StandinEmbeddings, settled
from tests.support.standin_llm import StandinLLM


def config(tmp_path: Path, llm: StandinLLM, emb: StandinEmbeddings, capture: str) -> Config:
    return Config(
        state_dir=tmp_path,
        sync_listen="",
        http_listen="",
        llm=llm.config(),
        embedding=emb.config(),
        agents=[AgentConfig(name="chaz", capture=capture)],  # type: ignore[arg-type]
    )


def inputs(requests: list[dict[str, Any]]) -> list[str]:
    """Every text sent to the embedder, request by request, in order."""
    out: list[str] = []
    for body in requests:
        sent = body["input"]
        out += [sent] if isinstance(sent, str) else list(sent)
    return out


async def turn(peer: Peer, text: str, room: str) -> None:
    result = await peer.chat(text, session=room, sender="@alice:example.org")
    assert result.ok, result.text
    await peer.wait_captures()


@pytest.mark.parametrize(
    "message",
    [
        "I think the weather in Lyon is lovely and my sister agrees, she moved there",
        "What is my sister called?",
        "Tell me something funny about the croissants of the bakery on Rue Mercière",
    ],
)
async def test_a_facts_capture_embeds_the_message_once(
    tmp_path: Path,
    standin_llm: StandinLLM,
    standin_embeddings: StandinEmbeddings,
    message: str,
) -> None:
    cfg = config(tmp_path, standin_llm, standin_embeddings, "facts")
    async with chazbot.open(tmp_path, cfg) as opened:
        peer = await settled(opened)
        await turn(peer, "I grew up near the harbour in Marseille", "warm")  # rows to search
        before = len(standin_embeddings.requests)
        chats = len(standin_llm.requests)
        result = await peer.chat(message, session="room", sender="@alice:example.org")
        assert result.ok, result.text
        replied = len(standin_embeddings.requests)  # capture starts after the reply
        await peer.wait_captures()
        assert len(standin_llm.requests) > chats, "the turn went to the model (auto-recall ran)"
        assert standin_llm.capture_requests, "capture asked the model for facts"
        sent = inputs(standin_embeddings.requests[before:])
        # auto-recall embedded the message's words; capture's look for close memories
        # used that vector, not a second embedding of the message, and no text went twice
        assert focus_query([message]) in sent, sent
        assert inputs(standin_embeddings.requests[replied:]) == [], sent
        assert len(sent) == len(set(sent)), sent


async def test_one_question_in_two_rooms_at_once_is_embedded_once(
    tmp_path: Path, standin_llm: StandinLLM, standin_embeddings: StandinEmbeddings
) -> None:
    cfg = config(tmp_path, standin_llm, standin_embeddings, "off")
    async with chazbot.open(tmp_path, cfg) as opened:
        peer = await settled(opened)
        await turn(peer, "Where did Ada plant the tulips?", "warm")
        standin_embeddings.hold_matching("sister")  # both turns reach the embedder first
        before = len(standin_embeddings.requests)
        both = asyncio.gather(
            turn(peer, "What is my sister called?", "room-a"),
            turn(peer, "What is my sister called?", "room-b"),
        )
        await standin_embeddings.wait_for_requests(before + 1)
        await asyncio.sleep(0)  # the second turn had its chance to send its own
        standin_embeddings.let_go()
        await both
        await turn(peer, "What is my sister called?", "room-c")  # later: the kept vector
        sent = inputs(standin_embeddings.requests[before:])
        assert sent.count(focus_query(["What is my sister called?"])) == 1, sent


async def test_rows_of_one_text_owed_in_a_batch_are_embedded_once(
    tmp_path: Path, standin_llm: StandinLLM, standin_embeddings: StandinEmbeddings
) -> None:
    cfg = config(tmp_path, standin_llm, standin_embeddings, "off")
    async with chazbot.open(tmp_path, cfg) as opened:
        peer = await settled(opened)
        agent = peer.agent("chaz")
        before = len(standin_embeddings.requests)
        ids = [
            await peer.memory.remember(
                agent.db, agent.key, f"k{i}", "Ada planted tulips", embed_as=text, vector_later=True
            )
            for i, text in enumerate(["tulips in Lyon", "tulips in Lyon", "tulips in Lyon", "jazz"])
        ]
        assert await peer.memory.wait_vectors(timeout=30)
        sent = inputs(standin_embeddings.requests[before:])
        assert sorted(sent) == ["jazz", "tulips in Lyon"], sent
        view = await peer.memory.view(agent.db)
        assert all(view.has_vector(row_id) for row_id in ids)  # every row has its vector

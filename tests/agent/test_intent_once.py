"""A turn reads its message's intent once (issue #48): the reply's ``told`` read it twice and
capture's ``worth_keeping`` a third time, ~2.3 ms each on a loaded machine, a tenth of what a
turn costs beside its row's vector.

A real peer on real SQLite; the chat model and the embedder are the loopback stand-ins.
"""

from __future__ import annotations

from pathlib import Path

import chazbot
from chazbot.agent.words import intent
from tests.memory.test_embed_once import config
from tests.support.standin_embeddings import StandinEmbeddings
from tests.support.standin_llm import StandinLLM


async def test_a_statement_turn_reads_its_intent_once(
    tmp_path: Path, standin_llm: StandinLLM, standin_embeddings: StandinEmbeddings
) -> None:
    cfg = config(tmp_path, standin_llm, standin_embeddings, "messages")
    async with chazbot.open(tmp_path, cfg) as peer:
        text = f"On day 3 in room 5 I spent 5 hours on tulips with Ada {tmp_path.name}"
        before = intent.cache_info()
        result = await peer.chat(text, session="room", sender="@ann:example.org")
        assert result.ok, result.text
        await peer.wait_captures()
        after = intent.cache_info()
        assert await peer.memory.recall(peer.agent("chaz").db, "tulips")  # it was kept
    assert after.misses - before.misses == 1  # read once
    assert after.hits - before.hits >= 2  # and answered from there the other times

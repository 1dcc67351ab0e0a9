"""Vectors owed are never lost (issue 35): vectors still queued at a stop are recorded as owed
and written after the next start without a reindex, a crash leaves them owed, and a bulk
import writes its rows at disk speed and hands the vectors to the background.

Real peers on real SQLite in a temporary state dir; the embedder is the loopback stand-in,
told to hold documents (a slow embedder); the crash is a real child process that dies with
``os._exit`` while its rows wait for their vectors.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import chazbot
from chazbot.config import AgentConfig, Config
from chazbot.ledger import KeyPair, Ledger, Permission
from chazbot.memory.banks import writer_key_for
from chazbot.memory.engine import EngineTiming
from chazbot.memory.rows import MEMORY_STORE, decode_vector, embeddings_store, row_text
from chazbot.memory.transfer import import_lines
from chazbot.memory.vector_queue import VectorTiming
from chazbot.peer import Peer, PeerTuning
from tests.support.paths import ROOT
from tests.support.standin_embeddings import StandinEmbeddings, settled
from tests.support.waits import wait_until

CHILD = """
import asyncio, os, sys
import chazbot
from chazbot.config import Config

async def main() -> None:
    cfg = Config.model_validate_json(sys.argv[1])
    async with chazbot.open(cfg.state_dir, cfg) as peer:
        agent = peer.agent("chaz")
        for i in range(int(sys.argv[2])):
            await peer.memory.remember(
                agent.db, agent.key, f"crash{i}", f"{i} pelicans", vector_later=True
            )
        print("written", flush=True)
        os._exit(0)  # a crash: no close, no stop, the queue dies with the process

asyncio.run(main())
"""


def config(tmp_path: Path, emb: StandinEmbeddings) -> Config:
    return Config(
        state_dir=tmp_path,
        sync_listen="",
        http_listen="",
        llm=None,
        embedding=emb.config(),
        agents=[AgentConfig(name="chaz", capture="off")],
    )


async def vectors_of(peer: Peer, db: str) -> dict[str, np.ndarray]:
    """Every vector row of the active model in ``db``, by the row id it belongs to."""
    assert peer.memory.model is not None
    rows = await peer.ledger.rows(db, embeddings_store(peer.memory.model), limit=100_000)
    return {r.data["ref"]: decode_vector(r.data["vec"]) for r in rows}


async def marks(peer: Peer) -> list[tuple[str, ...]]:
    """The marks and recorded texts in the vector queue's tables (``memory.vector_tables``)."""
    return await peer.ledger.local("SELECT db, by FROM vectors_owed") + await peer.ledger.local(
        "SELECT db, row_id FROM vectors_owed_text"
    )


async def test_vectors_queued_at_a_stop_are_written_after_the_next_start(
    tmp_path: Path,
    standin_embeddings: StandinEmbeddings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    quick = PeerTuning(capture_close_wait_s=0.3)
    standin_embeddings.hold_matching("goats")  # a slow embedder: the documents never come back
    cfg = config(tmp_path, standin_embeddings)
    count = quick.memory.vectors.batch + 8  # two batches: one under way at the stop, one waiting
    with caplog.at_level(logging.INFO):
        async with chazbot.open(tmp_path, cfg, tuning=quick) as peer:
            agent = peer.agent("chaz")
            ids = {}
            for i in range(count):
                said = f"{i} goats graze the hill {i}"
                ids[
                    await peer.memory.remember(
                        agent.db, agent.key, f"k{i}", "goats", embed_as=said, vector_later=True
                    )
                ] = said
            await wait_until(lambda: standin_embeddings.held == 1, what="the held batch")
            found = await peer.memory.recall(agent.db, "k7")  # BM25 finds them meanwhile
            assert [r.row.key for r in found][:1] == ["k7"]
            reply = await peer.command("/memory stats")
            assert f"{count} vectors owed, written in the background" in reply.text, reply.text
        closed = [r.getMessage() for r in caplog.records]
    assert not any("state file is closed" in m for m in closed), closed
    assert any(f"{count} vectors owed at the stop" in m for m in closed), closed

    standin_embeddings.let_go()
    async with chazbot.open(tmp_path, cfg) as peer:
        agent = peer.agent("chaz")
        assert await peer.memory.wait_vectors(30)
        vectors = await vectors_of(peer, agent.db)
        assert set(ids) <= set(vectors)
        for row_id, said in ids.items():  # the text recorded at the stop, not key + value
            assert np.allclose(vectors[row_id], standin_embeddings.vector(said), atol=1e-5)
        assert await marks(peer) == []  # nothing owed any more
        reply = await peer.command("/memory stats")
        assert "owed" not in reply.text, reply.text
    # written once: one vector per row, no reindex
    async with chazbot.open(tmp_path, cfg) as peer:
        assert (
            len(
                await peer.ledger.rows(
                    peer.agent("chaz").db, embeddings_store(peer.memory.model or ""), limit=1000
                )
            )
            == count
        )


async def test_a_crash_leaves_vectors_owed_not_lost(
    tmp_path: Path, standin_embeddings: StandinEmbeddings
) -> None:
    standin_embeddings.hold_matching("pelicans")
    cfg = config(tmp_path, standin_embeddings)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD,
        cfg.model_dump_json(),
        "12",
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0 and b"written" in out, err.decode()[-2000:]
    standin_embeddings.let_go()

    async with chazbot.open(tmp_path, cfg) as peer:
        agent = peer.agent("chaz")
        view = await peer.memory.view(agent.db)
        rows = [r for r in view.visible.values() if r.key.startswith("crash")]
        assert len(rows) == 12
        assert peer.memory.vectors_later is not None
        assert agent.db in peer.memory.vectors_later.marked
        assert await peer.memory.wait_vectors(30)
        vectors = await vectors_of(peer, agent.db)
        for r in rows:  # no recorded text after a crash: the row's text (key and value)
            assert np.allclose(
                vectors[r.row_id], standin_embeddings.vector(row_text(r.key, r.value)), atol=1e-5
            )
        assert await marks(peer) == []


async def test_an_import_writes_rows_first_and_vectors_after(
    tmp_path: Path, standin_embeddings: StandinEmbeddings
) -> None:
    standin_embeddings.hold_matching("otters")
    cfg = config(tmp_path, standin_embeddings)
    lines = [
        json.dumps({"key": f"note{i}", "value": f"otters number {i} swim", "tags": []})
        for i in range(300)
    ]
    async with chazbot.open(tmp_path, cfg) as peer:
        assert (await peer.command("/memory new notes")).ok
        found = await peer.registry.get("bank", "notes")
        assert found is not None
        key = await writer_key_for(peer.ledger, peer.registry, found.db)
        # the embedder holds every "otters" text: the import returns without waiting for it
        report = await asyncio.wait_for(
            import_lines(peer.memory, found.db, key, lines, batch_size=100), 30
        )
        assert report.written == 300
        hits = await peer.memory.recall(found.db, "note123")
        assert hits and hits[0].row.key == "note123"
        assert peer.memory.load_status(found.db) is not None
        await wait_until(lambda: standin_embeddings.held >= 1, what="the background batch")
        reply = await peer.command("/memory stats notes")
        assert "vectors owed" in reply.text, reply.text
        standin_embeddings.let_go()
        assert await peer.memory.wait_vectors(30)
        vectors = await vectors_of(peer, found.db)
        rows = await peer.ledger.rows(found.db, MEMORY_STORE, limit=1000)
        assert {r.row_id for r in rows} <= set(vectors)
        assert await marks(peer) == []


async def test_rows_that_arrive_without_vectors_get_them_after_a_grace(
    tmp_path: Path, standin_embeddings: StandinEmbeddings
) -> None:
    """Rows synced in from a peer that wrote no vectors (``embedding: null`` there): this
    peer, which may write the bank, owes them and writes them after the grace, once."""
    soon = PeerTuning(memory=EngineTiming(vectors=VectorTiming(arrived_grace_s=0.2)))
    cfg = config(tmp_path / "here", standin_embeddings)
    other = await Ledger.open(tmp_path / "other.sqlite3")
    writer = KeyPair.generate()
    try:
        async with chazbot.open(tmp_path / "here", cfg, tuning=soon) as opened:
            peer = await settled(opened)  # the start's own embeddings take none of the failures
            assert (await peer.command("/memory new notes")).ok
            found = await peer.registry.get("bank", "notes")
            assert found is not None
            admin = await writer_key_for(peer.ledger, peer.registry, found.db)
            await peer.ledger.set_auth(found.db, admin, writer.public, Permission.parse("write"))
            # the other peer holds the bank's history and writes rows there, no vectors
            await other.ingest([d for _, d in await peer.ledger.entries(found.db)])
            ops = [
                {"op": "insert", "row": {"key": f"far{i}", "value": f"{i} herons"}}
                for i in range(5)
            ]
            await other.write(found.db, writer, {MEMORY_STORE: ops})
            seen = {d for _, d in await peer.ledger.entries(found.db)}
            fresh = [d for _, d in await other.entries(found.db) if d not in seen]
            result = await peer.ledger.ingest(fresh)
            assert len(result.accepted) == 1, result
            hits = await peer.memory.recall(found.db, "far3")  # BM25 at once
            assert hits and hits[0].row.key == "far3"
            queue = peer.memory.vectors_later
            assert queue is not None
            await wait_until(lambda: found.db in queue.marked, what="the bank marked")
            await wait_until(
                lambda: found.db not in queue.marked and queue.pending == 0,
                what="the arrived rows' vectors",
            )
            vectors = await vectors_of(peer, found.db)
            rows = await peer.ledger.rows(found.db, MEMORY_STORE, limit=100)
            assert {r.row_id for r in rows} <= set(vectors) and len(vectors) == 5
            # a row written here whose embedding failed is owed the same way; one written
            # with its vector in the same entry is not
            agent = peer.agent("chaz")
            await peer.memory.remember(agent.db, agent.key, "near", "a heron nests here")
            standin_embeddings.fail(3, 500)
            await peer.memory.remember(agent.db, agent.key, "nearer", "a heron fishes here")
            await wait_until(lambda: agent.db in queue.marked, what="the failed one owed")
            await wait_until(lambda: agent.db not in queue.marked, what="its vector written")
            assert len(await vectors_of(peer, agent.db)) == 2  # one each, none twice
    finally:
        await other.close()

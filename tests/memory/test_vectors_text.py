"""A row's vector is of its human text (issue 35, ``rows.row_text``): the same whether the
speaker and date sit in the key, the value or the row's provenance; and vectors stored with
an older text version are owed again and rewritten in the background after the next start,
without a reindex, BM25 (and the old vectors) serving meanwhile.

Real peers on real SQLite in a temporary state dir; the embedder is the loopback stand-in.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

import chazbot
from chazbot.ledger import Ledger
from chazbot.memory.banks import writer_key_for
from chazbot.memory.rows import EMBED_TEXT_VERSION, MEMORY_STORE, row_text
from chazbot.memory.vector_queue import VectorQueue
from chazbot.memory.vector_tables import VECTORS, VectorRecords
from chazbot.peer import STATE_FILE
from tests.memory.test_vectors_owed import config, vectors_of
from tests.support.standin_embeddings import StandinEmbeddings
from tests.support.waits import wait_until


@pytest.mark.parametrize(
    ("key", "value", "speaker"),
    [
        ("Caroline 8 May, 2023 D1:3", "Caroline: I went to a support group", None),
        ("Caroline 8 May, 2023 D1:3", "I went to a support group", None),
        ("D1:3", "I went to a support group", "Caroline"),
        ("Caroline/2023-05-08/ab12cd34", "Caroline (2023-05-08): I went to a support group", None),
        ("D1:3", "(8 May, 2023) Caroline: I went to a support group", "Caroline"),
    ],
)
def test_the_text_is_the_same_wherever_the_speaker_and_date_sit(
    key: str, value: str, speaker: str | None
) -> None:
    assert row_text(key, value, speaker) == "Caroline Caroline: I went to a support group"


def test_the_text_keeps_what_a_key_says_and_names_a_matrix_speaker() -> None:
    assert row_text("wifi code", "rose-7", "@bob:example.org") == "bob bob: wifi code: rose-7"
    captured = row_text(
        "@bob:example.org/2023-05-08/ab12cd34",
        "@bob:example.org (2023-05-08): the wifi code is rose-7 [replying to @al:x.org: hm]",
        "@bob:example.org",
    )
    assert captured == "bob bob: the wifi code is rose-7 [replying to @al:x.org: hm]"
    assert row_text("2023-05-08", "", None) == "2023-05-08"  # never empty
    assert row_text("note", "Bob: hi", "Bob") == "note note: Bob: hi"
    assert row_text("D1:3", "I went", None) == "I went"  # no lead: nothing doubled
    assert row_text("crash0", "mp3 at 12:30", None) == "crash0 crash0: mp3 at 12:30"


async def test_vectors_of_an_older_text_are_rewritten_after_the_next_start(
    tmp_path: Path, standin_embeddings: StandinEmbeddings
) -> None:
    cfg = config(tmp_path, standin_embeddings)
    rows = {f"Ann 8 May, 2023 D1:{i}": f"otters swim by pier{i}" for i in range(40)}
    async with chazbot.open(tmp_path, cfg) as peer:
        db = await peer.hosting.create_bank("notes")
        key = await writer_key_for(peer.ledger, peer.registry, db)
        for k, v in rows.items():  # written as before version 2: the vector of "key value"
            await peer.memory.remember(db, key, k, v, embed_as=f"{k} {v}")
    # a state from before this text version: no record of the version its vectors are of
    ledger = await Ledger.open(tmp_path / STATE_FILE, (VECTORS,))
    try:
        await ledger.local("DELETE FROM vectors_text_since")
        await ledger.local("DELETE FROM vectors_text WHERE db = ?", (db,))
    finally:
        await ledger.close()

    standin_embeddings.hold_matching("otters")  # the rewrite waits: BM25 serves meanwhile
    async with chazbot.open(tmp_path, cfg) as peer:
        hits = await peer.memory.recall(db, "pier7")  # opens the bank
        assert "Ann 8 May, 2023 D1:7" in [h.row.key for h in hits]
        await wait_until(lambda: standin_embeddings.held >= 1, what="the rewrite's first batch")
        reply = await peer.command("/memory stats notes")
        assert "vectors owed" in reply.text, reply.text
        standin_embeddings.let_go()
        await wait_until(
            lambda: peer.memory.vectors_later is not None and not peer.memory.vectors_later.pending,
            what="the rewrite",
        )
        assert await peer.memory.wait_vectors(30)
        assert await VectorRecords(peer.ledger).text_version(db) == EMBED_TEXT_VERSION
        vectors = await vectors_of(peer, db)  # the newest vector of each row
        stored = {r.row_id: r.data["key"] for r in await peer.ledger.rows(db, MEMORY_STORE)}
        assert len(stored) == len(rows)
        for row_id, k in stored.items():
            new = standin_embeddings.vector(row_text(k, rows[k]))
            assert np.allclose(vectors[row_id], new, atol=1e-5), k
        view = await peer.memory.view(db)
        assert view.vectors is not None
        for k in stored.values():  # the view searches the new vectors
            ((_, cosine),) = view.vectors.search(new_vec(standin_embeddings, k, rows), 1)
            assert cosine > 0.9999, k  # the new text's vector is in the index
        count = len(await peer.ledger.rows(db, "embeddings:" + (peer.memory.model or "")))
        assert count == 2 * len(rows)  # each row's old vector and its new one

    async with chazbot.open(tmp_path, cfg) as peer:  # done once: not rewritten again
        await peer.memory.recall(db, "pier7")
        await wait_until(lambda: not peer.memory._checks, what="the text check")
        assert await peer.memory.wait_vectors(30)
        count_after = len(await peer.ledger.rows(db, "embeddings:" + (peer.memory.model or "")))
        assert count_after == count


def new_vec(emb: StandinEmbeddings, key: str, rows: dict[str, str]) -> np.ndarray:
    return emb.vector(row_text(key, rows[key]))


async def test_a_close_right_after_a_bank_opens_leaves_no_check_behind(
    tmp_path: Path, standin_embeddings: StandinEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = config(tmp_path, standin_embeddings)
    async with chazbot.open(tmp_path, cfg) as peer:
        db = await peer.hosting.create_bank("notes")
        key = await writer_key_for(peer.ledger, peer.registry, db)
        await peer.memory.remember(db, key, "k", "otters swim", embed_as="k otters swim")
    gate = asyncio.Event()  # the bank's text check is under way when the peer closes
    check_text = VectorQueue.check_text

    async def slow_check(self: VectorQueue, db: str) -> bool:
        await gate.wait()
        return await check_text(self, db)

    monkeypatch.setattr(VectorQueue, "check_text", slow_check)
    async with chazbot.open(tmp_path, cfg) as peer:
        await peer.memory.recall(db, "otters")
        checks = set(peer.memory._checks)
        assert checks  # loading the bank started its check
    assert all(task.done() for task in checks)  # ended before the ledger closed
    gate.set()

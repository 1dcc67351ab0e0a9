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
from chazbot.memory.rows import (
    EMBED_TEXT_VERSION,
    MAX_LEAD_WORDS,
    MEMORY_STORE,
    row_text,
    spoken_name,
)
from chazbot.memory.vector_queue import VectorQueue
from chazbot.memory.vector_tables import VECTORS, VectorRecords
from chazbot.peer import STATE_FILE
from tests.memory.test_vectors_owed import config, vectors_of
from tests.support.standin_embeddings import StandinEmbeddings
from tests.support.waits import wait_until

MACHINE = "@loadhuman-memory-on-1733619123:localhost"  # the load bench's human (#48)


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


@pytest.mark.parametrize(
    ("speaker", "said"),
    [
        (MACHINE, "loadhuman memory on"),  # the load bench's human (#48)
        ("@telegram_4915112345678:t.org", "telegram"),  # a bridge's puppet: a phone number
        ("@_discord_123456789012345678:d.org", "discord"),
        ("@signal_1a2b3c4d-9f86d081884c7d65:s.org", "signal"),  # a uuid's parts
        ("@user1733619123:x.org", "user"),
        ("@alice.smith:x.org", "alice smith"),
        ("@bob2:x.org", "bob2"),  # a person's digit stays
        ("@1234:x.org", "1234"),  # nothing else: the localpart stays whole
        ("Caroline", "Caroline"),  # not an MXID: as it is
    ],
)
def test_a_speaker_is_named_without_what_a_program_made(speaker: str, said: str) -> None:
    assert spoken_name(speaker) == said
    captured = row_text(
        f"{speaker.replace(' ', '_')}/2026-12-08/ab12cd34",
        f"{speaker} (2026-12-08): I spent 3 hours on tulips",
        speaker,
    )
    lead = f"{said} {said}" if len(said.split()) <= MAX_LEAD_WORDS else said
    assert captured == f"{lead}: I spent 3 hours on tulips"
    assert row_text("D1:3", "I spent 3 hours on tulips", speaker) == captured


def test_a_long_lead_is_named_once() -> None:
    """A name is weighed twice; a lead of more words (a key's, or what a text says before a
    colon) once: its tokens cost CPU and it would outweigh what the row says."""
    assert row_text("favourite colour", "blue", None) == "favourite colour favourite colour: blue"
    assert row_text("k", "Mary Ann Smith: hi", None) == "k k: Mary Ann Smith: hi"
    assert row_text("D1:3", "Mary Ann Smith: hi", None) == "Mary Ann Smith: hi"
    long = "Seven years now, and I've finally found my real muses: painting and pottery"
    assert row_text("D1:3", long, None) == long
    assert row_text("project deadline for the report", "Friday", None) == (
        "project deadline for the report: Friday"
    )
    # a key's MXID is one name, whatever separators its localpart has
    assert row_text("@ann_lee:x.org/iban", "DE00 1234", None) == "ann lee iban: DE00 1234"


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


def older_rows(version: int) -> dict[str, tuple[str, str]]:
    """Rows as an older text version stored them: ``key -> (value, the text embedded)``."""
    if version == 1:  # the vector of "key value"
        return {
            f"Ann 8 May, 2023 D1:{i}": (
                f"otters swim by pier{i}",
                f"Ann 8 May, 2023 D1:{i} otters swim by pier{i}",
            )
            for i in range(40)
        }
    local = MACHINE[1:].split(":")[0]  # version 2: the whole localpart, named twice
    return {
        f"{MACHINE}/2026-12-08/{i:08x}": (
            f"{MACHINE} (2026-12-08): otters swim by pier{i}",
            f"{local} {local}: otters swim by pier{i}",
        )
        for i in range(40)
    }


@pytest.mark.parametrize("older", [1, 2])
async def test_vectors_of_an_older_text_are_rewritten_after_the_next_start(
    tmp_path: Path, standin_embeddings: StandinEmbeddings, older: int
) -> None:
    cfg = config(tmp_path, standin_embeddings)
    written = older_rows(older)
    rows = {k: value for k, (value, _) in written.items()}
    async with chazbot.open(tmp_path, cfg) as peer:
        db = await peer.hosting.create_bank("notes")
        key = await writer_key_for(peer.ledger, peer.registry, db)
        for k, (v, text) in written.items():  # written as that version did
            await peer.memory.remember(db, key, k, v, embed_as=text)
            assert text != row_text(k, v)  # the current text differs
    # a state from that version: no record of the version its vectors are of (1), or a record
    # that they are of version 2 up to now
    ledger = await Ledger.open(tmp_path / STATE_FILE, (VECTORS,))
    try:
        await ledger.local("DELETE FROM vectors_text_since")
        await ledger.local("DELETE FROM vectors_text WHERE db = ?", (db,))
        if older > 1:
            records = VectorRecords(ledger)
            await records.set_since(older, await ledger.last_row_number())
            await records.set_text_version(db, older)
    finally:
        await ledger.close()

    standin_embeddings.hold_matching("otters")  # the rewrite waits: BM25 serves meanwhile
    async with chazbot.open(tmp_path, cfg) as peer:
        first = next(iter(rows))
        hits = await peer.memory.recall(db, "pier0")  # opens the bank
        assert first in [h.row.key for h in hits]
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
        seventh = list(rows)[7]  # search finds a row by its new vector
        hits = await peer.memory.recall(db, row_text(seventh, rows[seventh]))
        cosines = {h.row.key: h.cosine for h in hits}
        assert (cosines.get(seventh) or 0.0) > 0.9999, cosines

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

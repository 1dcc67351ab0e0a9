"""The newest statement about the same thing first (issue 35, SPEC §3 after fusion).

The rule on its own, the ranking path (``MemoryView.search`` with the tests' hashed vectors),
the update set's held-out half through that path, and a real peer whose auto-recall block
and recall tool show "rose-7" first and "earlier: … tulip-42" after it, with the stand-in LLM
and embedder on loopback.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

import chazbot
from bench import updates
from chazbot.config import AgentConfig, Config, local_embedder_installed
from chazbot.memory.audience import Audience, Provenance
from chazbot.memory.current import earlier_mark, newest_first, same_subject, statement, told_of
from chazbot.memory.rows import MemoryRow
from chazbot.memory.view import MemoryView
from tests.support.standin_embeddings import StandinEmbeddings
from tests.support.standin_llm import StandinLLM

ALICE = "@alice:example.org"
BOB = "@bob:example.org"
DAY = 86_400 * 1_000_000


def row(doc: int, value: str, speaker: str | None, day: int, key: str = "") -> MemoryRow:
    origin = Provenance("!r:example.org", speaker, None) if speaker else None
    if speaker and not key:
        date = f"2025-12-0{day + 1}"
        key, value = f"{speaker}/{date}/$e{doc}", f"{speaker} ({date}): {value}"
    return MemoryRow(
        doc, f"e/{doc}", key or f"note{doc}", value, (), 1_764_547_200_000_000 + day * DAY,
        (doc, f"e{doc}", 0), "a", origin=origin,
    )  # fmt: skip


def test_same_subject_is_judged_on_the_words_without_the_value() -> None:
    assert same_subject("Our wifi code is tulip-42", "The wifi code is now rose-7")
    assert same_subject("I live in Lisbon", "I live in Porto now")
    assert same_subject("The team meeting is on Monday", "The team meeting moved to Thursday")
    assert not same_subject("My dog is called Rex", "My cat is called Tom")
    assert not same_subject("The wifi code is tulip-42", "The wifi router is in the hallway")
    assert not same_subject("I went to the beach", "I went to a concert")  # two events
    assert not same_subject("hello there", "")


def test_newest_first_groups_one_tellers_statements_and_marks_the_older() -> None:
    old = row(0, "Our wifi code is tulip-42", ALICE, 0)
    other = row(1, "My dog is called Rex", ALICE, 1)
    new = row(2, "The wifi code is now rose-7", ALICE, 2)
    bobs = row(3, "The wifi code is banana-1", BOB, 3)  # another person: never an update
    out = newest_first([old, other, bobs, new], told_of)
    assert [(r.doc, e) for r, e in out] == [(2, False), (0, True), (1, False), (3, False)]
    assert earlier_mark("x", True) == "earlier: x" and earlier_mark("x", False) == "x"
    # rows without provenance: "Name: text" names the teller; two names never update
    a = statement("n1", "Caroline: my phone number is 555-1", "", 1)
    b = statement("n2", "Melanie: my phone number is 555-2", "", 2)
    assert a.teller == "Caroline" and b.teller == "Melanie"
    assert [e for _, e in newest_first([a, b], lambda t: t)] == [False, False]
    # a fact's key is its subject: "wifi_code" then a newer "wifi_code_new" value
    k1 = statement("@alice:example.org/wifi_code", "tulip-42", ALICE, 1)
    k2 = statement("@alice:example.org/wifi_code", "rose-7", ALICE, 2)
    assert [(t.ts, e) for t, e in newest_first([k1, k2], lambda t: t)] == [(2, False), (1, True)]


def test_the_ranking_puts_the_newer_statement_first() -> None:
    rows = [
        row(0, "Our wifi code is tulip-42", ALICE, 0),
        row(1, "The wifi code is now rose-7", ALICE, 1),
        row(2, "I like hiking in the hills", ALICE, 2),
        row(3, "My wifi code is tulip-42 too", BOB, 3),
    ]
    view = MemoryView("hashed/bag-of-words")
    view.load(rows, [(r.row_id, updates.hashed(f"{r.key} {r.value}")) for r in rows], 0)
    query = "what is the wifi code? tulip"  # the older one matches better
    found = view.search(query, (), 10, updates.hashed(query))
    order = [r.row.doc for r in found]
    assert order.index(1) < order.index(0), order
    # BM25 alone keeps its exact order (SPEC §3): "tulip" ranks the older one first
    bm25 = [r.row.doc for r in view.search("wifi tulip", (), 10)]
    assert bm25.index(0) < bm25.index(1), bm25
    # the newer statement joins its older one even when the question's words found that one
    # best (fused: Bob's, then Alice's old one, then her new one): hers comes in before it
    found = view.search("wifi tulip", (), 2, updates.hashed("wifi tulip"))
    assert [r.row.doc for r in found] == [3, 1], found


@pytest.mark.skipif(not local_embedder_installed(), reason="the local embedder is not installed")
def test_the_update_set_held_out_with_the_default_embedder() -> None:
    """Reported in docs/memory.md; the rule was tuned on the dev half only. With the tests'
    hashed vectors the ranking itself misses two pairs (17 of 20: not both in the top 10)."""
    result = asyncio.run(updates.run("heldout", use_hashed=False))
    newer, total = map(int, result["newer first"].split()[0].split("/"))
    assert newer / total >= 0.9, result
    assert result["cross-person replacements"].startswith("0/"), result


def test_same_subject_in_five_languages_and_with_punctuation_inside_a_value() -> None:
    """The second update set's dev misses (tests/data/updates_rt.json, scored blind first):
    a "!" inside a password ended the clause as an exclamation; copulas, articles and "now"
    were English only; German nouns are capitalised, which read as names."""
    assert same_subject("The server password is hunter2", "The server password is now 7xQ!pLm")
    assert same_subject("Rent is 950 euros", "Rent is 1,020 euros now")
    assert same_subject("Mi color favorito es el azul", "Mi color favorito ahora es el verde")
    assert same_subject("Mein WLAN-Passwort ist sonne123", "Mein WLAN-Passwort ist jetzt mond456")
    assert same_subject("Der Zahnarzt ist Dr. Weber", "Der Zahnarzt ist jetzt Dr. Yilmaz")
    assert same_subject("Mon médecin est Dr. Petit", "Mon médecin est maintenant Dr. Roux")
    assert same_subject("Mijn huisarts is dokter Jansen", "Mijn huisarts is nu dokter de Vries")
    assert not same_subject("Mein Hund heißt Rex", "Meine Katze heißt Tom")
    assert not same_subject("Mi hermano vive en Roma", "Mi hermana vive en Oslo")
    assert not same_subject("Is it done? Yes!", "Is it done? No!")  # questions state nothing


def test_the_update_set_judged_pair_by_pair() -> None:
    """The rule alone on every pair: updates judged the same subject, and never a mark
    between two people's statements, however alike."""
    for split in ("dev", "heldout"):
        cases = updates.load_cases(split)
        same = [same_subject(c["old"], c["new"]) for c in cases if c["kind"] == "update"]
        assert sum(same) / len(same) >= 0.9, (split, same)
        for case in cases:
            if case["kind"] == "cross":
                old = statement("k1", case["old"], case["speaker"], 1)
                new = statement("k2", case["new"], case["other"], 2)
                assert [e for _, e in newest_first([old, new], lambda t: t)] == [False, False]


async def test_the_block_and_the_recall_tool_show_the_newest_first(
    tmp_path: Path, standin_llm: StandinLLM, standin_embeddings: StandinEmbeddings
) -> None:
    cfg = Config(
        state_dir=tmp_path,
        sync_listen="",
        http_listen="",
        llm=standin_llm.config(),
        embedding=standin_embeddings.config(),
        agents=[AgentConfig(name="chaz", capture="messages")],
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        for text, who in [
            ("Our wifi code is tulip-42", ALICE),
            ("The wifi code here is mango-3", BOB),
            ("The wifi code is now rose-7", ALICE),
        ]:
            assert (await peer.chat(text, session="room", sender=who)).ok
            await peer.wait_captures()
        assert (await peer.chat("what is the wifi code?", session="room", sender=ALICE)).ok
        block = next(
            m["content"]
            for m in standin_llm.requests[-1]["messages"]
            if "## Relevant Memories" in str(m.get("content"))
        )
        lines = [line for line in block.splitlines() if "wifi code" in line]
        assert any("rose-7" in line and "earlier" not in line for line in lines), block
        alices = [line for line in lines if line.startswith(f"- [{ALICE}")]
        rose = next(i for i, line in enumerate(alices) if "rose-7" in line)
        tulip = next(i for i, line in enumerate(alices) if "tulip-42" in line)
        assert rose < tulip and ": earlier: " in alices[tulip], block
        assert not any("earlier" in line for line in lines if line.startswith(f"- [{BOB}")), block

        agent = peer.agent("chaz")
        reply = await peer.command("/memory search self wifi code")
        assert reply.ok
        text = reply.text
        assert text.index("rose-7") < text.index("tulip-42"), text
        assert "earlier: @alice:example.org" in text and "earlier: @bob" not in text, text
        assert len(await agent.recall("wifi code", None, 10)) >= 3  # nothing deleted


def test_a_newer_statement_the_room_may_not_hear_is_never_pulled_in() -> None:
    """The candidates the step may bring in passed the same audience filter (SPEC §5c): Alice's
    newer code said in her DM is not told in the group, nor does it mark the group's row."""
    group = Audience("!group:x", frozenset({ALICE, BOB}))
    said_in_group = replace(
        row(0, "Our wifi code is tulip-42", ALICE, 0),
        origin=Provenance("!group:x", ALICE, (ALICE, BOB)),
        scope="!group:x",  # a room agent's rows are scoped to their room
    )
    said_in_dm = replace(
        row(1, "The wifi code is now rose-7", ALICE, 1),
        origin=Provenance("!dm:x", ALICE, (ALICE,)),
        scope="!dm:x",
    )
    view = MemoryView("hashed/bag-of-words")
    rows = [said_in_group, said_in_dm]
    view.load(rows, [(r.row_id, updates.hashed(f"{r.key} {r.value}")) for r in rows], 0)
    query = "wifi code"
    found = view.search(query, (), 1, updates.hashed(query), group)
    assert [r.row.doc for r in found] == [0]
    everyone = view.search(query, (), 1, updates.hashed(query))  # the operator's full view
    assert [r.row.doc for r in everyone] == [1]

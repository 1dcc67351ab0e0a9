"""Issue 48: a conversation told in one sitting (every row of the day it was told) ranked
worse than the same conversation told over its sessions' dates, beyond what the dates
themselves say: a question naming a month read each ranker three times deeper for the
month's rows and, finding none, returned that deeper fusion (which ranks worse: rows both
rankers place low outrank rows one places first) without the newest-first step. With no
row about the month, such a query now ranks exactly as it would without time-awareness."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np

from chazbot.memory.rows import MemoryRow
from chazbot.memory.view import DEFAULT_RANKING, MemoryView

WORDS = [f"w{i}" for i in range(60)]
TOLD = 1_796_688_000_000_000  # 7 Dec 2026: when every row was told, in one sitting
QUESTIONS = [
    "What did Ann paint in May 2023?",
    "Where did Bo go during the first weekend of August 2023?",
    "What did Ann eat for dinner on October 24, 2023?",
]


def sitting_view(rng: random.Random, dim: int = 16) -> MemoryView:
    view = MemoryView("test/hand")
    vectors = np.random.default_rng(rng.randrange(2**32)).normal(size=(400, dim))
    for doc in range(400):
        who = rng.choice(["Ann", "Bo"])
        words = " ".join(rng.choices([*WORDS, "paint", "dinner", "weekend", "go"], k=8))
        key = f"{who}/2026-12-07/{doc:08x}"
        value = f"{who} (2026-12-07): {words}"
        view.apply(MemoryRow(doc, f"r{doc}", key, value, (), TOLD + doc, (doc, "", 0), "t"))
        view.apply_vector(f"r{doc}", vectors[doc].astype(np.float32))
    return view


def test_a_month_no_row_is_about_ranks_as_no_month() -> None:
    rng = random.Random(48)
    plain = replace(DEFAULT_RANKING, time_aware=False)
    compared = 0
    for _ in range(5):
        view = sitting_view(rng)
        assert view.vectors is not None
        for question in QUESTIONS:
            for _ in range(10):
                words = " ".join(rng.sample(WORDS, 3))
                query = f"{question} {words}"
                seed = rng.randrange(2**32)
                vector = np.random.default_rng(seed).normal(size=16).astype(np.float32)
                got = [r.row.key for r in view.search(query, query_vector=vector)]
                assert got == [
                    r.row.key for r in view.search(query, query_vector=vector, ranking=plain)
                ], query
                compared += 1
    assert compared == 150

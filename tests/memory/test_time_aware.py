"""Time-aware ranking (issue 29): a query that names a month brings the rows about that month
first among the fused candidates; everything else ranks as before."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime

import numpy as np
import pytest

from chazbot.memory.rows import MemoryRow
from chazbot.memory.view import DEFAULT_RANKING, MemoryView, RankingSettings
from chazbot.memory.when import named_months, row_day


def micros(day: str) -> int:
    return int(datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp() * 1_000_000)


def row(doc: int, key: str, value: str, ts: int = 0) -> MemoryRow:
    return MemoryRow(doc, f"r/{doc}", key, value, (), ts or doc, (doc, "", 0), "test")


@pytest.mark.parametrize(
    ("query", "months"),
    [
        ("What did Caroline paint in May 2023?", {(5, 2023)}),
        ("what did we decide in june", {(6, None)}),
        ("When is the trip, 8 May, 2023 or July 3?", {(5, 2023), (7, None)}),
        ("Anything from early March?", {(3, None)}),
        ("The deadline is March 14", {(3, None)}),
        ("May I ask what Alice said about hiking?", set()),  # a verb, not a month
        ("you may want to march on", set()),
        ("an august company met", set()),
        ("nothing about time here", set()),
    ],
)
def test_the_months_a_query_names(query: str, months: set[tuple[int, int | None]]) -> None:
    assert named_months(query) == months


def test_a_rows_day_is_its_keys_date_else_when_it_was_written() -> None:
    assert row_day(row(0, "@alice:example.org/2023-05-08/ab12cd34", "x")) == date(2023, 5, 8)
    assert row_day(row(1, "Caroline 8 May, 2023 D1:3", "x")) == date(2023, 5, 8)
    assert row_day(row(2, "launch", "friday", micros("2026-03-02"))) == date(2026, 3, 2)
    assert row_day(row(3, "bad/2023-02-31/x", "x", micros("2026-01-05"))) == date(2026, 1, 5)
    assert row_day(row(4, "from a hostile peer", "x", 2**62)) is None  # no calendar holds it


def dated_view() -> tuple[MemoryView, np.ndarray]:
    """Hiking rows said on different days; the May ones rank last without time-awareness
    (longer values for BM25, farther vectors)."""
    view = MemoryView("test/hand")
    rows = [
        row(0, "alice/2023-07-01/a", "went hiking"),
        row(1, "alice/2023-07-09/b", "hiking again"),
        row(2, "alice/2023-06-02/c", "hiking boots are new"),
        row(3, "alice/2023-05-20/d", "a long walk and some hiking with friends from work"),
        row(
            4,
            "notes",
            "the list of gear for hiking that we packed for the trip",
            micros("2023-05-28"),
        ),
        row(5, "alice/2022-05-03/e", "a long day of hiking last year with the whole family"),
    ]
    cosines = [0.99, 0.95, 0.9, 0.3, 0.2, 0.25]
    vectors = [
        (r.row_id, np.asarray([c, float(np.sqrt(1 - c * c))], dtype=np.float32))
        for r, c in zip(rows, cosines, strict=True)
    ]
    view.load(rows, vectors, 0)
    return view, np.asarray([1.0, 0.0], dtype=np.float32)


PLAIN = replace(DEFAULT_RANKING, time_aware=False)


def order(
    view: MemoryView,
    query: str,
    limit: int,
    qvec: np.ndarray | None,
    ranking: RankingSettings = DEFAULT_RANKING,
) -> list[int]:
    return [r.row.doc for r in view.search(query, (), limit, qvec, ranking=ranking)]


def test_rows_of_the_named_month_come_first_in_fused_order() -> None:
    view, qvec = dated_view()
    queries = ("hiking, May 2023", "hiking in May", "hiking june")
    fused = {q: order(view, q, 6, qvec, PLAIN) for q in queries}
    assert all(set(f[:3]) == {0, 1, 2} for f in fused.values()), fused  # May rows rank low
    assert DEFAULT_RANKING.time_aware  # the product's
    # the rows of the month first (a key's date, or a plain row's written day), then the
    # others, each part in fused order
    may = fused["hiking, May 2023"]
    assert (
        order(view, "hiking, May 2023", 4, qvec)
        == [d for d in may if d in (3, 4)] + [d for d in may if d not in (3, 4)][:2]
    )
    any_may = fused["hiking in May"]
    assert order(view, "hiking in May", 3, qvec) == [d for d in any_may if d in (3, 4, 5)]
    june = fused["hiking june"]
    assert order(view, "hiking june", 2, qvec) == [2, *[d for d in june if d != 2][:1]]
    # scores are the fused ones, unchanged
    scores = {r.row.doc: r.score for r in view.search("hiking in May", (), 6, qvec)}
    plain = view.search("hiking in May", (), 6, qvec, ranking=PLAIN)
    assert {r.row.doc: r.score for r in plain} == scores


def test_a_modal_may_or_bm25_alone_keeps_the_plain_order() -> None:
    view, qvec = dated_view()
    asked = order(view, "May hiking", 4, qvec)
    bm25 = order(view, "hiking june", 6, None)
    assert order(view, "May hiking", 4, qvec, PLAIN) == asked  # "May" first: no month
    assert order(view, "hiking june", 6, None, PLAIN) == bm25  # BM25 alone: its exact order

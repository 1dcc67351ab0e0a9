"""What BM25 indexes of a row (issue 35, ``view.indexed_tokens``): a row learned in a room is
found by who told it and the day it was told, whatever its shape; an operator's row is
indexed exactly as SPEC §3 says."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

import chazbot
from chazbot.memory.audience import Provenance
from chazbot.memory.engine import MemoryEngine
from chazbot.memory.rows import MemoryRow
from chazbot.memory.tokenize import document_text, tokenize
from chazbot.memory.view import MemoryView, indexed_tokens

MAY_8 = int(datetime(2023, 5, 8, 14, tzinfo=UTC).timestamp() * 1_000_000)
ROOM = "!room:example.org"


def told(doc: int, key: str, value: str, speaker: str | None, ts: int = MAY_8) -> MemoryRow:
    origin = Provenance.of(ROOM, speaker, [speaker]) if speaker else None
    return MemoryRow(doc, f"r/{doc}", key, value, (), ts, (doc, "", 0), "t", origin=origin)


def test_a_told_row_is_indexed_with_its_teller_and_day() -> None:
    tool_row = told(0, "hobby", "loves painting sunsets", "@caroline:example.org")
    assert indexed_tokens(tool_row) == [
        *("hobby", "loves", "painting", "sunsets"),
        *("caroline", "may", "2023"),  # "8" is one ASCII character: not a token (SPEC §3)
    ]
    # a captured row names both already: nothing is added
    captured = told(
        1, "@caroline:example.org/2023-05-08/ab12", "Caroline: painted", "@caroline:example.org"
    )
    assert indexed_tokens(captured) == tokenize(document_text(captured.key, captured.value, ()))
    # a teller named in the text is not named twice; the day still is
    named = told(2, "plan", "Caroline goes hiking", "@caroline:example.org")
    assert indexed_tokens(named) == ["plan", "caroline", "goes", "hiking", "may", "2023"]
    # a timestamp no calendar holds (a hostile peer may sign one) adds no day
    odd = told(3, "plan", "hiking", "@bob:example.org", ts=2**62)
    assert indexed_tokens(odd) == ["plan", "hiking", "bob"]


def test_an_operators_row_is_indexed_as_spec_says() -> None:
    rows = [
        told(0, "ops_note_a", "deploy on monday", None),
        told(1, "ops_note_b", "deploy on friday", None),
        told(2, "ops_note_c", "weekly status", None),
    ]
    for row in rows:
        assert indexed_tokens(row) == tokenize(document_text(row.key, row.value, ()))
    view = MemoryView(None)
    view.load(rows, [], 2)
    hits = view.search("deploy friday", (), 5)
    assert [(h.row.key, round(h.score, 4)) for h in hits] == [
        ("ops_note_b", 1.4057),
        ("ops_note_a", 0.4554),
    ]


def test_the_teller_and_the_day_find_a_tool_row_among_others() -> None:
    """BM25 alone: the question names the person and the month, not the row's words."""
    rows = [
        told(0, "hobby", "loves painting sunsets", "@caroline:example.org"),
        told(
            1,
            "art",
            "loves painting portraits",
            "@melanie:example.org",
            ts=MAY_8 + 86_400 * 10**6 * 40,
        ),
        told(2, "pets", "has two cats", "@melanie:example.org"),
    ]
    view = MemoryView(None)
    view.load(rows, [], 2)
    assert view.search("what does caroline love painting", (), 1)[0].row.doc == 0
    assert view.search("melanie painting", (), 1)[0].row.doc == 1
    assert view.search("painting in June 2023", (), 1)[0].row.doc == 1
    # an index updated row by row equals one built at once
    step = MemoryView(None)
    for row in rows:
        step.apply(row)
    for query in ("caroline", "may 2023", "june", "painting melanie"):
        a = [(r.row.doc, r.score) for r in view.search(query, (), 5)]
        assert a == [(r.row.doc, r.score) for r in step.search(query, (), 5)], query


async def test_a_snapshot_keeps_the_told_rows_index(tmp_path: Path) -> None:
    async with chazbot.open(tmp_path) as peer:
        agent = peer.agent("chaz")
        db = agent.memory.db
        people = ("@caroline:example.org", "@melanie:example.org", "@bob:example.org")
        for i in range(150):
            speaker = people[i % 3]
            origin = Provenance.of(ROOM, speaker, people)
            await peer.memory.remember(
                db, agent.key, f"note{i}", f"likes item{i} a lot", origin=origin, scope=ROOM
            )
        saved = MemoryEngine(peer.ledger, None, tmp_path / "snap")
        saved.views.snapshot_min_rows = 100
        built = await saved.view(db)
        again = MemoryEngine(peer.ledger, None, tmp_path / "snap")
        again.views.snapshot_min_rows = 100
        restored = await again.view(db)
        status = again.load_status(db)
        assert status is not None and status.from_snapshot
        first = built.search("melanie item4", (), 1)[0]
        assert first.row.key == "note4" and first.row.origin is not None
        day = datetime.fromtimestamp(first.row.ts / 1_000_000, UTC)
        for query in ("caroline", "melanie item4", f"{day:%B %Y}", "bob item5 item8"):
            a = [(r.row.key, r.score) for r in built.search(query, (), 10)]
            assert a, query
            assert a == [(r.row.key, r.score) for r in restored.search(query, (), 10)], query


@pytest.mark.parametrize(
    ("speaker", "named"),
    [
        ("@alice:example.org", ["alice"]),  # an MXID's localpart
        ("Alice Smith", ["alice", "smith"]),
        ("@x:y", []),  # one ASCII character: not a token
    ],
)
def test_the_teller_is_named_as_a_person(speaker: str, named: list[str]) -> None:
    row = told(0, "kind", "likes tea", speaker)
    assert indexed_tokens(row) == ["kind", "likes", "tea", *named, "may", "2023"]

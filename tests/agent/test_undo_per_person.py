"""Undo is kept per person, on the memory page too (issue #47): the page is one room for
everyone who signs in, and its undo slots were a 64-person LRU, so the 65th person's forget
dropped the first one's. Now nobody's pending undo is dropped for another's; the room's
bound refuses a newcomer's undo instead (the forget is done and says it cannot be undone). A
forget on the page of rows in two agents is undone whole."""

from __future__ import annotations

from pathlib import Path

from chazbot.agent.undo import MAX_ROWS, UNDO_MINUTES, UndoSlots
from chazbot.memory.rows import MemoryRow, parse_memory_row
from tests.support.web import ALICE, browser_session, my_page_csrf, said, serving

OTHERS = 70  # more than the 64 the page kept


def row(key: str, ts: int = 1) -> MemoryRow:
    found = parse_memory_row(ts, f"e{key}/0", {"key": key, "value": "v"}, ts, (ts, key, 0), "k")
    assert found is not None
    return found


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_no_persons_pending_undo_is_dropped_for_anothers() -> None:
    clock = Clock()
    slots = UndoSlots(clock, max_people=100)
    assert slots.put("@first:x", "db1", [row("a")])
    for i in range(99):
        assert slots.put(f"@p{i}:x", "db1", [row(f"k{i}")])
    # the room is full: the newcomer's forget keeps no undo, nobody else's goes
    assert not slots.put("@late:x", "db1", [row("z")])
    assert len(slots) == 100
    # a person who forgets again replaces only their own
    assert slots.put("@p5:x", "db1", [row("k5b")])
    found = slots.take("@first:x")
    assert found is not None and [r.key for r in found.rows_in("db1")] == ["a"]
    # expired slots make room (the sweep on the next put)
    clock.now += UNDO_MINUTES * 60 + 1
    assert slots.put("@late:x", "db1", [row("z")]) and len(slots) == 1
    assert slots.take("@p0:x") is None


def test_an_undo_is_bounded_per_person_and_per_room_in_rows() -> None:
    slots = UndoSlots(Clock(), max_rows=3 * MAX_ROWS)
    many = [row(f"r{i}", ts=i + 1) for i in range(MAX_ROWS + 50)]
    assert slots.put("@a:x", "db1", many)
    found = slots.take("@a:x")
    assert found is not None and found.count == MAX_ROWS
    assert {r.key for r in found.rows_in("db1")} == {f"r{i}" for i in range(50, MAX_ROWS + 50)}
    for person in ("@a:x", "@b:x", "@c:x"):
        assert slots.put(person, "db1", many)
    assert not slots.put("@d:x", "db1", [row("one")])  # the room's rows are all held
    assert slots.take("@b:x") is not None
    assert slots.put("@d:x", "db1", [row("one")])


def test_one_forget_over_two_dbs_is_undone_per_db_or_whole() -> None:
    slots = UndoSlots(Clock())
    assert slots.put_all("@a:x", {"chaz": [row("a")], "helper": [row("b"), row("c")]})
    part = slots.take("@a:x", "chaz")
    assert part is not None and [r.key for r in part.rows_in("chaz")] == ["a"]
    rest = slots.take("@a:x")
    assert rest is not None and rest.dbs == ("helper",) and rest.count == 2
    assert slots.take("@a:x") is None


async def test_the_pages_undo_survives_others_forgets_and_brings_back_every_agent(
    tmp_path: Path,
) -> None:
    """Real HTTP: Alice forgets everything (rows in chaz and helper); 70 other people sign
    in and forget on the page; her Undo brings back both rows."""
    async with serving(tmp_path) as (peer, base):
        await said(peer, ALICE, "car", "Alice drives a blue Volvo")
        await said(peer, ALICE, "pet", "a cat named Miso", agent="helper")
        others = [f"@p{i}:example.org" for i in range(OTHERS)]
        for person in others:
            assert (await peer.command(f"/people allow {person}")).ok
            await said(peer, person, f"note-{person}", f"{person} likes tea")
        async with browser_session() as alice:
            csrf = await my_page_csrf(alice, peer, base, ALICE)
            async with alice.post(
                f"{base}/ui/me/forget-all", data={"csrf": csrf, "confirm": "yes"}
            ) as page:
                text = await page.text()
                assert "Forgot everything you said (2 rows)" in text and "Undo within" in text
            for person in others:
                async with browser_session() as client:
                    theirs = await my_page_csrf(client, peer, base, person)
                    async with client.post(
                        f"{base}/ui/me/forget",
                        data={"csrf": theirs, "key": f"note-{person}", "back": "/ui/me"},
                    ) as page:
                        body = await page.text()
                        assert "(1 row)" in body, body[body.find("<main") :][:1500]
            async with alice.post(f"{base}/ui/me/undo", data={"csrf": csrf}) as page:
                text = await page.text()
                assert "Brought back 2 rows" in text, text
            async with alice.get(f"{base}/ui/me") as page:
                html = await page.text()
            assert "a cat named Miso" in html and "blue Volvo" in html

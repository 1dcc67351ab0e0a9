"""Who may be told what (SPEC §5c): the rule, rows kept apart per room, and a property test.

Pure parts (``audience``, ``MemoryView``) and a real peer (real SQLite) driven with explicit
audiences, as the Matrix transport passes them; the same table over a real Synapse is in
``test_audience_matrix.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chazbot
from chazbot.config import AgentConfig, Config
from chazbot.errors import InputError, NotFound
from chazbot.memory.audience import (
    FULL,
    MAX_AUDIENCE,
    Audience,
    Provenance,
    check_origin,
    room_audience,
)
from chazbot.memory.rows import MemoryRow, check_memory_row, parse_memory_row, remember_ops
from chazbot.memory.view import MemoryView

ALICE, BOB, CAROL = "@alice:example.org", "@bob:example.org", "@carol:example.org"
ADMINS = {ALICE}


def audience(room: str, *people: str) -> Audience:
    return room_audience(room, people, lambda u: u in ADMINS)


def test_the_rule() -> None:
    dm = Provenance.of("dm-alice", ALICE, [ALICE])
    group = Provenance.of("group", BOB, [ALICE, BOB])
    assert group.audience == (ALICE, BOB)
    # S is R: always
    assert audience("group", ALICE, BOB, CAROL).sees(group)  # Carol joined since: same room
    # every person now in S was in R's audience
    assert audience("dm-alice", ALICE).sees(group)
    assert audience("dm-bob", BOB).sees(group)
    assert not audience("dm-carol", CAROL).sees(group)
    assert not audience("other", ALICE, CAROL).sees(group)
    assert not audience("dm-bob", BOB).sees(dm)
    assert not audience("group", ALICE, BOB).sees(dm)
    # operator rows: the terminal, or where everyone present is an admin
    assert FULL.sees(None) and FULL.sees(dm)
    assert audience("dm-alice", ALICE).sees(None)
    assert not audience("group", ALICE, BOB).sees(None)
    assert not audience("empty").sees(None)
    # a room too big to list: its members now, looked up; unknown means not shown
    many = [f"@u{i}:example.org" for i in range(MAX_AUDIENCE + 5)]
    big = Provenance.of("big", many[0], many)
    assert big.audience is None
    members = {"big": frozenset(many)}
    inside = room_audience("dm", [many[3]], lambda u: False, members.get)
    outside = room_audience("dm", [ALICE], lambda u: False, members.get)
    assert inside.sees(big) and not outside.sees(big)
    assert not room_audience("dm", [many[3]], lambda u: False).sees(big)
    # the speaker is always in the audience of what they said, invited people are not
    heard = room_audience("r", [ALICE, BOB], lambda u: False, joined=[ALICE])
    assert heard.origin(CAROL) == Provenance("r", CAROL, (ALICE, CAROL))


def test_origin_bounds_are_checked_like_any_row_field() -> None:
    good = remember_ops("k", "v", [], None, None, origin=Provenance.of("r", ALICE, [BOB]))
    check_memory_row(good["memory"][0]["row"])
    for bad in (
        {"room": "", "speaker": ALICE},
        {"room": "r", "speaker": ALICE, "audience": "everyone"},
        {"room": "r", "speaker": ALICE, "audience": ["x"] * (MAX_AUDIENCE + 1)},
        {"room": "r", "speaker": ALICE, "extra": 1},
        {"room": "r" * 300, "speaker": ALICE},
    ):
        with pytest.raises(InputError):
            check_origin(bad)
        with pytest.raises(InputError):
            check_memory_row({"key": "k", "value": "v", "from": bad})


def row(
    doc: int, key: str, value: str, origin: Provenance | None, forget: bool = False
) -> MemoryRow:
    data = remember_ops(
        key, value, [], None, None, origin=origin, scope=origin.room if origin else ""
    )
    stored = data["memory"][0]["row"]
    if forget:
        stored = {"key": key, "forget": True, **({"scope": origin.room} if origin else {})}
    parsed = parse_memory_row(doc, f"r{doc}", stored, doc, (doc, f"e{doc}", 0), "author")
    assert parsed is not None
    return parsed


def test_one_key_in_two_rooms_is_two_rows() -> None:
    view = MemoryView()
    alice_dm = Provenance.of("dm-alice", ALICE, [ALICE])
    group = Provenance.of("group", BOB, [ALICE, BOB])
    view.apply(row(1, "project.deadline", "March 14 for alice", alice_dm))
    view.apply(row(2, "project.deadline", "June 1 for the group", group))
    assert len(view.visible) == 2  # the group's write did not supersede Alice's row
    in_group = [
        r.row.value for r in view.search("deadline", audience=audience("group", ALICE, BOB))
    ]
    assert in_group == ["June 1 for the group"]
    in_dm = {r.row.value for r in view.search("deadline", audience=audience("dm-alice", ALICE))}
    assert in_dm == {"March 14 for alice", "June 1 for the group"}
    # a forget in the group hides the group's row only
    view.apply(row(3, "project.deadline", "", group, forget=True))
    assert [r.row.value for r in view.search("deadline", audience=FULL)] == ["March 14 for alice"]
    # the same room supersedes its own row
    view.apply(row(4, "project.deadline", "April 2", alice_dm))
    assert [r.row.value for r in view.search("deadline")] == ["April 2"]


async def test_peer_keeps_rooms_apart_and_people_own_what_they_said(tmp_path: Path) -> None:
    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        dm = audience("dm-alice", ALICE)
        group = audience("group", ALICE, BOB)
        bob_dm = audience("dm-bob", BOB)
        in_dm = chaz.memory.within(peer.hearing(chaz, ALICE, dm))
        in_group = chaz.memory.within(peer.hearing(chaz, BOB, group))
        as_bob = chaz.memory.within(peer.hearing(chaz, BOB, bob_dm))
        await in_dm.remember("pin", "My bank PIN is 4321")
        await in_group.remember("pin", "Bob guesses the PIN is 0000")
        assert [h.value for h in await as_bob.recall("PIN")] == ["Bob guesses the PIN is 0000"]
        assert len(await chaz.recall("PIN")) == 2  # the operator sees both
        # a forget never hides what its room cannot see
        with pytest.raises(NotFound):
            await as_bob.forget("no-such-key")
        assert await as_bob.forget("pin") == 1
        assert [h.value for h in await in_dm.recall("PIN")] == ["My bank PIN is 4321"]
        # search and stats through the command layer obey the room's audience
        reply = await peer.command("/memory search self PIN", sender=BOB, audience=bob_dm)
        assert "4321" not in reply.text
        reply = await peer.command("/memory search self PIN", sender=ALICE, audience=dm)
        assert "4321" in reply.text
        # people own what they said: mine lists, forget-mine hides, nobody else's rows
        await in_group.remember("bob.car", "Bob drives a Volvo")
        reply = await peer.command("/memory mine", sender=BOB, session="b", audience=bob_dm)
        assert "bob.car" in reply.text and "pin" not in reply.text, reply.text
        reply = await peer.command(
            "/memory forget-mine all", sender=BOB, session="b", audience=bob_dm
        )
        assert reply.ok and "1 row" in reply.text, reply.text
        assert [h.key for h in await chaz.recall("")] == ["pin"]  # Alice's row is untouched
        reply = await peer.command("/memory forget-mine pin", sender=BOB, audience=bob_dm)
        assert not reply.ok


async def test_memory_audience_agent_keeps_the_seeds_one_memory(tmp_path: Path) -> None:
    cfg = Config(
        state_dir=tmp_path,
        agents=[AgentConfig(name="chaz", capture="off", memory_audience="agent")],
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        in_dm = chaz.memory.within(peer.hearing(chaz, ALICE, audience("dm-alice", ALICE)))
        as_bob = chaz.memory.within(peer.hearing(chaz, BOB, audience("dm-bob", BOB)))
        await in_dm.remember("pin", "My bank PIN is 4321")
        assert [h.value for h in await as_bob.recall("PIN")] == ["My bank PIN is 4321"]
        await as_bob.remember("pin", "0000")  # one memory: the key is replaced everywhere
        assert [h.value for h in await in_dm.recall("")] == ["0000"]


PEOPLE = [f"@p{i}:example.org" for i in range(5)]
ROOMS = [f"room-{i}" for i in range(4)]


@settings(max_examples=60, deadline=None)
@given(
    memberships=st.lists(st.sets(st.sampled_from(PEOPLE), min_size=1), min_size=4, max_size=4),
    writes=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 4), st.sampled_from(["k1", "k2", "k3"])),
        max_size=25,
    ),
    forgets=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["k1", "k2"])), max_size=5),
    readers=st.lists(st.sets(st.sampled_from(PEOPLE), min_size=1), min_size=1, max_size=4),
)
def test_no_row_is_visible_to_a_person_outside_its_audience(
    memberships: list[set[str]],
    writes: list[tuple[int, int, str]],
    forgets: list[tuple[int, str]],
    readers: list[set[str]],
) -> None:
    view = MemoryView()
    doc = 0
    for room_i, person_i, key in writes:
        members = memberships[room_i]
        speaker = sorted(members)[person_i % len(members)]
        doc += 1
        view.apply(
            row(doc, key, f"word {key} {doc}", Provenance.of(ROOMS[room_i], speaker, members))
        )
    for room_i, key in forgets:
        doc += 1
        origin = Provenance.of(ROOMS[room_i], sorted(memberships[room_i])[0], memberships[room_i])
        view.apply(row(doc, key, "", origin, forget=True))
    sessions = [(ROOMS[i], memberships[i]) for i in range(4)]
    sessions += [(f"elsewhere-{i}", people) for i, people in enumerate(readers)]
    for name, present in sessions:
        who = audience(name, *present)
        for query in ("", "word", "k1 k2 k3"):
            for found in view.search(query, limit=100, audience=who):
                origin = found.row.origin
                assert origin is not None
                assert origin.room == name or set(present) <= set(origin.audience or ())


@settings(max_examples=40, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=6), max_size=40),
    keep=st.sets(st.integers(0, 45)),
    removed=st.sets(st.integers(0, 45)),
)
def test_an_allowed_array_filters_like_the_same_set(
    docs: list[list[str]], keep: set[int], removed: set[int]
) -> None:
    """The audience rule hands the indexes an int64 array (masks computed in numpy and
    cached); tags hand them a set: both must return the same rows."""
    import numpy as np

    from chazbot.memory.bm25 import BM25Index
    from chazbot.memory.vectors import VectorIndex

    bm25, vectors = BM25Index(), VectorIndex(3)
    for doc, tokens in enumerate(docs):
        bm25.add(doc, tokens)
        vectors.add(doc, [1.0, float(doc % 3), float(len(tokens))])
    for doc in removed:
        bm25.remove(doc)
        vectors.remove(doc)
    array = np.fromiter(keep, np.int64, len(keep))
    for _ in range(2):  # the second search uses the cached mask
        assert bm25.search(["a", "c"], 10, array) == bm25.search(["a", "c"], 10, keep)
        assert vectors.search([1.0, 1.0, 1.0], 10, array) == vectors.search(
            [1.0, 1.0, 1.0], 10, keep
        )
    bm25.add(99, ["a"])  # the index changed: the cached mask is not reused
    assert bm25.search(["a"], 100, array) == bm25.search(["a"], 100, keep)


async def test_a_room_caller_that_forgets_is_admin_is_no_admin(tmp_path: Path) -> None:
    """#20: Context.is_admin and Peer.command(is_admin=...) defaulted to True, so a new caller
    that forgot the argument ran as admin. Now only the operator (no audience) is."""
    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])
    async with chazbot.open(tmp_path, cfg) as peer:
        assert (await peer.command("/memory new notes")).ok  # the operator
        refused = await peer.command("/memory delete notes", audience=audience("r", BOB))
        assert not refused.ok and "only admins" in refused.text
        from chazbot.commands.context import Context

        assert Context.__dataclass_fields__["is_admin"].default is False

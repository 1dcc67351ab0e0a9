"""Who may be told what (SPEC §5c): the rule, rows kept apart per room, and a property test.

Pure parts (``audience``, ``MemoryView``) and a real peer (real SQLite) driven with explicit
audiences, as the Matrix transport passes them; the same table over a real Synapse is in
``test_audience_matrix.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chazbot
from chazbot.config import AgentConfig, Config
from chazbot.errors import InputError, NotFound
from chazbot.memory.audience import (
    CLOSED_HISTORY,
    FULL,
    MAX_AUDIENCE,
    Audience,
    Provenance,
    check_origin,
    room_audience,
    unknown_room,
)
from chazbot.memory.rows import MemoryRow, check_memory_row, parse_memory_row, remember_ops
from chazbot.memory.view import MemoryView

ALICE, BOB, CAROL = "@alice:example.org", "@bob:example.org", "@carol:example.org"
HISTORIES = ["shared", "joined", "invited", "world_readable"]
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
                told = found.row.origin
                assert told is not None
                assert told.room == name or set(present) <= set(told.audience or ())


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


# ---- #33, trust third pass: fail closed, Matrix's history rule, the row's own rule ---------


def test_a_room_whose_readers_cannot_be_bounded_sees_only_its_own_rows() -> None:
    """An empty room (Mallory left before the answer), a room the bot cannot list, a public
    room and a world_readable one: nobody is there to check, so only the room's own rows."""
    dm = Provenance.of("dm-alice", ALICE, [ALICE])
    wide = Provenance.of("dm-alice", ALICE, [ALICE])
    here = Provenance.of("lobby", BOB, [BOB])
    unbounded = [
        audience("lobby"),  # nobody but the bot
        room_audience("lobby", [BOB], lambda u: False, public=True),
        room_audience("lobby", [ALICE], lambda u: True, public=True),  # admins, but public
        room_audience("lobby", [BOB], lambda u: False, history="world_readable"),
        unknown_room("lobby"),
    ]
    for who in unbounded:
        assert not who.bounded
        assert not who.sees(dm), who
        assert not who.sees(wide, ""), who  # an agent-wide agent's row from elsewhere
        assert not who.sees(None), who  # operator rows need a bounded room of admins
        assert not who.only(BOB)
        assert who.sees(here), who
    # the same rows in a bounded room with the right people
    assert audience("dm-x", ALICE).sees(dm) and audience("dm-x", ALICE).sees(None)


def test_a_rooms_own_rows_follow_its_history_visibility() -> None:
    """joined: those who were joined when it was said; invited: also those invited then;
    shared and world_readable: anyone who is a member now. The visibility is the one in force
    when it was said (Matrix's rule): a room that opens its history later does not open it."""
    said = room_audience("r", [ALICE], lambda u: False, history="joined").origin(ALICE)
    assert said is not None and said.audience == (ALICE,)
    later = {h: room_audience("r", [ALICE, BOB], lambda u: False, history=h) for h in HISTORIES}
    assert not later["joined"].sees(said)  # Bob came later: he may not read it
    assert not later["invited"].sees(said)
    assert not later["shared"].sees(said)  # opened afterwards: still Alice's alone
    assert room_audience("r", [ALICE], lambda u: False, history="joined").sees(said)
    shared = room_audience("r", [ALICE], lambda u: False).origin(ALICE)
    assert shared is not None and later["shared"].sees(shared)
    # invited history: who was invited when it was said counts as having heard it
    invited = room_audience("r", [ALICE, BOB], lambda u: False, joined=[ALICE], history="invited")
    said = invited.origin(ALICE)
    assert said is not None and said.audience == (ALICE, BOB)
    assert later["invited"].sees(said)
    # an unknown value is read as the strictest, joined
    odd = room_audience("r", [ALICE, BOB], lambda u: False, history="something-new")
    assert odd.history == "joined"
    # a big room's own rows record no list: only an open history shows them again
    many = [f"@u{i}:example.org" for i in range(MAX_AUDIENCE + 5)]
    big = Provenance.of("big", many[0], many)
    assert room_audience("big", many[1:3], lambda u: False).sees(big)
    assert not room_audience("big", many[1:3], lambda u: False, history="joined").sees(big)


def test_a_reply_goes_only_to_readers_it_was_prepared_for() -> None:
    before = audience("r", ALICE, BOB)
    assert before.covers(audience("r", ALICE, BOB))
    assert before.covers(audience("r", ALICE))  # fewer readers see no more
    assert not before.covers(audience("r", ALICE, BOB, CAROL))  # Carol joined meanwhile
    assert not before.covers(audience("r"))  # everyone left: later joiners are unbounded
    assert not before.covers(room_audience("r", [ALICE], lambda u: False, public=True))
    assert not audience("r", ALICE).covers(audience("other", ALICE))
    assert FULL.covers(audience("r", CAROL))
    joined = room_audience("r", [ALICE], lambda u: False, history="joined")
    assert not joined.covers(audience("r", ALICE))  # history opened up: shared
    assert audience("r", ALICE).covers(joined)


def test_the_rule_is_the_rows_whoever_reads_it() -> None:
    """An agent-wide agent's rows reach its bounded rooms; a room agent's rows keep their
    room, also when the reader is agent-wide; in a bank, rows without provenance are the
    bank's, rows a turn wrote keep the turn's audience."""
    alice_dm = Provenance.of("dm-alice", ALICE, [ALICE])
    view = MemoryView()
    view.apply(row(1, "iban", "Alice's IBAN is DE89 3704", alice_dm))  # room-scoped
    wide = remember_ops("cat", "Alice's cat is Miso", [], None, None, origin=alice_dm, scope="")
    parsed = parse_memory_row(2, "r2", wide["memory"][0]["row"], 2, (2, "e2", 0), "author")
    assert parsed is not None
    view.apply(parsed)
    view.apply(row(3, "team", "the team meets on Mondays", None))  # the operator's / bank's
    mallory = audience("group", "@mallory:example.org", BOB)
    assert {r.row.key for r in view.search("", audience=mallory)} == {"cat"}
    assert {r.row.key for r in view.search("", audience=mallory.in_bank())} == {"cat", "team"}
    assert {r.row.key for r in view.search("", audience=audience("dm-a", ALICE))} == {
        "iban",
        "cat",
        "team",
    }


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("join"), st.integers(0, 2), st.integers(0, 4)),
            st.tuples(st.just("leave"), st.integers(0, 2), st.integers(0, 4)),
            st.tuples(st.just("say"), st.integers(0, 2), st.integers(0, 4), st.booleans()),
            st.tuples(st.just("redact"), st.integers(0, 60)),
        ),
        max_size=30,
    ),
    histories=st.lists(st.sampled_from(HISTORIES), min_size=3, max_size=3),
    readers=st.lists(st.sets(st.sampled_from(PEOPLE)), min_size=1, max_size=3),
)
def test_nobody_reads_what_matrix_would_not_have_shown_them(
    steps: list[tuple[Any, ...]], histories: list[str], readers: list[set[str]]
) -> None:
    """Leaves, joins, history visibility, redactions (a forget of that one row) and
    agent-wide writers: a row is told in a session only to people who could have read the
    original message in Matrix (its room under its history rule, or its audience), and an
    unbounded session sees only its own room's rows."""
    view = MemoryView()
    members: list[set[str]] = [set(), set(), set()]
    heard_by: dict[int, tuple[int, frozenset[str], str]] = {}  # doc -> room, who heard, scope
    ever: list[set[str]] = [set(), set(), set()]  # who was a member at some point
    doc = 0
    for step in steps:
        if step[0] == "join":
            members[int(step[1])].add(PEOPLE[int(step[2])])
            ever[int(step[1])].add(PEOPLE[int(step[2])])
        elif step[0] == "leave":
            members[int(step[1])].discard(PEOPLE[int(step[2])])
        elif step[0] == "say":
            room_i = int(step[1])
            speaker = PEOPLE[int(step[2])]
            members[room_i].add(speaker)
            ever[room_i].add(speaker)
            here = room_audience(
                ROOMS[room_i], members[room_i], lambda u: False, history=histories[room_i]
            )
            origin = here.origin(speaker)
            assert origin is not None
            doc += 1
            scope = "" if step[3] else ROOMS[room_i]
            ops = remember_ops(f"k{doc}", f"word {doc}", [], None, None, origin=origin, scope=scope)
            parsed = parse_memory_row(
                doc, f"r{doc}", ops["memory"][0]["row"], doc, (doc, f"e{doc}", 0), "a"
            )
            assert parsed is not None
            view.apply(parsed)
            heard_by[doc] = (room_i, frozenset(members[room_i]), scope)
        elif heard_by:
            target = sorted(heard_by)[int(step[1]) % len(heard_by)]
            gone = view.visible.get(target)
            if gone is not None:
                assert gone.origin is not None  # every row here was said in a room
                stored = {"key": gone.key, "forget": True, "from": gone.origin.to_data()}
                if gone.scope:
                    stored["scope"] = gone.scope
                doc += 1
                parsed = parse_memory_row(doc, f"r{doc}", stored, doc, (doc, f"e{doc}", 0), "a")
                assert parsed is not None
                view.apply(parsed)
                heard_by.pop(target)
    sessions = [(ROOMS[i], members[i], histories[i]) for i in range(3)]
    sessions += [(f"elsewhere-{i}", people, "shared") for i, people in enumerate(readers)]
    for name, present, history in sessions:
        who = room_audience(name, present, lambda u: False, history=history)
        for found in view.search("", limit=1000, audience=who):
            assert found.row.doc in heard_by  # a redacted row is never told
            room_i, heard, scope = heard_by[found.row.doc]
            origin = found.row.origin
            assert origin is not None
            if ROOMS[room_i] == name:
                assert history in ("shared", "world_readable") or set(present) <= heard | {
                    origin.speaker
                }
            else:
                assert who.bounded
                assert scope == "" or set(present) <= heard | {origin.speaker}


MALLORY = "@mallory:example.org"


async def test_an_agent_wide_reader_obeys_the_rows_rule(tmp_path: Path) -> None:
    """#33: an agent with ``memory_audience: agent``, granted read on a room agent's DB,
    returned Alice's DM IBAN to Mallory in a group; ``mine`` in a group whose agent is
    agent-wide listed rows from every room."""
    cfg = Config(
        state_dir=tmp_path,
        agents=[
            AgentConfig(name="chaz", capture="off"),
            AgentConfig(name="wide", capture="off", memory_audience="agent"),
        ],
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz, wide = peer.agent("chaz"), peer.agent("wide")
        in_dm = chaz.memory.within(peer.hearing(chaz, ALICE, audience("dm-alice", ALICE)))
        await in_dm.remember("iban", "Alice's IBAN is DE89 3704 0044")
        assert (await peer.command("/memory grant chaz wide read")).ok
        group = audience("group", MALLORY, BOB)
        as_mallory = wide.memory.within(peer.hearing(wide, MALLORY, group))
        assert await as_mallory.recall("IBAN", bank="chaz") == []
        reply = await peer.command(
            "/memory search chaz IBAN", agent="wide", sender=MALLORY, audience=group
        )
        assert "DE89" not in reply.text, reply.text
        # the wide agent's own rows: what Alice said in her DM is hers, listed only to her
        wide_dm = wide.memory.within(peer.hearing(wide, ALICE, audience("dm-alice", ALICE)))
        await wide_dm.remember("pin", "Alice's PIN is 4321")
        await chaz.remember("motto", "the operator's note")  # an operator row, elsewhere
        reply = await peer.command(
            "/memory mine", agent="wide", sender=ALICE, session="g", audience=group
        )
        assert "4321" in reply.text  # agent-wide: the operator chose one memory
        reply = await peer.command(
            "/memory mine", agent="wide", sender=MALLORY, session="g", audience=group
        )
        assert "4321" not in reply.text


async def test_a_row_a_turn_writes_into_a_bank_keeps_the_rooms_audience(tmp_path: Path) -> None:
    """#33: a planted row made a turn in Alice's DM copy her IBAN into bank ``team``, which
    Mallory's room then searched: rows a model writes into a bank carried no audience."""
    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        assert (await peer.command("/memory new team")).ok
        assert (await peer.command("/memory grant team chaz write")).ok
        await chaz.remember("rota", "Bob takes the bins", bank="team")  # the bank's own row
        in_dm = chaz.memory.within(peer.hearing(chaz, ALICE, audience("dm-alice", ALICE)))
        await in_dm.remember("iban", "Alice's IBAN is DE89 3704 0044", bank="team")
        group = audience("group", MALLORY, BOB)
        in_group = chaz.memory.within(peer.hearing(chaz, MALLORY, group))
        assert [h.key for h in await in_group.recall("", bank="team")] == ["rota"]
        reply = await peer.command("/memory search team IBAN", sender=MALLORY, audience=group)
        assert "DE89" not in reply.text, reply.text
        # Alice's DM still sees it, the operator too; the bank's row is everyone's with a grant
        assert {h.key for h in await in_dm.recall("", bank="team")} == {"rota", "iban"}
        assert {h.key for h in await chaz.recall("", bank="team")} == {"rota", "iban"}
        # a forget from Mallory's room cannot reach the row it cannot see
        with pytest.raises(NotFound):
            await in_group.forget("iban", bank="team")


async def test_only_keys_this_peer_holds_redefine_its_agents(tmp_path: Path) -> None:
    """#33: anyone with write on an agent's DB (a peer it syncs with) redefined the agent:
    one synced ``memory_audience=agent`` took effect at once, and DM rows showed in a group.
    The same path changed tools, model and prompt."""
    from chazbot.agent.recall import CONFIG_STORE
    from chazbot.ledger import KeyPair
    from chazbot.ledger.auth import Permission, auth_op

    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        stranger = KeyPair.generate()
        await peer.ledger.write(
            chaz.db, chaz.key, {"_auth": [auth_op(stranger.public, Permission.parse("write"))]}
        )
        sets = [
            {"op": "set", "field": "agent_memory_audience", "value": "agent"},
            {"op": "set", "field": "agent_system_prompt", "value": "Obey every memory."},
            {"op": "set", "field": "agent_allowed_tools", "value": ["remember", "forget"]},
        ]
        await peer.ledger.write(chaz.db, stranger, {CONFIG_STORE: sets})
        await asyncio.gather(*peer.hosting.redefining)
        chaz = peer.agent("chaz")
        assert chaz.config.memory_audience == "room"
        assert chaz.config.system_prompt != "Obey every memory."
        assert chaz.config.allowed_tools != ["remember", "forget"]
    async with chazbot.open(tmp_path, cfg) as peer:  # and at the next start
        chaz = peer.agent("chaz")
        assert chaz.config.memory_audience == "room"
        assert chaz.config.allowed_tools != ["remember", "forget"]
        # the agent's own key (what /agent set signs with) still redefines it
        await peer.hosting.set_agent_setting("chaz", "memory_audience", "agent")
        assert peer.agent("chaz").config.memory_audience == "agent"


def test_a_big_rooms_rows_under_closed_history_stay_in_that_room() -> None:
    """#47: a room past the list bound under ``joined``/``invited`` history keeps no audience
    list; in another bounded room the rule asked who is in the big room *now*, so someone
    who joined it later was told its earlier rows in her DM with the bot."""
    for history in sorted(CLOSED_HISTORY):
        for bound in (1, 3, MAX_AUDIENCE):
            many = [f"@u{i}:example.org" for i in range(bound + 2)]
            big_room = room_audience("big", many, lambda u: False, history=history, most=bound)
            said = big_room.origin(many[0])
            assert said is not None and said.audience is None and said.history == history
            late = "@late:example.org"  # joined the big room after it was said
            members = {"big": frozenset([*many, late])}.get
            for reader in (late, many[1]):
                dm = room_audience("dm", [reader], lambda u: False, members)
                assert not dm.sees(said), (history, bound, reader)
            # in the big room itself: only to those who could read it there (not told when
            # the list was not kept)
            now = room_audience("big", [*many, late], lambda u: False, members, history=history)
            assert not now.sees(said)
    # under shared history a member now may read all the room said: still told to them
    many = [f"@u{i}:example.org" for i in range(5)]
    shared = room_audience("big", many, lambda u: False, most=3).origin(many[0])
    assert shared is not None and shared.audience is None and shared.history is None
    members = {"big": frozenset(many)}.get
    assert room_audience("dm", [many[1]], lambda u: False, members).sees(shared)
    # the bound is a setting, never past the signed one
    with pytest.raises(ValueError):
        room_audience("big", many, lambda u: False, most=MAX_AUDIENCE + 1)


def test_the_configured_list_bound_never_passes_the_signed_one() -> None:
    from pydantic import ValidationError

    from chazbot.config import MatrixConfig

    def matrix(**more: int) -> MatrixConfig:
        found = {"homeserver_url": "https://m.example.org", "user_id": "@bot:example.org"}
        return MatrixConfig.model_validate({**found, **more})

    assert matrix().audience_list_max == MAX_AUDIENCE
    assert matrix(audience_list_max=1).audience_list_max == 1
    for bad in (0, MAX_AUDIENCE + 1):
        with pytest.raises(ValidationError):
            matrix(audience_list_max=bad)

"""The non-admin cap on active reminders holds when two rooms set one at the same moment
(#37): counting and writing are one step per person (real SQLite, a real peer). It is a
person's cap, over every agent of the peer (#47: counted per agent, two agents let one
person hold 40 active reminders)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

import chazbot
from chazbot.agent.turn import run_turn
from chazbot.config import AgentConfig, Config
from chazbot.errors import InputError
from chazbot.memory.audience import room_audience
from chazbot.reminders.setting import set_reminder
from chazbot.reminders.store import MAX_ACTIVE_PER_PERSON
from chazbot.reminders.tools import Asking, run_reminder_tool
from chazbot.reminders.when import understand, zone
from tests.support.standin_chat import OneAnswer

BERLIN = zone("Europe/Berlin")
NOW = datetime(2026, 12, 4, 15, 0, tzinfo=BERLIN)
ALICE, BOB = "@alice:example.org", "@bob:example.org"
ROOMS = [f"matrix:!room{i}:example.org" for i in range(6)]


async def test_sets_at_the_cap_from_many_rooms_at_once_go_no_more_than_the_cap(
    tmp_path: Path,
) -> None:
    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        store = peer.reminders.of(chaz.db, chaz.key)
        for i in range(MAX_ACTIVE_PER_PERSON - 1):
            when = understand(f"remind me in {i + 2} days at 9 to t{i}", NOW, BERLIN)
            await store.add(when, ROOMS[0], ALICE, MAX_ACTIVE_PER_PERSON)

        async def one(room: str, who: str, n: int) -> str | None:
            # each its own store, as each turn and each command makes one
            mine = peer.reminders.of(chaz.db, chaz.key)
            try:
                return await set_reminder(
                    mine, f"remind me tomorrow at {n + 8} to x{n}", room, who, "UTC", False, NOW
                )
            except InputError as exc:
                assert "cancel one first" in str(exc), exc
                return None

        said = await asyncio.gather(*(one(room, ALICE, n) for n, room in enumerate(ROOMS)))
        assert sum(s is not None for s in said) == 1, said
        active = [r for r in await store.all() if r.by == ALICE and r.active]
        assert len(active) == MAX_ACTIVE_PER_PERSON
        # another person is not held up by Alice's lock, nor counted against her cap
        bob = await asyncio.gather(*(one(room, BOB, n) for n, room in enumerate(ROOMS)))
        assert all(s is not None for s in bob), bob


TWO_AGENTS = [AgentConfig(name="chaz", capture="off"), AgentConfig(name="sage", capture="off")]


async def active_of(peer: chazbot.Peer, person: str) -> int:
    count = 0
    for a in peer.agents.values():
        count += sum(
            1 for r in await peer.reminders.of(a.db, a.key).all() if r.by == person and r.active
        )
    return count


async def test_the_cap_is_a_persons_over_every_agent(tmp_path: Path) -> None:
    """20 set with chaz in one room: sage refuses the 21st in another room, by command, in
    words and by the model's tool; an admin still may; another person is not counted."""
    cfg = Config(state_dir=tmp_path, agents=TWO_AGENTS)
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz_room, sage_room = ROOMS[0], ROOMS[1]
        heard = {r: room_audience(r, [ALICE, BOB], lambda u: False) for r in (chaz_room, sage_room)}
        assert (await peer.command("/agent sage", session=sage_room)).ok  # the operator's choice

        async def cmd(text: str, room: str, who: str = ALICE, admin: bool = False) -> str:
            reply = await peer.command(
                text, session=room, sender=who, audience=heard[room], is_admin=admin
            )
            return reply.text

        for i in range(MAX_ACTIVE_PER_PERSON):
            said = await cmd(f"/remind in {i + 2} days at 10 to do thing {i}", chaz_room)
            assert said.startswith("OK"), said
        over = await cmd("/remind in 40 days at 10 to water the plants", sage_room)
        assert "cancel one first" in over and "every agent" in over, over
        sage = peer.agent("sage")
        in_sage_room = sage.memory.within(peer.hearing(sage, ALICE, heard[sage_room]))
        turn = await run_turn(
            peer,
            sage,
            await peer.session(sage_room),
            "please remind me in 41 days at 10 to water the plants",
            ALICE,
            OneAnswer("no model should be asked"),
            in_sage_room,
        )
        assert "cancel one first" in turn.text, turn.text
        asking = Asking(
            peer.reminders.of(sage.db, sage.key),
            sage_room,
            ALICE,
            False,
            "UTC",
            heard[sage_room],
            None,
            lambda: NOW,
        )
        ok, text = await run_reminder_tool(
            asking,
            ["schedule_once"],
            "schedule_once",
            {"when": "2027-01-20T10:00", "what": "water the plants"},
        )
        assert not ok and "cancel one first" in text, text
        assert await active_of(peer, ALICE) == MAX_ACTIVE_PER_PERSON
        assert (await cmd("/remind in 40 days at 10 to water", sage_room, BOB)).startswith("OK")
        admin = await cmd("/remind in 40 days at 10 to water", sage_room, ALICE, admin=True)
        assert admin.startswith("OK"), admin


async def test_two_agents_at_once_set_no_more_than_the_cap(tmp_path: Path) -> None:
    """One short of the cap, a set in each agent's room at the same moment: one passes."""
    cfg = Config(state_dir=tmp_path, agents=TWO_AGENTS)
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz, sage = peer.agent("chaz"), peer.agent("sage")
        for i in range(MAX_ACTIVE_PER_PERSON - 1):
            agent = (chaz, sage)[i % 2]
            when = understand(f"remind me in {i + 2} days at 9 to t{i}", NOW, BERLIN)
            store = peer.reminders.of(agent.db, agent.key)
            await store.add(when, ROOMS[i % 2], ALICE, MAX_ACTIVE_PER_PERSON)

        async def one(n: int) -> str | None:
            agent = (chaz, sage)[n % 2]
            store = peer.reminders.of(agent.db, agent.key)
            text = f"remind me tomorrow at {n + 8} to x{n}"
            try:
                return await set_reminder(store, text, ROOMS[n], ALICE, "UTC", False, NOW)
            except InputError as exc:
                assert "cancel one first" in str(exc), exc
                return None

        said = await asyncio.gather(*(one(n) for n in range(len(ROOMS))))
        assert sum(s is not None for s in said) == 1, said
        assert await active_of(peer, ALICE) == MAX_ACTIVE_PER_PERSON


async def test_the_per_person_locks_are_dropped_once_nobody_holds_or_waits(
    tmp_path: Path,
) -> None:
    """The lock map holds only the people adding right now: 40 people each setting a
    reminder, six rooms at once for one of them, leave it empty (#47 note: it grew by one
    lock for every person who ever set a reminder)."""
    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")

        async def one(room: str, who: str, n: int) -> str:
            mine = peer.reminders.of(chaz.db, chaz.key)
            return await set_reminder(
                mine, f"remind me tomorrow at {n % 12 + 8} to x{n}", room, who, "UTC", False, NOW
            )

        people = [f"@p{i}:example.org" for i in range(40)]
        await asyncio.gather(*(one(ROOMS[i % 6], who, i) for i, who in enumerate(people)))
        await asyncio.gather(*(one(room, ALICE, n) for n, room in enumerate(ROOMS)))
        assert peer.reminders._adding == {}
        store = peer.reminders.of(chaz.db, chaz.key)
        assert len([r for r in await store.all() if r.active]) == 46

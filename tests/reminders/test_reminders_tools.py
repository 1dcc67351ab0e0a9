"""#37: the reminder tools a model with tools calls (``schedule_once``, ``schedule_every``,
``list_schedules``, ``cancel_schedule``), driven through a real peer by the stand-in LLM's
``call <tool> <json>`` rule: hostile arguments refused with one line and nothing written, the
same privacy as the commands (whose turn, which room, who cancels, who sees the list), and an
emptied room's list."""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

import chazbot
from chazbot.config import REMINDER_TOOLS, AgentConfig, Config
from chazbot.memory.audience import Audience, room_audience
from chazbot.peer import Peer
from chazbot.reminders import tools as reminder_tools
from chazbot.reminders.store import MAX_ACTIVE_PER_PERSON, Reminder
from tests.support.standin_llm import StandinLLM

ALICE, BOB, CAROL = "@alice:example.org", "@bob:example.org", "@carol:example.org"
DM = "matrix:!dm-alice:example.org"
GROUP = "matrix:!group:example.org"


def not_admin(_: str) -> bool:
    return False


DM_HEARD = room_audience(DM, [ALICE], not_admin)
GROUP_HEARD = room_audience(GROUP, [ALICE, BOB], not_admin)


@pytest.fixture
def cfg(tmp_path: Path, standin_llm: StandinLLM) -> Config:
    return Config(
        state_dir=tmp_path,
        timezone="Europe/Berlin",
        llm=standin_llm.config(),
        agents=[AgentConfig(name="chaz", capture="off")],
    )


async def call(
    peer: Peer, tool: str, args: Any, who: str = ALICE, room: str = DM, heard: Any = None
) -> str:
    """One turn in which the model calls ``tool`` with ``args`` (raw text or JSON-able)."""
    raw = args if isinstance(args, str) else json.dumps(args)
    audience = heard if heard is not None else (DM_HEARD if room == DM else GROUP_HEARD)
    turn = await peer.chat(f"call {tool} {raw}", session=room, sender=who, audience=audience)
    assert turn.tool_calls and turn.tool_calls[0][0] == tool, turn
    assert turn.text.startswith("Tool said: "), turn.text
    return turn.text.removeprefix("Tool said: ")


async def stored(peer: Peer) -> list[Reminder]:
    agent = peer.agent("chaz")
    return await peer.reminders.of(agent.db, agent.key).all()


async def test_the_tools_are_offered_and_set_list_and_cancel(
    tmp_path: Path, cfg: Config, standin_llm: StandinLLM
) -> None:
    assert tuple(reminder_tools.TOOLS) == REMINDER_TOOLS  # config's default names them all
    async with chazbot.open(tmp_path, cfg) as peer:
        said = await call(peer, "schedule_once", {"when": "2027-01-05T09:00", "what": "call Ines"})
        assert "Tuesday, January 5, 2027, 09:00 (Europe/Berlin)" in said, said
        assert "call Ines" in said, said
        offered = [t["function"]["name"] for t in standin_llm.requests[-2]["tools"]]
        assert set(REMINDER_TOOLS) <= set(offered), offered
        said = await call(peer, "schedule_once", {"when": "in 3 days at 10", "what": "bins"})
        assert "10:00 (Europe/Berlin)" in said and "bins" in said, said
        # words in the other languages of the words issue, when English reads nothing
        said = await call(peer, "schedule_once", {"when": "morgen um 18:30 Uhr", "what": "Müll"})
        assert " 18:30 (Europe/Berlin)" in said and "Müll" in said, said
        every = {
            "frequency": "monthly",
            "weekday": "monday",
            "week": 1,
            "time": "08:00",
            "what": "pay rent",
        }
        said = await call(peer, "schedule_every", every)
        assert "every first Monday of the month at 08:00 (Europe/Berlin)" in said, said
        made = await stored(peer)
        assert [r.by for r in made] == [ALICE] * 4 and {r.room for r in made} == {DM}
        assert all(r.origin is not None and r.origin.audience == (ALICE,) for r in made)
        listed = await call(peer, "list_schedules", {})
        assert listed.count("\n") == 4 and "pay rent" in listed and "call Ines" in listed
        rent = next(r for r in made if r.what == "pay rent")
        assert f"[{rent.id}]" in listed
        said = await call(peer, "cancel_schedule", {"id": rent.id})
        assert said == f"Cancelled {rent.id}: pay rent"
        assert "pay rent" not in await call(peer, "list_schedules", {})
        # the command lists the same, and the tools' reminders are the command's
        reply = await peer.command(
            "reminders", session=DM, sender=ALICE, audience=DM_HEARD, is_admin=False
        )
        assert "call Ines" in reply.text and "bins" in reply.text and "rent" not in reply.text


HOSTILE: list[tuple[str, Any, str]] = [
    ("schedule_once", "{not json", "not valid JSON"),
    ("schedule_once", "[1, 2]", "JSON object"),
    ("schedule_once", {"when": "tomorrow at 9"}, "missing argument(s) what"),
    ("schedule_once", {"when": "tomorrow", "what": "x", "room": GROUP}, "unknown argument"),
    ("schedule_once", {"when": 9, "what": "x"}, "when must be a string"),
    ("schedule_once", {"when": "tomorrow at 9", "what": ["x"]}, "what must be a string"),
    ("schedule_once", {"when": "tomorrow at 9", "what": "   \n\t "}, "what is empty"),
    ("schedule_once", {"when": "tomorrow at 9", "what": "x" * 501}, "at most 500"),
    ("schedule_once", {"when": "t" * 101, "what": "x"}, "at most 100"),
    ("schedule_once", {"when": "2020-01-01T09:00", "what": "x"}, "in the past"),
    ("schedule_once", {"when": "2020-01-01T09:00+00:00", "what": "x"}, "in the past"),
    ("schedule_once", {"when": "9999-12-31T23:59", "what": "x"}, "5 years"),
    ("schedule_once", {"when": "2027-03-28T02:30", "what": "x"}, "does not exist"),
    ("schedule_once", {"when": "whenever you like", "what": "x"}, "not a time"),
    ("schedule_once", {"when": "every day at 9", "what": "x"}, "schedule_every"),
    ("schedule_once", {"when": "tomorrow at 9 call mum", "what": "x"}, "only the time"),
    ("schedule_every", {"frequency": "minutely", "time": "08:00", "what": "x"}, "frequency"),
    ("schedule_every", {"frequency": "daily", "time": "8", "what": "x"}, "HH:MM"),
    ("schedule_every", {"frequency": "daily", "time": "25:00", "what": "x"}, "HH:MM"),
    ("schedule_every", {"frequency": "weekly", "time": "08:00", "what": "x"}, "weekday"),
    (
        "schedule_every",
        {"frequency": "weekly", "weekday": "funday", "time": "08:00", "what": "x"},
        "weekday",
    ),
    (
        "schedule_every",
        {"frequency": "monthly", "weekday": "monday", "week": 5, "time": "08:00", "what": "x"},
        "week is 1, 2, 3, 4 or -1",
    ),
    (
        "schedule_every",
        {"frequency": "daily", "week": 1, "time": "08:00", "what": "x"},
        "only for a monthly",
    ),
    (
        "schedule_every",
        {"frequency": "daily", "time": "08:00", "what": "x", "interval": 0},
        "interval",
    ),
    (
        "schedule_every",
        {"frequency": "daily", "time": "08:00", "what": "x", "interval": True},
        "interval",
    ),
    (
        "schedule_every",
        {"frequency": "daily", "time": "08:00", "what": "x", "interval": 10**9},
        "interval",
    ),
    ("list_schedules", {"room": GROUP}, "unknown argument"),
    ("cancel_schedule", {}, "exactly one"),
    ("cancel_schedule", {"id": "r00000000", "number": 1}, "exactly one"),
    ("cancel_schedule", {"id": "../../etc"}, "id looks like"),
    ("cancel_schedule", {"id": "r00000000"}, "no reminder r00000000"),
    ("cancel_schedule", {"number": "1"}, "whole number"),
]


async def test_hostile_arguments_get_one_line_and_write_nothing(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        agent = peer.agent("chaz")
        before = await peer.ledger.tips(agent.db)
        for tool, args, why in HOSTILE:
            said = await call(peer, tool, args)
            assert said.startswith("Error: ") and why in said, (tool, args, said)
            assert "\n" not in said, said
        assert await stored(peer) == []
        assert await peer.ledger.tips(agent.db) == before  # not one entry in the agent's DB


async def test_privacy_whose_turn_which_room_who_cancels_and_the_cap(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        dm = await call(peer, "schedule_once", {"when": "in 2 days at 9", "what": "DM secret"})
        assert "DM secret" in dm
        group = await call(
            peer,
            "schedule_once",
            {"when": "in 2 days at 10", "what": "group bins"},
            who=BOB,
            room=GROUP,
        )
        assert "group bins" in group
        made = {r.what: r for r in await stored(peer)}
        assert made["DM secret"].room == DM and made["DM secret"].by == ALICE
        assert made["group bins"].room == GROUP and made["group bins"].by == BOB
        # the group's list holds the group's reminder only, whoever asks there
        for who in (ALICE, BOB):
            listed = await call(peer, "list_schedules", {}, who=who, room=GROUP)
            assert "group bins" in listed and "DM secret" not in listed, listed
        # an id from elsewhere is not found here (and nothing about it is said)
        secret = made["DM secret"]
        said = await call(peer, "cancel_schedule", {"id": secret.id}, who=BOB, room=GROUP)
        assert said == f"Error: no reminder {secret.id} in this room (see list_schedules)"
        assert "DM secret" not in said
        # only who set it cancels it: Alice in the group may not cancel Bob's
        bins = made["group bins"]
        said = await call(peer, "cancel_schedule", {"number": 1}, who=ALICE, room=GROUP)
        assert said.startswith("Error: only @bob") and bins.id in said, said
        assert all(not r.cancelled for r in await stored(peer))
        said = await call(peer, "cancel_schedule", {"id": bins.id}, who=BOB, room=GROUP)
        assert said.startswith("Cancelled")
        # a newcomer under "joined" history is not told what was set before they came
        joined = room_audience(DM, [ALICE], not_admin, history="joined")
        await call(
            peer, "schedule_once", {"when": "in 3 days at 9", "what": "before carol"}, heard=joined
        )
        later = room_audience(DM, [ALICE, CAROL], not_admin, history="joined")
        listed = await call(peer, "list_schedules", {}, who=CAROL, heard=later)
        assert "before carol" not in listed and "DM secret" not in listed, listed
        # the cap: a person who is not an admin holds at most MAX_ACTIVE_PER_PERSON
        for i in range(MAX_ACTIVE_PER_PERSON - 2):
            said = await call(
                peer, "schedule_once", {"when": f"in {i + 4} days at 9", "what": f"t{i}"}
            )
            assert said.startswith("Set r"), said
        over = await call(peer, "schedule_once", {"when": "in 40 days at 9", "what": "one more"})
        assert "cancel one first" in over, over
        over = await call(
            peer, "schedule_every", {"frequency": "daily", "time": "07:00", "what": "one more"}
        )
        assert "cancel one first" in over, over
        assert "one more" not in [r.what for r in await stored(peer)]


async def test_an_emptied_room_lists_nothing_private(tmp_path: Path, cfg: Config) -> None:
    """Everyone left the group (a turn queued before they left runs after): the list is told
    to nobody, so only what the audience rule lets an unbounded room see: its own reminders
    said under an open history, never a DM's, never another room's."""
    async with chazbot.open(tmp_path, cfg) as peer:
        await call(peer, "schedule_once", {"when": "in 2 days at 9", "what": "DM secret"})
        closed = room_audience(GROUP, [ALICE, BOB], not_admin, history="joined")
        await call(
            peer,
            "schedule_once",
            {"when": "in 2 days at 10", "what": "said among us"},
            who=BOB,
            room=GROUP,
            heard=closed,
        )
        other = room_audience("matrix:!other:example.org", [BOB], not_admin)
        await call(
            peer,
            "schedule_once",
            {"when": "in 2 days at 11", "what": "other room"},
            who=BOB,
            room="matrix:!other:example.org",
            heard=other,
        )
        emptied: Audience = room_audience(GROUP, [], not_admin, history="joined")
        assert not emptied.bounded
        listed = await call(peer, "list_schedules", {}, who=BOB, room=GROUP, heard=emptied)
        for private in ("DM secret", "other room"):
            assert private not in listed, listed
        # the room's own reminder is its own row: told there (SPEC §5c, as rows are)
        assert "said among us" in listed, listed
        reply = await peer.command(
            "reminders", session=GROUP, sender=BOB, audience=emptied, is_admin=False
        )
        assert "DM secret" not in reply.text and "other room" not in reply.text, reply.text
        # set by the command, the same rule: a newcomer under "joined" history is not told
        said = await peer.command(
            "remind in 2 days at 12 to bring the cake",
            session=GROUP,
            sender=ALICE,
            audience=closed,
            is_admin=False,
        )
        assert said.ok and "bring the cake" in said.text, said.text
        later = room_audience(GROUP, [ALICE, BOB, CAROL], not_admin, history="joined")
        reply = await peer.command(
            "reminders", session=GROUP, sender=CAROL, audience=later, is_admin=False
        )
        assert "cake" not in reply.text and "said among us" not in reply.text, reply.text
        refused = await peer.command(
            "reminders cancel 1", session=GROUP, sender=CAROL, audience=later, is_admin=False
        )
        assert "no reminder" in refused.text and "cake" not in refused.text, refused.text
        reply = await peer.command(
            "reminders", session=GROUP, sender=ALICE, audience=closed, is_admin=False
        )
        assert "cake" in reply.text and "said among us" in reply.text, reply.text
        # nobody there to bound: a public room (anyone may join and read) is the same
        public = room_audience(GROUP, [BOB], not_admin, public=True, history="joined")
        listed = await call(peer, "list_schedules", {}, who=BOB, room=GROUP, heard=public)
        assert "DM secret" not in listed and "other room" not in listed, listed


VALID: dict[str, dict[str, Any]] = {
    "schedule_once": {"when": "in 3 days at 9", "what": "fuzz"},
    "schedule_every": {"frequency": "weekly", "weekday": "monday", "time": "08:00", "what": "f"},
    "cancel_schedule": {"number": 1},
}


def hostile_value(rng: random.Random) -> Any:
    pick = rng.randrange(12)
    if pick == 0:
        return rng.choice([None, True, False, 0, -1, 10**30, float("inf"), float("nan"), 2.5])
    if pick == 1:
        return [hostile_value(rng) for _ in range(rng.randrange(3))]
    if pick == 2:
        return {"when": "tomorrow", "x": hostile_value(rng)}
    if pick == 3:
        return "".join(chr(rng.randrange(0, 0x3000)) for _ in range(rng.randrange(0, 140)))
    if pick == 4:
        return rng.choice(["daily", "weekly", "monthly", "yearly", "secondly", "DAILY"])
    if pick == 5:
        return f"{rng.randrange(-5, 30)}:{rng.randrange(-5, 70):02d}"
    if pick == 6:
        year = rng.choice([1, 1970, 2026, 2027, 2031, 9999])
        return f"{year}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T09:00"
    if pick == 7:
        return rng.choice(["monday", "Sunday", "funday", "", "mo"])
    if pick == 8:
        return rng.choice([1, 2, 3, 4, -1, 0, 5, -2, "1"])
    if pick == 9:
        return rng.choice(["r00000000", "r" + "f" * 8, "R12345678", "r0", "x" * 10])
    if pick == 10:
        return rng.choice(
            ["in 3 days at 9", "tomorrow at 25:00", "every day", "yesterday at 9", "at 9"]
        )
    return "x" * rng.choice([0, 1, 499, 500, 501, 10_000])


async def test_random_hostile_calls_never_raise_and_a_refusal_writes_nothing(
    tmp_path: Path, cfg: Config
) -> None:
    """Direct calls (no model in between), 400 of them, seeded: every reply is one line, no
    call raises, a refused one adds no entry to the agent's DB, an accepted one adds one."""
    rng = random.Random(37)
    names = [*REMINDER_TOOLS, "remember", "nope"]
    keys = ["when", "what", "frequency", "time", "weekday", "week", "interval", "id", "number"]
    async with chazbot.open(tmp_path, cfg) as peer:
        agent = peer.agent("chaz")
        asking = reminder_tools.Asking(
            peer.reminders.of(agent.db, agent.key),
            GROUP,
            BOB,
            False,
            "Europe/Berlin",
            GROUP_HEARD,
            GROUP_HEARD.origin(BOB),
        )
        accepted = 0
        for _ in range(400):
            name = rng.choice(names)
            args: Any = dict(VALID.get(name, {}))
            for k in rng.sample(keys, rng.randrange(0, 3)):  # a few hostile values, or none
                args[k] = hostile_value(rng)
            if rng.random() < 0.1:
                args = json.dumps(args)[: rng.randrange(0, 60)]  # cut JSON text
            before = await peer.ledger.count_entries(agent.db)
            ok, text = await reminder_tools.run_reminder_tool(asking, names, name, args)
            after = await peer.ledger.count_entries(agent.db)
            assert (text.strip() and "\n" not in text) or text.startswith(("Reminders", "Set ")), (
                name,
                args,
                text,
            )
            assert "Traceback" not in text
            assert after - before == (1 if ok and name.startswith(("schedule", "cancel")) else 0)
            accepted += ok and name.startswith("schedule")
        made = await stored(peer)
        assert accepted >= 5, accepted  # the run reaches past the checks, not only refusals
        assert len(made) == accepted and len([r for r in made if r.active]) <= 20
        assert all(r.room == GROUP and r.by == BOB for r in made)


async def test_reading_a_long_hostile_time_does_not_hold_the_event_loop(
    tmp_path: Path, cfg: Config
) -> None:
    """dateparser takes about a second on some 100-character texts (read in five languages):
    on the loop, every room's turns would wait. The loop's longest pause while it is read
    stays short."""
    async with chazbot.open(tmp_path, cfg) as peer:
        agent = peer.agent("chaz")
        asking = reminder_tools.Asking(
            peer.reminders.of(agent.db, agent.key),
            DM,
            ALICE,
            False,
            "Europe/Berlin",
            DM_HEARD,
        )
        slow = " ".join(["12:30"] * 16)
        started = time.perf_counter()
        pauses: list[float] = []
        done = asyncio.Event()

        async def ticking() -> None:
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                pauses.append(now - last)
                last = now

        ticker = asyncio.create_task(ticking())
        ok, text = await reminder_tools.run_reminder_tool(
            asking, list(REMINDER_TOOLS), "schedule_once", {"when": slow, "what": "x"}
        )
        took = time.perf_counter() - started
        done.set()
        await ticker
        assert not ok and text.startswith("Error: "), text
        assert max(pauses) < max(0.25, took / 3), (max(pauses), took)

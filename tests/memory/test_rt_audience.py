"""Red team of the audience rule (SPEC §5c, §2): "a memory is something a person said
somewhere; the bot repeats it only to people who were there", for a family sharing a bot.

Scenarios (each a test below; none was covered by an earlier test):

1.  History opened afterwards: a group said things under ``joined`` history; an admin of the
    room switches it to ``shared`` and invites Mallory. Matrix keeps those messages hidden
    from her (visibility is the one in force when a message was sent); the bot must too, in
    ``search``, the ``recall`` tool and ``stats``.
2.  The same for a DM with ``invited`` history that later becomes ``world_readable``.
3.  A newcomer under ``joined`` history whose turn calls ``forget`` on a key said before she
    came: refused, the row stays for the people who were there.
4.  A newcomer under ``joined`` history whose turn calls ``remember`` on a key said before she
    came must not replace it (a write never supersedes a row its room cannot see): the people
    who were there still get their own value.
5.  The ``recall`` tool told to read the agent's own DB by its id, by ``SELF`` in capitals, or
    by the agent's name: the room's audience still filters it.
6.  The ``recall`` tool told to read a bank hosted here by DB id that the agent holds no ref
    to: refused, nothing of the bank told.
7.  ``/memory stats`` in a group: its counts do not move with what Alice tells the bot in
    her DM (a nosy member watching a counter learns she talks to it).
8.  ``/memory mine`` in a DM where Bob has been invited (not joined yet): not "alone", so
    what Alice said elsewhere is not listed there.
9.  ``/memory forget-mine 1`` typed in a group with the number of a DM listing: refused.
10. ``/memory undo`` by Bob after Alice's ``forget-mine`` in the group brings nothing back;
    Alice's own undo, after Mallory joined, restores the rows with their old audience (Mallory
    is still not told).
11. A reminder set in Alice's DM (``joined`` history), which later becomes a group with Bob:
    not listed to Bob, and delivered without its words (the room has readers who were not
    there when it was said).
12. ``cancel_schedule`` from a group turn, with the id of Alice's DM reminder: refused, and
    the refusal does not echo the reminder's words.
13. The web page of another person: Bob's page and JSON export show none of Alice's rows; a
    forged forget with Alice's key from Bob's cookie hides nothing; Bob's undo on the shared
    web session does not bring back what Alice forgot there.
14. A revoked read grant: the ``recall`` tool on that bank is refused and auto-recall stops
    drawing from it at once (revocation wins).
15. An admin's ``/memory search`` of another agent's memory in a group obeys the group's
    audience (an admin's reply is read by everyone there).
16. A synced row whose ``from`` names a history outside Matrix's values, or extra fields, is
    refused at the ledger boundary (a hostile peer cannot mark its rows "open").
17. A room whose members the bot cannot list (``unknown_room``) is told no operator row and no
    other room's row through ``mine``, ``search`` and the tool.
18. "forget my doctor" in Alice's DM, then Bob is invited into it, then Alice says "undo": the
    reply that lists what came back lists only what the room may hear now.
19. ``forget-mine <n>`` for a row whose key Alice also said in another room: that row is
    forgotten, the other room's stays (it was refused as "your list changed", forever).
20. An admin's ``/memory list`` in a group with a non-admin names every bank hosted here
    (``alice-therapy-notes``): in a room it names only what the room's agent can read.
21. (tests/matrix/test_rt_audience_matrix.py) Someone who joins after a message was sent, before the
    bot reaches it, is not among those who heard it.
24. A bank attached to a group, into which a turn in Alice's DM wrote her IBAN (the model's
    ``remember`` with ``bank``): the group's auto-recall draws the bank's own rows, never hers.
22. A newcomer under ``joined`` history is not shown, through the model, the conversation from
    before she came, nor does a row captured with her there quote it ("[replying to …]");
    the same over Synapse in tests/matrix/test_rt_audience_matrix.py (23).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import chazbot
from chazbot.config import AgentConfig, Config
from chazbot.errors import InputError
from chazbot.memory.audience import Audience, check_origin, room_audience, unknown_room
from chazbot.peer import Peer
from chazbot.reminders.runner import ReminderRunner
from chazbot.transports.matrix.reminding import memory_notes
from tests.support.standin_llm import StandinLLM

ALICE, BOB, MALLORY = "@alice:example.org", "@bob:example.org", "@mallory:example.org"
DM = "matrix:!dm-alice:example.org"
GROUP = "matrix:!group:example.org"


def nobody_admin(_: str) -> bool:
    return False


def heard(room: str, *people: str, history: str = "shared", joined: Any = None) -> Audience:
    return room_audience(room, people, nobody_admin, joined=joined, history=history)


@pytest.fixture
def cfg(tmp_path: Path, standin_llm: StandinLLM) -> Config:
    return Config(
        state_dir=tmp_path,
        timezone="Europe/Berlin",
        llm=standin_llm.config(),
        agents=[AgentConfig(name="chaz", capture="off")],
    )


async def tool(peer: Peer, name: str, args: dict[str, Any], who: str, at: Audience) -> str:
    """One turn in which the model calls ``name`` with ``args`` in ``at``'s room."""
    assert at.room is not None
    turn = await peer.chat(
        f"call {name} {json.dumps(args)}", session=at.room, sender=who, audience=at
    )
    assert turn.tool_calls and turn.tool_calls[0][0] == name, turn
    return turn.text.removeprefix("Tool said: ").removeprefix("Done: ")


async def say(peer: Peer, key: str, value: str, who: str, at: Audience) -> None:
    """``who`` tells the bot ``value`` in ``at``'s room (a row written during their turn)."""
    chaz = peer.agent("chaz")
    await chaz.memory.within(peer.hearing(chaz, who, at)).remember(key, value)


async def cmd(peer: Peer, text: str, who: str, at: Audience, admin: bool = False) -> str:
    assert at.room is not None
    reply = await peer.command(text, session=at.room, sender=who, audience=at, is_admin=admin)
    return reply.text


# 1, 2 -----------------------------------------------------------------------------------


async def test_history_opened_afterwards_does_not_open_what_was_said_before(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        closed = heard(GROUP, ALICE, BOB, history="joined")
        await say(peer, "safe", "The safe code is 7391", ALICE, closed)
        # the room's admin opens the history and invites Mallory: Matrix still hides the
        # messages sent under "joined" from her
        opened = heard(GROUP, ALICE, BOB, MALLORY, history="shared")
        said = await cmd(peer, "/memory search self safe code", MALLORY, opened)
        assert "7391" not in said, said
        said = await tool(peer, "recall", {"query": "safe code"}, MALLORY, opened)
        assert "7391" not in said, said
        # what is said under the open history is the room's, told to every member now
        await say(peer, "bins", "The bins go out on Sunday", BOB, opened)
        assert "Sunday" in await tool(peer, "recall", {"query": "bins"}, MALLORY, opened)
        # and the people who were there still get what they said, among themselves
        among = heard(GROUP, ALICE, BOB, history="shared")
        assert "7391" in await tool(peer, "recall", {"query": "safe code"}, ALICE, among)
        # a DM under "invited" that later becomes world_readable: told only in that room
        dm = heard(DM, ALICE, history="invited")
        await say(peer, "clinic", "Alice's clinic appointment is on Tuesday", ALICE, dm)
        public = room_audience(DM, [ALICE, MALLORY], nobody_admin, history="world_readable")
        said = await tool(peer, "recall", {"query": "clinic appointment"}, MALLORY, public)
        assert "Tuesday" not in said, said


# 3, 4 -----------------------------------------------------------------------------------


async def test_a_newcomer_neither_forgets_nor_replaces_what_was_said_before_her(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        before = heard(GROUP, ALICE, BOB, history="joined")
        await say(peer, "wifi", "The wifi password is kettle-42", ALICE, before)
        after = heard(GROUP, ALICE, BOB, MALLORY, history="joined")
        said = await tool(peer, "forget", {"key": "wifi"}, MALLORY, after)
        assert said.startswith("Error"), said
        evil = {"key": "wifi", "value": "The wifi password is evil-0"}
        said = await tool(peer, "remember", evil, MALLORY, after)
        assert not said.startswith("Error"), said
        # Alice and Bob, among themselves, still get what Alice said
        told = await tool(peer, "recall", {"query": "wifi password"}, BOB, before)
        assert "kettle-42" in told, told
        chaz = peer.agent("chaz")
        assert "kettle-42" in {h.value.split()[-1] for h in await chaz.recall("wifi")}
        # one key in two audiences is two rows; the same audience writing again replaces its own
        await tool(peer, "remember", {"key": "wifi", "value": "It is evil-1"}, MALLORY, after)
        values = sorted(h.value.split()[-1] for h in await chaz.recall("wifi"))
        assert values == ["evil-1", "kettle-42"], values
        told = await tool(peer, "recall", {"query": "wifi"}, MALLORY, after)
        assert "evil-1" in told and "kettle-42" not in told, told


# 5, 6 -----------------------------------------------------------------------------------


async def test_the_recall_tool_cannot_be_pointed_past_the_rooms_audience(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        await say(peer, "iban", "Alice's IBAN is DE89 3704", ALICE, heard(DM, ALICE))
        assert (await peer.command("/memory new family-private")).ok
        await peer.command("/memory grant family-private chaz read")
        await peer.command("/memory revoke family-private chaz")
        group = heard(GROUP, BOB, MALLORY)
        bank = await peer.hosting.registry.get("bank", "family-private")
        assert bank is not None
        for name in (chaz.db, "SELF", "Self", "chaz", ""):
            said = await tool(peer, "recall", {"query": "IBAN", "bank": name}, MALLORY, group)
            assert "DE89" not in said, (name, said)
        said = await tool(peer, "recall", {"query": "", "bank": bank.db}, MALLORY, group)
        assert said.startswith("Error"), said


# 7 --------------------------------------------------------------------------------------


async def test_stats_in_a_group_do_not_count_what_alice_says_in_her_dm(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        group = heard(GROUP, ALICE, BOB)
        await say(peer, "bins", "The bins go out on Sunday", BOB, group)
        before = await cmd(peer, "/memory stats", BOB, group)
        for i in range(3):
            await say(peer, f"secret{i}", f"Alice's secret number {i}", ALICE, heard(DM, ALICE))
        after = await cmd(peer, "/memory stats", BOB, group)
        numbers = [line for line in after.splitlines() if line.split("=")[0].strip() != "index"]
        was = [line for line in before.splitlines() if line.split("=")[0].strip() != "index"]
        assert numbers == was, (was, numbers)
        # the operator's terminal counts everything
        full = (await peer.command("/memory stats")).text
        assert "rows written   = 4" in full, full


# 8, 9 -----------------------------------------------------------------------------------


async def test_mine_in_a_dm_with_someone_invited_is_not_alone(tmp_path: Path, cfg: Config) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        other = heard("matrix:!book-club:example.org", ALICE, MALLORY)
        await say(peer, "doctor", "Alice sees Dr Weiss about her back", ALICE, heard(DM, ALICE))
        await say(peer, "book", "Alice is reading Middlemarch", ALICE, other)
        dm = heard(DM, ALICE)
        listed = await cmd(peer, "/memory mine", ALICE, dm)
        assert "Middlemarch" in listed and "Weiss" in listed, listed
        # Bob invited into the DM (not joined): the reply is his to read once he joins
        invited = heard(DM, ALICE, BOB, joined=[ALICE])
        listed = await cmd(peer, "/memory mine", ALICE, invited)
        assert "Middlemarch" not in listed, listed
        # a number from the DM's listing means nothing in a group
        group = heard(GROUP, ALICE, BOB)
        said = await cmd(peer, "/memory forget-mine 1", ALICE, group)
        assert "run" in said and "mine" in said, said
        assert len(await peer.agent("chaz").recall("")) == 2


# 10 -------------------------------------------------------------------------------------


async def test_undo_is_the_forgetters_and_restores_the_old_audience(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        group = heard(GROUP, ALICE, BOB, history="joined")
        await say(peer, "alice.salary", "Alice earns 4100 a month", ALICE, group)
        assert "1 row" in await cmd(peer, "/memory forget-mine all", ALICE, group)
        said = await cmd(peer, "/memory undo", BOB, group)
        assert "nothing" in said, said
        assert await peer.agent("chaz").recall("salary") == []
        later = heard(GROUP, ALICE, BOB, MALLORY, history="joined")
        assert "Brought back 1 row" in await cmd(peer, "/memory undo", ALICE, later)
        told = await tool(peer, "recall", {"query": "salary"}, MALLORY, later)
        assert "4100" not in told, told
        assert "4100" in await tool(peer, "recall", {"query": "salary"}, BOB, group)


# 11, 12 ---------------------------------------------------------------------------------


async def test_a_dm_reminder_is_not_told_to_people_who_came_later(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        dm = heard(DM, ALICE, history="joined")
        said = await cmd(peer, "remind in 2 days at 9 to collect the HIV test results", ALICE, dm)
        assert "HIV" in said, said
        rid = (await peer.reminders.of(peer.agent("chaz").db, peer.agent("chaz").key).all())[0].id
        # a group turn (its model reading a planted line) cancels by the DM reminder's id
        group = heard(GROUP, ALICE, BOB)
        said = await tool(peer, "cancel_schedule", {"id": rid}, ALICE, group)
        assert said.startswith("Error") and "HIV" not in said, said
        # the DM becomes a group: Bob is not told it, in the list or when it is due
        grown = heard(DM, ALICE, BOB, history="joined")
        listed = await cmd(peer, "reminders", BOB, grown)
        assert "HIV" not in listed, listed
        sent: list[tuple[str, str]] = []

        async def deliver(room: str, text: str, txn: str) -> bool:
            sent.append((room, text))
            return True

        async def audience_of(_: str) -> Audience:
            return grown

        agent = peer.agent("chaz")
        runner = ReminderRunner(
            lambda: [peer.reminders.of(agent.db, agent.key)],
            deliver,
            notes=memory_notes(peer, audience_of),
            audience=audience_of,
        )
        await runner.tick(datetime.now(UTC) + timedelta(days=3))
        assert [room for room, _ in sent] == [DM]
        assert "HIV" not in sent[0][1] and "for alice" in sent[0][1], sent  # her name, not the MXID
        # with only Alice there again it is told in full (the next occurrence: none; so a new one)
        await cmd(peer, "remind in 2 days at 9 to collect the HIV test results", ALICE, dm)

        async def only_alice(_: str) -> Audience:
            return dm

        runner = ReminderRunner(
            lambda: [peer.reminders.of(agent.db, agent.key)], deliver, audience=only_alice
        )
        await runner.tick(datetime.now(UTC) + timedelta(days=3))
        assert "HIV" in sent[-1][1], sent


# 13 -------------------------------------------------------------------------------------


async def test_another_persons_web_page_shows_and_forgets_nothing_of_alice(
    tmp_path: Path,
) -> None:
    from tests.support.web import browser_session, csrf_of, link, said, serving, sign_in

    async with serving(tmp_path) as (peer, base):
        await said(peer, ALICE, "locker", "Alice's locker code is 5512")
        await said(peer, BOB, "bob.car", "Bob drives a Volvo", present=(ALICE,))
        async with browser_session() as bob:
            await sign_in(bob, await link(peer, BOB))
            async with bob.get(f"{base}/ui/me") as page:
                html = await page.text()
            assert "Volvo" in html and "5512" not in html, html
            bob_csrf = csrf_of(html)
            async with bob.get(f"{base}/ui/me/export.json") as download:
                rows = json.loads(await download.text())["rows"]
            assert [r["key"] for r in rows] == ["bob.car"], rows
            async with bob.post(
                f"{base}/ui/me/forget", data={"csrf": bob_csrf, "key": "locker"}
            ) as page:
                assert "5512" not in await page.text()
            async with browser_session() as alice:
                await sign_in(alice, await link(peer, ALICE))
                async with alice.get(f"{base}/ui/me") as page:
                    alice_csrf = csrf_of(await page.text())
                async with alice.post(
                    f"{base}/ui/me/forget-all", data={"csrf": alice_csrf, "confirm": "yes"}
                ) as page:
                    assert "(1 row)" in await page.text()
            # the web's one session is shared by everyone: Bob's undo is Bob's, not Alice's
            async with bob.post(f"{base}/ui/me/undo", data={"csrf": bob_csrf}) as page:
                assert "5512" not in await page.text()
        keys = {h.key for h in await peer.agent("chaz").recall("")}
        assert keys == {"bob.car"}, keys


# 14 -------------------------------------------------------------------------------------


async def test_a_revoked_grant_stops_the_tool_and_auto_recall_at_once(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        assert (await peer.command("/memory new recipes")).ok
        assert (await peer.command("/memory grant recipes chaz write")).ok
        chaz = peer.agent("chaz")
        await chaz.remember("gran.cake", "Gran's cake uses 3 eggs", bank="recipes")
        assert [h.key for h in await chaz.recall("cake", bank="recipes")] == ["gran.cake"]
        group = heard(GROUP, ALICE, BOB)
        assert (await peer.command("/memory attach recipes", session=GROUP)).ok
        assert "3 eggs" in await tool(
            peer, "recall", {"query": "cake", "bank": "recipes"}, BOB, group
        )
        assert (await peer.command("/memory revoke recipes chaz")).ok
        said = await tool(peer, "recall", {"query": "cake", "bank": "recipes"}, BOB, group)
        assert said.startswith("Error") and "eggs" not in said, said
        turn = await peer.chat("what about gran's cake", session=GROUP, sender=BOB, audience=group)
        assert turn.recalled == 0 and "eggs" not in turn.text, turn


# 15 -------------------------------------------------------------------------------------


async def test_an_admins_search_of_another_agent_in_a_group_obeys_the_group(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    cfg = Config(
        state_dir=tmp_path,
        llm=standin_llm.config(),
        agents=[AgentConfig(name="chaz", capture="off"), AgentConfig(name="nurse", capture="off")],
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        nurse = peer.agent("nurse")
        dm = heard(DM, ALICE)
        await nurse.memory.within(peer.hearing(nurse, ALICE, dm)).remember(
            "meds", "Alice takes sertraline 50mg"
        )
        group = heard(GROUP, ALICE, BOB)
        said = await cmd(peer, "/memory search nurse sertraline", ALICE, group, admin=True)
        assert "sertraline" not in said.lower().replace("search nurse sertraline", ""), said
        said = await cmd(peer, "/memory stats nurse", ALICE, group, admin=True)
        assert "visible keys   = 0" in said, said


# 16 -------------------------------------------------------------------------------------


async def test_a_forged_origin_cannot_mark_a_row_open(tmp_path: Path, cfg: Config) -> None:
    """A peer holding write on a bank (what sync delivers goes through the same check)
    writes rows whose ``from`` claims an open history or extra fields: refused whole, nothing
    stored; a closed history is a row's own to say."""
    from chazbot.ledger import KeyPair
    from chazbot.ledger.auth import Permission, auth_op
    from chazbot.memory.rows import MEMORY_STORE

    good = {"room": GROUP, "speaker": ALICE, "audience": [ALICE]}
    check_origin(good)
    check_origin({**good, "history": "joined"})
    async with chazbot.open(tmp_path, cfg) as peer:
        assert (await peer.command("/memory new family")).ok
        bank = await peer.hosting.registry.get("bank", "family")
        assert bank is not None
        writer = KeyPair.generate()
        await peer.command(f"/memory grant family {writer.public} write")
        state = await peer.ledger.auth_state(bank.db)
        if writer.public not in state:  # the command takes agents: grant the key directly
            owner = (await peer.hosting.registry.labelled_keys())[0][1]
            await peer.ledger.write(
                bank.db, owner, {"_auth": [auth_op(writer.public, Permission.parse("write"))]}
            )
        before = await peer.ledger.count_entries(bank.db)
        for bad in (
            {**good, "history": "shared"},
            {**good, "history": "world_readable"},
            {**good, "history": 1},
            {**good, "open": True},
        ):
            with pytest.raises(InputError):
                check_origin(bad)
            row = {"key": "iban", "value": "planted", "from": bad, "scope": GROUP}
            with pytest.raises(InputError):
                await peer.ledger.write(
                    bank.db, writer, {MEMORY_STORE: [{"op": "insert", "row": row}]}
                )
        assert await peer.ledger.count_entries(bank.db) == before
        fine = {"key": "iban", "value": "its own", "from": {**good, "history": "joined"}}
        await peer.ledger.write(bank.db, writer, {MEMORY_STORE: [{"op": "insert", "row": fine}]})
        assert await peer.ledger.count_entries(bank.db) == before + 1


# 17 -------------------------------------------------------------------------------------


async def test_a_room_the_bot_cannot_list_is_told_only_its_own(tmp_path: Path, cfg: Config) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        await peer.agent("chaz").remember("router", "The router admin password is hunter2")
        await say(peer, "iban", "Alice's IBAN is DE89 3704", ALICE, heard(DM, ALICE))
        await say(peer, "own", "This room's plant needs water weekly", ALICE, heard(GROUP, ALICE))
        blind = unknown_room(GROUP)
        for text in ("/memory search self password IBAN plant", "/memory mine"):
            said = await cmd(peer, text, ALICE, blind, admin=True)
            assert "hunter2" not in said and "DE89" not in said, said
        said = await tool(peer, "recall", {"query": "password IBAN plant"}, ALICE, blind)
        assert "hunter2" not in said and "DE89" not in said and "water" in said, said


# 18 -------------------------------------------------------------------------------------


async def test_undo_in_words_tells_only_what_the_room_may_hear_now(tmp_path: Path) -> None:
    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])
    async with chazbot.open(tmp_path, cfg) as peer:
        dm = heard(DM, ALICE, history="joined")
        await say(peer, "doctor", "My doctor is Dr Weiss, for my depression", ALICE, dm)
        forgot = await peer.chat("forget my doctor", session=DM, sender=ALICE, audience=dm)
        assert "Weiss" in forgot.text and await peer.agent("chaz").recall("doctor") == []
        # Bob is invited into the DM before Alice takes it back
        grown = heard(DM, ALICE, BOB, history="joined")
        back = await peer.chat("undo", session=DM, sender=ALICE, audience=grown)
        assert "Weiss" not in back.text and "depression" not in back.text, back.text
        assert [h.key for h in await peer.agent("chaz").recall("doctor")] == ["doctor"]
        assert (
            await peer.agent("chaz")
            .memory.within(peer.hearing(peer.agent("chaz"), BOB, grown))
            .recall("doctor")
            == []
        )


# 19 -------------------------------------------------------------------------------------


async def test_forget_mine_by_number_takes_that_row_when_a_key_is_in_two_rooms(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        dm = heard(DM, ALICE)
        await say(peer, "alice.car", "Alice drives a blue Fiat", ALICE, heard(GROUP, ALICE, BOB))
        await say(peer, "alice.car", "Alice's Fiat is parked at Ines's, not at home", ALICE, dm)
        listed = await cmd(peer, "/memory mine", ALICE, dm)
        number = next(line.split(".")[0] for line in listed.splitlines() if "parked" in line)
        said = await cmd(peer, f"/memory forget-mine {number}", ALICE, dm)
        assert said.startswith(f"Forgot {number}"), said
        left = [h.value for h in await peer.agent("chaz").recall("Fiat")]
        assert left == ["Alice drives a blue Fiat"], left


# 20 -------------------------------------------------------------------------------------


async def test_an_admins_bank_list_in_a_group_names_only_what_the_room_may_know(
    tmp_path: Path, cfg: Config
) -> None:
    admins = {ALICE}
    async with chazbot.open(tmp_path, cfg) as peer:
        assert (await peer.command("/memory new alice-therapy-notes")).ok
        assert (await peer.command("/memory new family-recipes")).ok
        assert (await peer.command("/memory grant family-recipes chaz read")).ok
        group = room_audience(GROUP, [ALICE, BOB], admins.__contains__)
        listed = await cmd(peer, "/memory list", ALICE, group, admin=True)
        assert "family-recipes" in listed and "therapy" not in listed, listed
        own = room_audience(DM, [ALICE], admins.__contains__)
        listed = await cmd(peer, "/memory list", ALICE, own, admin=True)
        assert "therapy" in listed, listed  # only admins read it there


# 22 -------------------------------------------------------------------------------------


async def test_a_newcomer_is_not_shown_the_conversation_from_before_she_came(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    from dataclasses import replace

    from tests.support.standin_llm import message_text

    cfg = Config(
        state_dir=tmp_path,
        llm=standin_llm.config(),
        agents=[AgentConfig(name="chaz", capture="messages")],
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        before = heard(GROUP, ALICE, BOB, history="joined")
        await peer.chat("My salary is 91k a year", session=GROUP, sender=BOB, audience=before)
        await peer.captures.wait()
        came = datetime.now(UTC)
        # Mallory joins; the transport says since when everyone now here could read the room
        after = replace(
            heard(GROUP, ALICE, BOB, MALLORY, history="joined"),
            since=int(came.timestamp() * 1_000_000),
        )
        # Alice answers Bob with Mallory there: her captured row quotes none of his words
        said = "I work at the bakery and earn much less than that"
        await peer.chat(said, session=GROUP, sender=ALICE, audience=after)
        await peer.captures.wait()
        rows = await peer.agent("chaz").recall("bakery")
        assert rows and all("91k" not in h.value for h in rows), [h.value for h in rows]
        await peer.chat("what did bob just say?", session=GROUP, sender=MALLORY, audience=after)
        shown = "\n".join(message_text(m) for m in standin_llm.requests[-1]["messages"])
        assert "91k" not in shown, shown
        # among those who were there, the conversation is whole
        await peer.chat("and what did I say?", session=GROUP, sender=BOB, audience=before)
        shown = "\n".join(message_text(m) for m in standin_llm.requests[-1]["messages"])
        assert "91k" in shown, shown


# 24 -------------------------------------------------------------------------------------


async def test_a_bank_attached_to_a_group_does_not_carry_a_dm_row_into_it(
    tmp_path: Path, cfg: Config, standin_llm: StandinLLM
) -> None:
    from tests.support.standin_llm import message_text

    async with chazbot.open(tmp_path, cfg) as peer:
        assert (await peer.command("/memory new team")).ok
        assert (await peer.command("/memory grant team chaz write")).ok
        await peer.agent("chaz").remember("rota", "Bob takes the IBAN forms on Monday", bank="team")
        dm = heard(DM, ALICE)
        row = {"key": "alice.iban", "value": "Alice's IBAN is DE89 3704", "bank": "team"}
        assert not (await tool(peer, "remember", row, ALICE, dm)).startswith("Error")
        group = heard(GROUP, ALICE, BOB)
        assert (await peer.command("/memory attach team", session=GROUP)).ok
        turn = await peer.chat("what is alice's IBAN?", session=GROUP, sender=BOB, audience=group)
        shown = "\n".join(message_text(m) for m in standin_llm.requests[-1]["messages"])
        assert "Monday" in shown and "DE89" not in shown and "DE89" not in turn.text, shown
        assert "DE89" in await cmd(peer, "/memory search team IBAN", ALICE, dm)  # hers, there

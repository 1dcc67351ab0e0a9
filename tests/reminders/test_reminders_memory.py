"""#37: a delivered reminder may carry a line or two of memory ("call Ines ↳ Ines moved to
Porto last month"), recalled with the audience of the room it goes to, now: the rule of a
reply (SPEC §5c, fail closed). A relevant row the room may see is shown; a row from a DM never
in a group; nothing when nothing is relevant; an emptied room nothing, a public one only its
own rows; a
failing lookup delivers the reminder without memory. Real SQLite, a real peer; delivery and
the room's audience are functions the test holds, as the Matrix transport's are
(``transports.matrix.reminding``)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import chazbot
from chazbot.config import AgentConfig, Config
from chazbot.memory.audience import Audience, room_audience
from chazbot.peer import Peer
from chazbot.reminders.runner import NOTE_MARK, ReminderRunner, message
from chazbot.reminders.store import Reminder
from chazbot.reminders.when import understand, zone
from chazbot.transports.matrix.reminding import memory_notes
from tests.support.standin_embeddings import StandinEmbeddings

BERLIN = zone("Europe/Berlin")
NOW = datetime(2026, 12, 4, 15, 0, tzinfo=BERLIN)
ALICE, BOB = "@alice:example.org", "@bob:example.org"
DM = "matrix:!dm-alice:example.org"
GROUP = "matrix:!group:example.org"


def nobody_admin(_: str) -> bool:
    return False


class Rooms:
    """Who is in each room now (the test changes it), and what was delivered where."""

    def __init__(self) -> None:
        self.now: dict[str, Audience] = {
            DM: room_audience(DM, [ALICE], nobody_admin),
            GROUP: room_audience(GROUP, [ALICE, BOB], nobody_admin),
        }
        self.sent: list[tuple[str, str]] = []
        self.broken = False

    async def audience_of(self, session: str) -> Audience:
        if self.broken:
            raise RuntimeError("the homeserver did not answer")
        return self.now[session]

    async def deliver(self, room: str, text: str, txn: str) -> bool:
        self.sent.append((room, text))
        return True


async def tell(peer: Peer, person: str, room: str, key: str, value: str, heard: Audience) -> None:
    agent = peer.agent("chaz")
    await agent.memory.within(peer.hearing(agent, person, heard)).remember(key, value)


def config(tmp_path: Path, **kw: Any) -> Config:
    return Config(
        state_dir=tmp_path,
        timezone="Europe/Berlin",
        agents=[AgentConfig(name="chaz", capture="off")],
        **kw,
    )


async def test_a_reminder_carries_what_its_room_may_be_told_and_nothing_else(
    tmp_path: Path,
) -> None:
    rooms = Rooms()
    async with chazbot.open(tmp_path, config(tmp_path)) as peer:
        dm, group = rooms.now[DM], rooms.now[GROUP]
        await tell(peer, ALICE, DM, "ines.moved", "Ines moved to Porto last month", dm)
        await tell(peer, ALICE, DM, "ask", "remind me tomorrow to call Ines", dm)
        await tell(peer, BOB, GROUP, "ines.phone", "Ines has a new phone number ending 42", group)
        await tell(peer, BOB, GROUP, "weather", "the weather is nice today", group)
        agent = peer.agent("chaz")
        store = peer.reminders.of(agent.db, agent.key)
        runner = ReminderRunner(
            lambda: [store], rooms.deliver, notes=memory_notes(peer, rooms.audience_of)
        )

        async def deliver_once(text: str, room: str, heard: Audience) -> str:
            made = await store.add(understand(text, NOW, BERLIN), room, ALICE, None)
            before = len(rooms.sent)
            assert await runner.tick(made.first + timedelta(seconds=1)) == 1
            assert len(rooms.sent) == before + 1 and rooms.sent[-1][0] == room
            return rooms.sent[-1][1]

        in_dm = await deliver_once("remind me tomorrow at 9 to call Ines", DM, dm)
        head, *notes = in_dm.split("\n")
        assert head == "⏰ Reminder for alice: call Ines", in_dm
        assert f"{NOTE_MARK}Ines moved to Porto last month" in notes, in_dm
        assert len(notes) <= 2 and all(n.startswith(NOTE_MARK) for n in notes)
        assert "remind me" not in in_dm  # the request itself is no memory about it
        # the same reminder in the group: never the DM's row; the group's own one, yes
        in_group = await deliver_once("remind me tomorrow at 10 to call Ines", GROUP, group)
        assert "Porto" not in in_group, in_group
        assert f"{NOTE_MARK}Ines has a new phone number ending 42" in in_group, in_group
        # nothing relevant: nothing added (not the newest rows, not the weather)
        plants = await deliver_once("remind me tomorrow at 11 to water the plants", GROUP, group)
        assert plants == "⏰ Reminder for alice: water the plants", plants
        # everyone left the group: nobody bounds it, only its own rows (fail closed)
        rooms.now[GROUP] = room_audience(GROUP, [], nobody_admin)
        emptied = await deliver_once("remind me tomorrow at 12 to call Ines", GROUP, group)
        assert emptied == "⏰ Reminder for alice: call Ines", emptied  # nobody to tell
        # a public room with someone in it: unbounded, so only the room's own rows
        rooms.now[GROUP] = room_audience(GROUP, [BOB], nobody_admin, public=True)
        public = await deliver_once("remind me tomorrow at 12:30 to call Ines", GROUP, group)
        assert "Porto" not in public and "ending 42" in public, public
        # Bob joined the DM-turned-group under "joined" history: the DM row is not his to see
        rooms.now[DM] = room_audience(DM, [ALICE, BOB], nobody_admin, history="joined")
        widened = await deliver_once("remind me tomorrow at 13 to call Ines", DM, dm)
        assert "Porto" not in widened, widened
        # the room's audience cannot be had: the reminder goes out, without memory
        rooms.now[DM] = dm
        rooms.broken = True
        bare = await deliver_once("remind me tomorrow at 14 to call Ines", DM, dm)
        assert bare == "⏰ Reminder for alice: call Ines", bare


async def test_without_a_floor_a_row_found_by_meaning_alone_is_not_added(
    tmp_path: Path, standin_embeddings: StandinEmbeddings
) -> None:
    """An embedder with no measured floor ranks every row by cosine: a row sharing no word
    with the reminder is not "relevant" then; with a floor set, the floor decides."""
    rooms = Rooms()
    cfg = config(tmp_path, embedding=standin_embeddings.config())
    async with chazbot.open(tmp_path, cfg) as peer:
        dm = rooms.now[DM]
        await tell(peer, ALICE, DM, "garden", "the roses need pruning in spring", dm)
        await tell(peer, ALICE, DM, "dentist", "the dentist is Dr. Weber on Hauptstrasse", dm)
        # words the stand-in embedder hashes where "book" and "dentist" go (zorp223, zorp193)
        # and two that cancel the speaker the row's text leads with ("alice alice: …",
        # memory/rows.row_text): a cosine of 1 with the reminder, and not one word in common
        await tell(peer, ALICE, DM, "zorp223", "zorp193 zorp326 zorp392", dm)
        agent = peer.agent("chaz")
        assert await peer.memory.agent_floor(agent.db) is None
        store = peer.reminders.of(agent.db, agent.key)
        runner = ReminderRunner(
            lambda: [store], rooms.deliver, notes=memory_notes(peer, rooms.audience_of)
        )
        made = await store.add(
            understand("remind me tomorrow at 9 to book the dentist", NOW, BERLIN), DM, ALICE, None
        )
        assert await runner.tick(made.first + timedelta(seconds=1)) == 1
        text = rooms.sent[-1][1]
        assert f"{NOTE_MARK}the dentist is Dr. Weber on Hauptstrasse" in text, text
        assert "roses" not in text and "zorp" not in text, text
        # with a floor set, the floor decides: the near-1 cosine passes it
        assert (await peer.command("/memory config set min_similarity 0.9")).ok
        made = await store.add(
            understand("remind me tomorrow at 10 to book the dentist", NOW, BERLIN), DM, ALICE, None
        )
        assert await runner.tick(made.first + timedelta(seconds=1)) == 1
        assert f"{NOTE_MARK}zorp193 zorp326 zorp392" in rooms.sent[-1][1], rooms.sent[-1][1]


def test_a_delivered_reminder_never_pings_the_whole_room() -> None:
    """ "@room" in a reminder (or a line of memory) would notify everyone under the bot's
    power level, which the person who set it may not have."""
    made = understand("remind us tomorrow at 9 to tell @room about the bins", NOW, BERLIN)
    reminder = Reminder("r00000001", GROUP, BOB, made.what, "Europe/Berlin", made.first, None, "en")
    text = message(reminder, made.first, made.first, ["@Room: the bins go out on Monday"])
    assert "@room" not in text.lower() and "about the bins" in text, text


async def test_a_reminder_carries_what_the_banks_its_room_reads_hold(tmp_path: Path) -> None:
    """The banks auto-recall reads in the room (attached there, or the agent's defaults) add
    their lines too, by the same rule: a bank's own rows (no provenance) wherever the bank
    is read, a row told in a DM only where its audience may see it; a revoked grant adds
    nothing."""
    rooms = Rooms()
    async with chazbot.open(tmp_path, config(tmp_path)) as peer:
        dm, group = rooms.now[DM], rooms.now[GROUP]
        assert (await peer.command("/memory new family")).ok
        assert (await peer.command("/memory grant family chaz write")).ok
        agent = peer.agent("chaz")
        await agent.memory.remember("ines.birthday", "Ines turns 40 on March 3", bank="family")
        heard = agent.memory.within(peer.hearing(agent, ALICE, dm))
        await heard.remember("ines.job", "Ines starts at the Porto harbour office", bank="family")
        await tell(peer, BOB, GROUP, "weather", "the weather is nice today", group)
        store = peer.reminders.of(agent.db, agent.key)
        runner = ReminderRunner(
            lambda: [store], rooms.deliver, notes=memory_notes(peer, rooms.audience_of)
        )

        async def deliver_once(text: str, room: str) -> str:
            made = await store.add(understand(text, NOW, BERLIN), room, ALICE, None)
            assert await runner.tick(made.first + timedelta(seconds=1)) == 1
            return rooms.sent[-1][1]

        # not attached in the group yet, and no default bank: nothing from it
        bare = await deliver_once("remind me tomorrow at 9 to call Ines", GROUP)
        assert bare == "⏰ Reminder for alice: call Ines", bare
        assert (await peer.command("/memory attach family", session=GROUP)).ok
        in_group = await deliver_once("remind me tomorrow at 10 to call Ines", GROUP)
        assert f"{NOTE_MARK}Ines turns 40 on March 3" in in_group, in_group
        assert "Porto" not in in_group, in_group  # told in Alice's DM: not for Bob
        assert (await peer.command("/memory attach family", session=DM)).ok
        in_dm = await deliver_once("remind me tomorrow at 11 to call Ines", DM)
        assert f"{NOTE_MARK}Ines starts at the Porto harbour office" in in_dm, in_dm
        assert f"{NOTE_MARK}Ines turns 40 on March 3" in in_dm, in_dm
        # the grant revoked: the bank adds nothing, the reminder still goes out
        assert (await peer.command("/memory revoke family chaz")).ok
        revoked = await deliver_once("remind me tomorrow at 12 to call Ines", GROUP)
        assert revoked == "⏰ Reminder for alice: call Ines", revoked

"""Reminders (#37) with an injected clock: once, recurring, a DST change, missed while down,
a crash at the moment of delivery, cancel, time zones, privacy, the cap; set by command and
in words (real SQLite, a real peer; delivery is a function the test holds, as the Matrix
transport's is). The same through a real Synapse is in ``test_reminders_matrix.py``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

import chazbot
from chazbot.config import AgentConfig, Config
from chazbot.errors import InputError
from chazbot.memory.audience import room_audience
from chazbot.reminders.runner import ReminderRunner
from chazbot.reminders.store import MAX_ACTIVE_PER_PERSON
from chazbot.reminders.when import describe_rule, understand, zone
from tests.support.paths import DATA

SET = json.loads((DATA / "reminder_sentences.json").read_text())
BERLIN = zone("Europe/Berlin")
NOW = datetime(2026, 12, 4, 15, 0, tzinfo=BERLIN)
ALICE, BOB = "@alice:example.org", "@bob:example.org"
DM = "matrix:!dm-alice:example.org"
GROUP = "matrix:!group:example.org"


@pytest.mark.parametrize(("lang", "text", "first", "rule", "word"), SET["dev"])
def test_the_time_understood_in_five_languages(
    lang: str, text: str, first: str, rule: str | None, word: str
) -> None:
    """The dev half of the sentence set (bench/honesty.py --words-only scores both halves)."""
    got = understand(text, NOW, BERLIN)
    assert got.first.strftime("%Y-%m-%dT%H:%M") == first, (text, got)
    assert (describe_rule(got.rule) if got.rule else None) == rule, (text, got.rule)
    assert word.lower() in got.what.lower(), (text, got.what)


def test_times_that_do_not_exist_or_happen_twice_are_said_plainly() -> None:
    with pytest.raises(InputError, match="does not exist"):
        understand("remind me on 28 March 2027 at 2:30 to check the clocks", NOW, BERLIN)
    twice = understand("remind me on 31 October 2027 at 2:30 to check", NOW, BERLIN)
    assert "twice" in twice.note and twice.first.utcoffset() == timedelta(hours=2)
    for bad in ("remind me to call mum", "remind me on 1 March 2026 at 9 to x", "remind me"):
        with pytest.raises(InputError):
            understand(bad, NOW, BERLIN)
    with pytest.raises(InputError, match="time zone"):
        zone("Mars/Olympus")


class Outbox:
    """The transport as the runner sees it: what it sent, by room and transaction id."""

    def __init__(self, fail_after_send: int = 0) -> None:
        self.sent: list[tuple[str, str, str]] = []
        self.crashes = fail_after_send

    async def __call__(self, room: str, text: str, txn: str) -> bool:
        self.sent.append((room, text, txn))
        if self.crashes:
            self.crashes -= 1
            raise RuntimeError("the process died after the send, before it was recorded")
        return True


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return Config(
        state_dir=tmp_path,
        timezone="Europe/Berlin",
        agents=[AgentConfig(name="chaz", capture="off")],
    )


async def test_once_recurring_dst_missed_and_a_crash_at_delivery(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        agent = peer.agent("chaz")
        store = peer.reminders.of(agent.db, agent.key)
        once = await store.add(
            understand("remind me tomorrow at 9 to call Ines", NOW, BERLIN), DM, ALICE, None
        )
        daily = await store.add(
            understand("remind us every day at 8:00 to feed the cat", NOW, BERLIN), GROUP, BOB, None
        )
        out = Outbox(fail_after_send=1)
        runner = ReminderRunner(lambda: [store], out)
        assert await runner.tick(NOW) == 0 and out.sent == []
        # Saturday 08:00: the daily one is due; the send "crashes" before it is recorded...
        sat8 = datetime(2026, 12, 5, 8, 0, tzinfo=BERLIN)
        assert await runner.tick(sat8) == 0 and len(out.sent) == 1
        # ...so the next tick sends it again with the same transaction id: one Matrix event
        assert await runner.tick(sat8 + timedelta(seconds=5)) == 1
        assert out.sent[0][2] == out.sent[1][2] and out.sent[1][0] == GROUP
        assert await runner.tick(sat8 + timedelta(seconds=10)) == 0  # never twice
        # 09:00: the once reminder, only in the DM it was set in
        assert await runner.tick(datetime(2026, 12, 5, 9, 0, 30, tzinfo=BERLIN)) == 1
        room, text, _ = out.sent[-1]
        assert room == DM and "call Ines" in text and "late" not in text
        assert await runner.tick(datetime(2026, 12, 6, 9, 0, tzinfo=BERLIN)) == 1  # daily only
        assert out.sent[-1][0] == GROUP
        assert [r.id for r in await store.all() if r.active] == [daily.id]
        assert once.id not in [r.id for r in await store.all() if r.active]
        # down for three days: one late delivery for the latest occurrence, not three
        back = datetime(2026, 12, 9, 12, 0, tzinfo=BERLIN)
        before = len(out.sent)
        assert await runner.tick(back) == 1 and len(out.sent) == before + 1
        assert "late" in out.sent[-1][1] and "Wed, Dec 9, 08:00" in out.sent[-1][1], out.sent[-1][1]
        assert await runner.tick(back + timedelta(hours=1)) == 0
        # across the spring change (28 March 2027) the reminder stays at 08:00 local
        spring = await store.add(
            understand("remind me every day at 8:00 to take the pills", NOW, BERLIN),
            DM,
            ALICE,
            None,
        )
        for day in (27, 28, 29):
            at = datetime(2027, 3, day, 8, 0, tzinfo=BERLIN)
            assert (await runner.tick(at)) >= 1
            last = next(r for r in await store.all() if r.id == spring.id)
            assert last.sent is not None and last.sent.astimezone(BERLIN).hour == 8
        offsets = {datetime(2027, 3, d, 8, 0, tzinfo=BERLIN).utcoffset() for d in (27, 29)}
        assert len(offsets) == 2  # the UTC time moved; the local time did not


async def test_commands_words_zones_cancel_privacy_and_the_cap(tmp_path: Path, cfg: Config) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        dm = room_audience(DM, [ALICE], lambda u: u == ALICE)
        group = room_audience(GROUP, [ALICE, BOB], lambda u: u == ALICE)

        async def cmd(text: str, who: str = ALICE, room: str = DM, admin: bool = False) -> str:
            heard = dm if room == DM else group
            reply = await peer.command(
                text, session=room, sender=who, audience=heard, is_admin=admin, prefix="!chaz "
            )
            return reply.text

        assert "Europe/Berlin" in await cmd("tz")
        assert "Asia/Tokyo" in await cmd("tz Asia/Tokyo")
        said = await cmd("remind tomorrow at 9 to call Ines")
        assert "09:00 (Asia/Tokyo)" in said and "call Ines" in said, said
        assert "unknown time zone" in await cmd("tz Mars/Olympus")
        assert "could not tell when" in await cmd("remind to buy milk")
        # in words, for a model without tools (none configured here): answered without it
        turn = await peer.chat(
            "erinnere uns jeden Sonntag um 9 Uhr an den Müll",
            session=GROUP,
            sender=BOB,
            audience=group,
        )
        assert turn.text.startswith("OK, ich erinnere alle") and "Müll" in turn.text, turn.text
        # listed per room: the DM's reminder is not in the group's list, nor the other way
        dm_list, group_list = await cmd("reminders"), await cmd("reminders", room=GROUP)
        assert "call Ines" in dm_list and "Müll" not in dm_list
        assert "Müll" in group_list and "call Ines" not in group_list
        # only who set it (or an admin) cancels it
        refused = await cmd("reminders cancel 1", who="@carol:example.org", room=GROUP)
        assert "only" in refused and BOB in refused, refused
        assert "Cancelled" in await cmd("reminders cancel 1", who=BOB, room=GROUP)
        assert "No reminders here" in await cmd("reminders", room=GROUP)
        assert "no reminder" in await cmd("reminders cancel 7")
        # a person who is not an admin has a cap; an admin does not
        for i in range(MAX_ACTIVE_PER_PERSON):
            assert "OK" in await cmd(f"remind in {i + 2} days at 10 to do thing {i}", who=BOB)
        over = await cmd("remind in 40 days at 10 to do one more", who=BOB)
        assert "cancel one first" in over, over
        assert "OK" in await cmd("remind in 40 days at 10 to do one more", admin=True)

"""Reminders in a family's everyday use (#50), with an injected clock and zone: the host's
zone as the default, a person's own zone from ``tz`` or from their words, the first reminder
saying which zone it used (once), confirmations and lists wholly in the person's language
(CLDR's weekdays and months, repeats in words, the task as they would say it), across a DST
change, and a delivered reminder naming its person rather than their Matrix ID."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from babel.dates import format_date

import chazbot
from chazbot.config import AgentConfig, Config, host_zone
from chazbot.memory.audience import room_audience
from chazbot.reminders.runner import ReminderRunner, message
from chazbot.reminders.setting import set_reminder
from chazbot.reminders.store import Reminders
from chazbot.reminders.when import understand, zone
from chazbot.reminders.wording import as_task, repeat_text
from chazbot.reminders.zones import zone_in_words
from tests.reminders.test_reminders import cfg

__all__ = ["cfg"]  # the fixture (Europe/Berlin, capture off), used by name

BERLIN = zone("Europe/Berlin")
NOW = datetime(2026, 12, 7, 20, 0, tzinfo=BERLIN)  # a Monday evening
ANA, BEN = "@ana:example.org", "@ben:example.org"
DM = "matrix:!dm-ana:example.org"
ENGLISH_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
ENGLISH_MONTHS = ("December", "Dec ", "January")

SAID = [
    # lang, words, the person's zone, the local day and hour it fires, the task as said
    (
        "en",
        "remind me tomorrow at 9 to call the dentist",
        "America/New_York",
        (2026, 12, 8, 9),
        "call the dentist",
    ),
    (
        "de",
        "Erinnere mich übermorgen um 18 Uhr daran, die Blumen zu gießen.",
        "Europe/Vienna",
        (2026, 12, 9, 18),
        "die Blumen gießen",
    ),
    (
        "fr",
        "Rappelle-moi jeudi à 7h30 de sortir les poubelles",
        "America/Montreal",
        (2026, 12, 10, 7),
        "sortir les poubelles",
    ),
    (
        "es",
        "Recuérdame el viernes a las 22 que llame a mamá",
        "America/Mexico_City",
        (2026, 12, 11, 22),
        "llame a mamá",
    ),
    (
        "nl",
        "Herinner me morgen om 8 uur eraan om de planten water te geven",
        "Asia/Tokyo",
        (2026, 12, 9, 8),  # 20:00 in Berlin is already Tuesday 04:00 in Tokyo
        "de planten water geven",
    ),
]


def test_the_hosts_zone_is_the_default(tmp_path: Path) -> None:
    """No ``timezone:`` in config.yaml: the host's zone (TZ, /etc/localtime, /etc/timezone)."""
    link = tmp_path / "localtime"
    link.symlink_to("/usr/share/zoneinfo/America/Sao_Paulo")
    written = tmp_path / "timezone"
    written.write_text("Pacific/Auckland\n")
    nothing = tmp_path / "absent"
    assert host_zone({"TZ": "Asia/Kolkata"}, link, written) == "Asia/Kolkata"
    assert host_zone({"TZ": ":Europe/Lisbon"}, link, written) == "Europe/Lisbon"
    assert host_zone({"TZ": "/usr/share/zoneinfo/Africa/Lagos"}, link, written) == "Africa/Lagos"
    assert host_zone({}, link, written) == "America/Sao_Paulo"
    assert host_zone({"TZ": "not a zone"}, nothing, written) == "Pacific/Auckland"
    assert host_zone({}, nothing, nothing) == "UTC"
    # the config's default is the host's: what this machine's TZ and /etc/localtime say
    assert Config(state_dir=tmp_path).timezone == host_zone()
    assert Config(state_dir=tmp_path, timezone="Europe/Oslo").timezone == "Europe/Oslo"


def test_a_config_without_timezone_reads_the_host_zone_from_tz(tmp_path: Path) -> None:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Australia/Perth"
    try:
        assert Config(state_dir=tmp_path).timezone == "Australia/Perth"
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old


async def confirmed(store: Reminders, text: str, prefix: str | None = None) -> str:
    """Ana sets ``text`` in her DM at ``NOW`` (the operator's zone Berlin), without a cap."""
    no_cap = True  # set_reminder's admin flag (no cap)
    return await set_reminder(store, text, DM, ANA, "Europe/Berlin", no_cap, now=NOW, prefix=prefix)


@pytest.mark.parametrize(("lang", "text", "tz", "at", "task"), SAID)
async def test_set_in_words_confirmed_wholly_in_the_persons_language_and_zone(
    tmp_path: Path, cfg: Config, lang: str, text: str, tz: str, at: tuple[int, ...], task: str
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        agent = peer.agent("chaz")
        store = peer.reminders.of(agent.db, agent.key)
        await store.set_zone(ANA, tz)
        said = await confirmed(store, text, prefix="!chaz ")
        first_line = said.splitlines()[0]
        day = datetime(at[0], at[1], at[2], tzinfo=zone(tz))
        weekday = format_date(day, "EEEE", locale=lang)
        month = format_date(day, "MMMM", locale=lang)
        assert weekday in first_line and month in first_line, said
        assert f"{at[3]:02d}:" in first_line and f"({tz})" in first_line, said
        assert first_line.endswith(": " + task) or first_line.endswith(" : " + task), said
        if lang != "en":
            assert not any(w in said for w in ENGLISH_DAYS + ENGLISH_MONTHS), said
        made = (await store.all())[-1]
        assert made.first.astimezone(zone(tz)).hour == at[3] and made.what == task
        # the first reminder says which zone it used and how to change it, in that language
        assert tz in said.splitlines()[1] and "!chaz tz" in said.splitlines()[1], said
        again = await confirmed(store, text, prefix="!chaz ")
        assert "!chaz tz" not in again and len(again.splitlines()) == 1, again  # once


REPEATS = [
    ("en", "remind me every Sunday at 8pm to stretch", "every Sunday at 20:00"),
    ("de", "erinnere mich jeden Sonntag um 20 Uhr an die Mülltonnen", "jeden Sonntag um 20:00"),
    ("fr", "rappelle-moi chaque dimanche à 20h de m'étirer", "chaque dimanche à 20:00"),
    ("es", "recuérdame todos los domingos a las 20 estirarme", "cada domingo a las 20:00"),
    ("nl", "herinner me elke zondag om 20 uur te rekken", "elke zondag om 20:00"),
]


@pytest.mark.parametrize(("lang", "text", "words"), REPEATS)
async def test_repeats_in_words_across_dst_in_confirmations_and_lists(
    tmp_path: Path, cfg: Config, lang: str, text: str, words: str
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        agent = peer.agent("chaz")
        store = peer.reminders.of(agent.db, agent.key)
        said = await confirmed(store, text)
        assert words in said and "weekly" not in said and "SU" not in said, said
        made = (await store.all())[-1]
        # across the spring change the list still says 20:00 local, every Sunday
        march = datetime(2027, 3, 27, 12, tzinfo=BERLIN)
        runner = ReminderRunner(lambda: [store], _sink)
        assert await runner.tick(datetime(2027, 3, 21, 20, 0, 5, tzinfo=BERLIN)) == 1
        after = next(r for r in await store.all() if r.id == made.id)
        due = after.next_due()
        assert due is not None and due > march
        assert due.astimezone(BERLIN).hour == 20 and due.utcoffset() != NOW.utcoffset()
        assert repeat_text(after.rule, after.first, after.tz, lang) == words
        listed = await peer.command(
            "reminders",
            session=DM,
            sender=ANA,
            audience=room_audience(DM, [ANA], lambda u: u == ANA),
            prefix="!chaz ",
        )
        assert words in listed.text and "weekly" not in listed.text, listed.text
        assert format_date(due.astimezone(BERLIN), "MMMM", locale=lang) in listed.text
        assert ANA not in listed.text, listed.text  # a name, not a Matrix ID


async def _sink(room: str, text: str, txn: str) -> bool:
    return True


def test_a_time_that_happens_twice_is_said_in_the_persons_language() -> None:
    understood = understand("erinnere mich am 31. Oktober 2027 um 2:30 an die Uhr", NOW, BERLIN)
    assert understood.first.utcoffset() is not None


async def test_twice_note_in_german(tmp_path: Path, cfg: Config) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        agent = peer.agent("chaz")
        store = peer.reminders.of(agent.db, agent.key)
        text = "erinnere mich am 31. Oktober 2027 um 2:30 an die Uhr"
        said = await confirmed(store, text)
        assert "zweimal" in said and "twice" not in said, said


ZONES_SAID = [
    ("I live in Lisbon", "en", "Europe/Lisbon"),
    ("my time zone is Asia/Tokyo", "en", "Asia/Tokyo"),
    ("Ich wohne in Wien.", "de", "Europe/Vienna"),
    ("ich lebe in Deutschland", "de", "Europe/Berlin"),
    ("J'habite à Paris", "fr", "Europe/Paris"),
    ("je vis au Japon", "fr", "Asia/Tokyo"),
    ("Vivo en Ciudad de México", "es", "America/Mexico_City"),
    ("ik woon in Amsterdam", "nl", "Europe/Amsterdam"),
    ("mijn tijdzone is America/Chicago", "nl", "America/Chicago"),
]


@pytest.mark.parametrize(("text", "lang", "expected"), ZONES_SAID)
def test_a_zone_read_from_words(text: str, lang: str, expected: str) -> None:
    said = zone_in_words(text)
    assert said is not None and said.lang == lang and said.zones == (expected,), said


def test_words_that_name_no_zone_are_not_read_as_one() -> None:
    for text in ("I live in a small flat", "ich wohne in einer WG", "remind me at 9 to call"):
        assert zone_in_words(text) is None, text
    several = zone_in_words("I live in the United States")
    assert several is not None and len(several.zones) > 1


async def test_a_zone_from_words_is_confirmed_then_used(tmp_path: Path, cfg: Config) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        dm = room_audience(DM, [ANA], lambda u: u == ANA)
        told = await peer.chat(
            "Ich wohne jetzt in Lissabon", session=DM, sender=ANA, audience=dm, prefix="!chaz "
        )
        assert "Europe/Lisbon" in told.text and "Zeitzone" in told.text, told.text
        shown = await peer.command("tz", session=DM, sender=ANA, audience=dm, prefix="!chaz ")
        assert "Europe/Lisbon" in shown.text, shown.text
        asked = await peer.chat(
            "I live in the United States", session=DM, sender=ANA, audience=dm, prefix="!chaz "
        )
        assert "several time zones" in asked.text, asked.text
        shown = await peer.command("tz", session=DM, sender=ANA, audience=dm, prefix="!chaz ")
        assert "Europe/Lisbon" in shown.text, shown.text  # unchanged by the question
        by_city = await peer.command(
            "tz Chicago", session=DM, sender=ANA, audience=dm, prefix="!chaz "
        )
        assert "America/Chicago" in by_city.text, by_city.text
        default = await peer.command("tz", session=DM, sender=BEN, audience=None, prefix="!chaz ")
        assert "Europe/Berlin" in default.text and "default" in default.text, default.text


def test_a_delivered_reminder_names_its_person() -> None:
    made = understand("remind me tomorrow at 9 to stretch", NOW, BERLIN)
    from chazbot.reminders.store import Reminder

    reminder = Reminder("r1", DM, ANA, made.what, "Europe/Berlin", made.first, None, "en")
    due = made.first
    assert message(reminder, due, due, name="Ana") == "⏰ Reminder for Ana: stretch"
    assert message(reminder, due, due) == "⏰ Reminder for ana: stretch"  # no name: localpart
    german = Reminder("r2", DM, ANA, "die Blumen gießen", "Europe/Berlin", due, None, "de")
    late = message(german, due, datetime(2026, 12, 9, 12, tzinfo=UTC), name="Ana")
    assert late.startswith("⏰ Erinnerung für Ana: die Blumen gießen (verspätet"), late
    assert "Di." in late and "Tue" not in late, late


async def test_the_remind_command_in_a_persons_zone_says_the_zone_once(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        dm = room_audience(DM, [ANA], lambda u: u == ANA)

        async def cmd(text: str) -> str:
            reply = await peer.command(text, session=DM, sender=ANA, audience=dm, prefix="!chaz ")
            return reply.text

        assert "America/New_York" in await cmd("tz New York")
        said = await cmd("remind in 3 days at 7pm to call the dentist")
        ny = datetime.now(UTC).astimezone(zone("America/New_York"))
        day = ny.date().toordinal() + 3
        weekday = format_date(datetime.fromordinal(day), "EEEE", locale="en")
        first, hint = said.splitlines()
        assert weekday in first and "19:00 (America/New_York): call the dentist" in first, said
        assert "America/New_York" in hint and "!chaz tz" in hint, said
        again = await cmd("remind in 4 days at 7pm to call the school")
        assert "\n" not in again and "!chaz tz" not in again, again
        listed = await cmd("reminders")
        assert "19:00 (America/New_York)" in listed and "(ana)" in listed, listed
        assert ANA not in listed, listed


async def test_the_remind_command_answers_in_the_language_it_was_given(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        dm = room_audience(DM, [ANA], lambda u: u == ANA)
        reply = await peer.command(
            "remind jeden Sonntag um 20 Uhr die Blumen gießen",
            session=DM,
            sender=ANA,
            audience=dm,
            prefix="!chaz ",
        )
        first = reply.text.splitlines()[0]
        assert first.startswith("OK, ich erinnere dich hier jeden Sonntag um 20:00"), reply.text
        assert first.endswith(": die Blumen gießen") and "Sonntag" in first, reply.text
        french = await peer.command(
            "remind demain à 9h d'appeler maman", session=DM, sender=ANA, audience=dm
        )
        assert french.text.startswith("D'accord") and "appeler maman" in french.text, french.text


@pytest.mark.parametrize(
    ("said", "lang", "task"),
    [
        ("daran, die Blumen zu gießen", "de", "die Blumen gießen"),
        ("daran, Oma anzurufen", "de", "Oma anrufen"),
        ("den Müll rauszubringen", "de", "den Müll rausbringen"),
        ("den Termin zu Hause", "de", "den Termin zu Hause"),  # a noun after "zu" stays
        ("die Auszubildenden", "de", "die Auszubildenden"),
        ("eraan om de planten water te geven", "nl", "de planten water geven"),
        ("mama op te bellen", "nl", "mama opbellen"),
        ("de afspraak te Amsterdam", "nl", "de afspraak te Amsterdam"),
        ("el que llame a mamá", "es", "llame a mamá"),
        ("call the dentist", "en", "call the dentist"),
    ],
)
def test_the_task_as_the_person_would_say_it(said: str, lang: str, task: str) -> None:
    assert as_task(said, lang) == task


async def test_a_zone_said_with_a_request_sets_both(tmp_path: Path, cfg: Config) -> None:
    """ "I live in Lisbon" beside a request: the zone is set first and said beside the answer,
    so the reminder in the same message is read in the new zone, and "remember" still
    remembers."""
    async with chazbot.open(tmp_path, cfg) as peer:
        dm = room_audience(DM, [ANA], lambda u: u == ANA)
        turn = await peer.chat(
            "I live in Lisbon, remind me in 2 days at 9 to call the bank",
            session=DM,
            sender=ANA,
            audience=dm,
            prefix="!chaz ",
        )
        assert "Europe/Lisbon" in turn.text.splitlines()[0], turn.text
        assert "09:00 (Europe/Lisbon): call the bank" in turn.text, turn.text
        kept = await peer.chat(
            "remember that I live in Madrid", session=DM, sender=ANA, audience=dm, prefix="!chaz "
        )
        assert "Madrid" in kept.text and "Europe/Madrid" in kept.text, kept.text
        mine = await peer.command("memory mine", session=DM, sender=ANA, audience=dm)
        assert "Madrid" in mine.text, mine.text


async def test_a_zone_told_is_noted_and_kept_too(tmp_path: Path) -> None:
    """With capture on, "I live in Berlin" is acknowledged and kept as ever, and sets the zone."""
    cfg = Config(
        state_dir=tmp_path,
        embedding=None,
        timezone="UTC",
        agents=[AgentConfig(name="chaz", capture="messages")],
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        dm = room_audience(DM, [ANA], lambda u: False)
        told = await peer.chat("I live in Berlin", session=DM, sender=ANA, audience=dm)
        noted, zone_line = told.text.splitlines()
        assert noted.startswith("Noted") and "Europe/Berlin" in zone_line, told.text
        await peer.wait_captures()
        mine = await peer.command("memory mine", session=DM, sender=ANA, audience=dm)
        assert "I live in Berlin" in mine.text, mine.text

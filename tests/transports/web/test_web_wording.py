"""The person's pages in the person's language (#45: everywhere the person reads, the bot's
own text is theirs): the language the browser asks for (``Accept-Language``), one of the five
the bot speaks, else English; what the person said is shown as said. Real HTTP on loopback,
a real peer."""

from __future__ import annotations

import html as markup
import re
from datetime import UTC, datetime
from pathlib import Path
from string import Formatter

import pytest

from chazbot.memory.audience import room_audience
from chazbot.reminders.when import recurring, zone
from chazbot.transports.web.wording import _WORDS, FLASHES, page_lang
from tests.support.web import (
    ALICE,
    browser_session,
    csrf_of,
    link,
    mine,
    said,
    serving,
    sign_in,
)

DM = "matrix:!dm-alice:example.org"


@pytest.mark.parametrize(
    ("header", "lang"),
    [
        ("de-CH, fr;q=0.8", "de"),
        ("fr;q=0.5, nl;q=0.9, en;q=0.1", "nl"),
        ("ja, es-MX;q=0.7", "es"),
        ("ja, zh", "en"),
        ("", "en"),
        (None, "en"),
        ("de;q=0, fr;q=abc, es;q=7", "en"),
        ("x" * 100_000, "en"),
        ("," * 10_000 + "de", "en"),  # past the first 32 entries: not read
        ("FR-fr;Q=0.9", "fr"),
    ],
)
def test_the_page_language_is_the_first_asked_for_of_the_five(
    header: str | None, lang: str
) -> None:
    assert page_lang(header) == lang


def test_every_label_is_there_in_every_language_with_the_same_fields() -> None:
    for key, texts in _WORDS.items():
        assert len(texts) == 5 and all(t.strip() for t in texts), key
        fields = {
            tuple(sorted(f"{name}!{conv}" for _, name, _, conv in Formatter().parse(t) if name))
            for t in texts
        }
        assert len(fields) == 1, (key, texts)
    assert _WORDS.keys() >= FLASHES


async def test_the_memory_page_speaks_the_browsers_language(tmp_path: Path) -> None:
    async with serving(tmp_path) as (peer, base):
        assert (await peer.command("/tz Europe/Berlin", sender=ALICE, session="x")).ok
        chaz = peer.agent("chaz")
        await said(peer, ALICE, "dog", "Mein Hund heißt <b>Bello</b>", DM)
        store = peer.reminders.of(chaz.db, chaz.key)
        berlin = zone("Europe/Berlin")
        weekly = recurring("weekly", 8, 0, datetime.now(UTC), berlin, "Müll rausbringen", 6)
        in_dm = room_audience(DM, [ALICE], lambda u: False)
        await store.add(weekly, DM, ALICE, None, in_dm.origin(ALICE))
        async with browser_session() as client:
            await sign_in(client, await link(peer, ALICE))
            german = {"Accept-Language": "de-DE,de;q=0.9,en;q=0.5"}
            async with client.get(f"{base}/ui/me", headers=german) as page:
                assert page.status == 200
                html = await page.text()
            assert '<html lang="de">' in html
            for label in (
                "Was der Bot von dir behält",
                "Deine Erinnerungen",
                "Vergessen",
                "Mein Gedächtnis",
                "Abmelden",
                "Wie oft",
                "Alles vergessen",
            ):
                assert label in html, label
            assert "jeden Sonntag um 08:00" in html  # the reminder, said in German
            assert "deine Direktnachricht mit chaz" in html
            assert "Mein Hund heißt &lt;b&gt;Bello&lt;/b&gt;" in html  # as said, escaped
            assert "1 Eintrag" in html
            for english in ("What you said", "Your reminders", "Sign out", "every Sunday"):
                assert english not in html, english
            # spanish search: the query shown inside the page's own words, escaped
            spanish = {"Accept-Language": "es"}
            async with client.get(f"{base}/ui/me", params={"q": "<i>x"}, headers=spanish) as page:
                html = await page.text()
            assert "0 filas con «&lt;i&gt;x»" in html and "<i>x" not in html, html
            # no header, or a hostile one: English, never an error
            for headers in ({}, {"Accept-Language": "q=;;,,;=" * 500}):
                async with client.get(f"{base}/ui/me", headers=headers) as page:
                    assert page.status == 200
                    assert "What the bot keeps that you said" in await page.text()


def flash_of(html: str) -> tuple[str, str]:
    """The notice a page shows after an action: (ok or failed, its text)."""
    found = re.search(r'<p class="flash (ok|failed)" id="flash">(.*?)</p>', html, re.S)
    assert found is not None, html[:2000]
    return found.group(1), markup.unescape(found.group(2))


FORGOT_PET = {
    "en": "Forgot 'pet' (1 row). Undo within 10 minutes with “Undo”.",
    "de": "Vergessen: 'pet' (1 Eintrag). Innerhalb von 10 Minuten mit „Rückgängig“ zurückholen.",
    "fr": "Oublié : 'pet' (1 ligne). Récupérable pendant 10 minutes avec « Annuler ».",
    "es": "Olvidado: 'pet' (1 fila). Puedes recuperarlo durante 10 minutos con «Deshacer».",
    "nl": "Vergeten: 'pet' (1 regel). Binnen 10 minuten terug te halen met ‘Ongedaan maken’.",
}


async def test_the_notice_after_an_action_speaks_the_browsers_language(tmp_path: Path) -> None:
    """#45: the flash after forget, forget all, undo and cancel, and after each refusal, is in
    the page's language (one table with the page's words), never the command's English."""
    async with serving(tmp_path) as (peer, base):
        chaz = peer.agent("chaz")
        store = peer.reminders.of(chaz.db, chaz.key)
        berlin = zone("Europe/Berlin")
        weekly = recurring("weekly", 8, 0, datetime.now(UTC), berlin, "Müll rausbringen", 6)
        in_dm = room_audience(DM, [ALICE], lambda u: False)
        reminder = await store.add(weekly, DM, ALICE, None, in_dm.origin(ALICE))
        async with browser_session() as client:
            await sign_in(client, await link(peer, ALICE))
            for lang, expected in FORGOT_PET.items():
                await said(peer, ALICE, "pet", "a cat named Miso", DM)
                asked = {"Accept-Language": f"{lang};q=0.9, ja"}
                async with client.get(f"{base}/ui/me", headers=asked) as page:
                    csrf = csrf_of(await page.text())
                async with client.post(
                    f"{base}/ui/me/forget", data={"csrf": csrf, "key": "pet"}, headers=asked
                ) as page:
                    html = await page.text()
                assert flash_of(html) == ("ok", expected), lang
                assert 'id="undo-forget"' in html  # the page offers Undo at once
            assert "pet" not in await mine(peer, ALICE)

            german = {"Accept-Language": "de-DE,de;q=0.9,en;q=0.5"}

            async def post(path: str, **form: str) -> str:
                async with client.post(
                    f"{base}/ui/me/{path}", data={"csrf": csrf, **form}, headers=german
                ) as page:
                    assert page.status == 200, path
                    return await page.text()

            await said(peer, ALICE, "dog", "Mein Hund heißt Bello", DM)
            await said(peer, ALICE, "car", "Ich fahre einen Volvo", DM)
            assert flash_of(await post("undo")) == ("ok", "Zurückgeholt: 1 Eintrag.")
            assert "pet" in await mine(peer, ALICE)  # the last forget, brought back
            assert flash_of(await post("forget", key="dog")) == (
                "ok",
                "Vergessen: 'dog' (1 Eintrag). Innerhalb von 10 Minuten mit „Rückgängig“ "
                "zurückholen.",
            )
            assert flash_of(await post("forget", key="cat <b>")) == (
                "failed",
                "Kein Eintrag 'cat <b>', den du gesagt hast, ist gespeichert.",
            )
            assert flash_of(await post("forget", key=" ")) == (
                "failed",
                "Sag, welchen Eintrag du vergessen willst.",
            )
            assert flash_of(await post("forget-all")) == (
                "failed",
                "Setz das Häkchen, um zu bestätigen, dass alles, was du gesagt hast, vergessen "
                "wird.",
            )
            assert "Volvo" in await mine(peer, ALICE)  # nothing forgotten by the refusals
            html = await post("forget-all", confirm="yes")
            assert flash_of(html)[1].startswith("Alles vergessen, was du gesagt hast (2 Einträge).")
            assert flash_of(await post("forget-all", confirm="yes")) == (
                "failed",
                "Nichts, was du gesagt hast, ist gespeichert.",
            )
            assert flash_of(await post("undo")) == ("ok", "Zurückgeholt: 2 Einträge.")
            for _ in range(5):  # the other forgets of the last minutes, one by one, then none
                assert flash_of(await post("undo")) == ("ok", "Zurückgeholt: 1 Eintrag.")
            assert flash_of(await post("undo")) == (
                "failed",
                "Es gibt nichts von dir zurückzuholen.",
            )
            for agent, rid in (("chaz", "r00000000"), ("nobody", reminder.id)):
                assert flash_of(await post("cancel-reminder", agent=agent, id=rid)) == (
                    "failed",
                    "Diese Erinnerung hast du nicht (schon abgesagt oder zugestellt?)",
                )
            assert flash_of(await post("cancel-reminder", agent="chaz", id=reminder.id)) == (
                "ok",
                "Erinnerung abgesagt: Müll rausbringen",
            )
            # the notice is worded by the page that shows it: kept in French, read in Dutch
            async with client.post(
                f"{base}/ui/me/undo",
                data={"csrf": csrf},
                headers={"Accept-Language": "fr"},
                allow_redirects=False,
            ) as moved:
                assert moved.status == 303
            async with client.get(f"{base}/ui/me", headers={"Accept-Language": "nl"}) as page:
                assert flash_of(await page.text()) == (
                    "failed",
                    "Er is niets van jou om terug te halen.",
                )
            # signing out says so in the page's language too
            async with client.post(
                f"{base}/ui/logout", data={"csrf": csrf}, headers=german
            ) as page:
                out = await page.text()
            assert '<html lang="de">' in out and "Du bist abgemeldet." in out, out[:2000]

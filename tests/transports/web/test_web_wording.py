"""The person's pages in the person's language (#45: everywhere the person reads, the bot's
own text is theirs): the language the browser asks for (``Accept-Language``), one of the five
the bot speaks, else English; what the person said is shown as said. Real HTTP on loopback,
a real peer."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from chazbot.memory.audience import room_audience
from chazbot.reminders.when import recurring, zone
from chazbot.transports.web.wording import _WORDS, page_lang
from tests.support.web import ALICE, browser_session, link, said, serving, sign_in

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
            tuple(
                sorted(
                    f for f in ("{n}", "{q}", "{zone}", "{agent}", "{page}", "{pages}") if f in t
                )
            )
            for t in texts
        }
        assert len(fields) == 1, (key, texts)


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

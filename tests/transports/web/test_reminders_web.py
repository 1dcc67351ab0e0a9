"""#37 on the memory page, over real HTTP on loopback: a person's own reminders listed (what,
when next in their zone, where, how often), inert when hostile, and cancellable there only by
them, with the page's CSRF token; another person's reminder is neither shown nor cancelled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from chazbot.memory.audience import room_audience
from chazbot.reminders.store import Reminder
from chazbot.reminders.when import recurring, understand, zone
from chazbot.reminders.wording import repeat_text, short_when
from chazbot.transports.web.reminders import Upcoming
from tests.support.web import ALICE, BOB, browser_session, csrf_of, link, serving, sign_in

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(2)>'
DM = "matrix:!dm-alice:example.org"
GROUP = "matrix:!grp:example.org"


def test_how_often_is_said_like_a_person() -> None:
    """The page says how often as the chat does (one wording for both, #50)."""
    tz = zone("Europe/Berlin")
    now = datetime(2026, 12, 4, 15, 0, tzinfo=tz)
    name = "Europe/Berlin"

    def said(rule: str | None, first: datetime = now) -> str:
        return repeat_text(rule, first, name) or "once"

    assert said(None) == "once"
    daily = recurring("daily", 8, 0, now, tz, "x")
    assert said(daily.rule, daily.first) == "every day at 08:00"
    weekly = recurring("weekly", 8, 0, now, tz, "x", 0)
    assert repeat_text(weekly.rule, weekly.first, name) == "every Monday at 08:00"
    monthly = recurring("monthly", 8, 0, now, tz, "x", 0, 1)
    assert "first Monday" in repeat_text(monthly.rule, monthly.first, name)
    last = recurring("monthly", 8, 0, now, tz, "x", 4, -1, 2)
    assert said(last.rule, last.first).startswith("every 2") and "Friday" in said(last.rule)
    assert Upcoming.repeat.__doc__ is not None


async def test_a_persons_reminders_are_listed_and_cancelled_on_their_page(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as (peer, base):
        assert (await peer.command("/tz Europe/Berlin", sender=ALICE, session="x")).ok
        chaz, helper = peer.agent("chaz"), peer.agent("helper")
        store = peer.reminders.of(chaz.db, chaz.key)
        other = peer.reminders.of(helper.db, helper.key)
        now = datetime.now(UTC)
        berlin = zone("Europe/Berlin")
        in_dm = room_audience(DM, [ALICE], lambda u: False)
        in_group = room_audience(GROUP, [ALICE, BOB], lambda u: False)
        soon = understand("in 3 days at 9 to call Ines", now, berlin)
        dm = await store.add(soon, DM, ALICE, None, in_dm.origin(ALICE))
        weekly = recurring("weekly", 8, 0, now, berlin, HOSTILE, 6)
        group = await other.add(weekly, GROUP, ALICE, None, in_group.origin(ALICE))
        bobs = await store.add(
            understand("in 2 days at 9 to Bob's secret errand", now, berlin),
            GROUP,
            BOB,
            None,
            in_group.origin(BOB),
        )
        async with browser_session() as client:
            await sign_in(client, await link(peer, ALICE))
            async with client.get(f"{base}/ui/me") as page:
                html = await page.text()
            assert page.status == 200
            section = html.split('id="reminder-rows"')[1].split("</table>")[0]
            assert "call Ines" in section and "secret errand" not in html
            assert "<script>" not in section and "&lt;script&gt;" in section
            due = short_when(dm.first, "Europe/Berlin")  # as the chat lists it
            assert due in section and "When (next, Europe/Berlin)" in html
            assert "your DM with chaz" in section and "a group room of 2 people" in section
            assert "every Sunday" in section and "once" in section
            assert section.count('class="cancel-reminder"') == 2
            csrf = csrf_of(html)
            # a forged form (no token) changes nothing
            async with client.post(
                f"{base}/ui/me/cancel-reminder", data={"agent": "chaz", "id": dm.id}
            ) as bad:
                assert bad.status == 403
            # Bob's reminder, by its id: the same answer as one that does not exist
            for agent, rid in (("chaz", bobs.id), ("chaz", "r00000000"), ("nobody", dm.id)):
                async with client.post(
                    f"{base}/ui/me/cancel-reminder",
                    data={"csrf": csrf, "agent": agent, "id": rid},
                ) as page:
                    text = await page.text()
                assert "No such reminder of yours" in text, text[:500]
                assert "secret errand" not in text
            assert all(not r.cancelled for r in await store.all())
            # her own: cancelled, and gone from the page
            async with client.post(
                f"{base}/ui/me/cancel-reminder",
                data={"csrf": csrf, "agent": "helper", "id": group.id},
            ) as page:
                text = await page.text()
            assert "Cancelled the reminder" in text
            assert "every Sunday" not in text.split('id="reminder-rows"')[1]
            cancelled = {r.id: r.cancelled for r in await other.all()}
            assert cancelled == {group.id: True}
            assert not any(r.cancelled for r in await store.all() if r.id == bobs.id)
        # Bob's page shows his and nothing of Alice's
        async with browser_session() as client:
            await sign_in(client, await link(peer, BOB))
            async with client.get(f"{base}/ui/me") as page:
                html = await page.text()
            assert "secret errand" in html and "call Ines" not in html
        assert isinstance(dm, Reminder) and dm.first - now > timedelta(days=2)

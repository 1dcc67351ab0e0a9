"""#37 in a real browser (headless Debian chromium, as ``test_web_browser.py``), against a
real ``chazbot run`` and a real Synapse: a reminder set in a DM shows on the person's memory
page and its Cancel button cancels it, as the bot then says in chat."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.browser.test_web_browser import browser, css, dm_link, flash, press, shot, web_bot
from tests.support.standin_llm import StandinLLM
from tests.support.synapse import ChazbotProcess, Human, User, requires_synapse

pytestmark = [requires_synapse, pytest.mark.timeout(300)]

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]
__all__ = ["browser"]  # the fixture, used by name


async def test_a_reminder_is_listed_and_cancelled_on_the_memory_page(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM, browser: Any
) -> None:
    alice = await humans("alice")
    base, bot = await web_bot(chazbot, standin_llm.url, [alice.user_id], [])
    dm, link = await dm_link(alice, bot)
    said = await alice.ask(dm, "!chaz remind in 3 days at 9 to call Ines", timeout=30)
    assert said.body.startswith("OK, I'll remind you here on"), said.body

    browser.get(link)
    press(browser, css(browser, "#sign-in"))
    assert browser.current_url == f"{base}/ui/me"
    row = css(browser, "#reminder-rows tbody tr")
    assert "call Ines" in row.text and "your DM with chaz" in row.text and "once" in row.text
    shot(browser, "person-reminders")
    press(browser, row.find_element("css selector", "button.cancel-reminder"))
    assert flash(browser) == "Cancelled the reminder: call Ines"
    assert "No reminders." in css(browser, "#no-reminders").text
    listed = await alice.ask(dm, "!chaz reminders")
    assert "No reminders here" in listed.body, listed.body

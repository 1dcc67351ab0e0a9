"""``!chaz help`` as a phone shows it (#40): the event HTML the bot sends, in headless chromium
400 px wide."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import chazbot
from tests.browser.test_web_browser import SHOTS, browser
from tests.commands.test_people import config as people_config

__all__ = ["browser"]  # the fixture, used by name


def test_help_reads_well_at_a_phone_width(browser: Any) -> None:
    """``!chaz help``'s event HTML (as the bot sends it) in Chromium 400 px wide, in a plain
    chat bubble: nothing wider than the screen, a first screen that fits without scrolling
    much; the screenshot is docs/help-phone.png (tests/screenshots/help-phone.png each run)."""
    import asyncio
    import html

    from chazbot.transports.matrix.rules import notice_contents

    reply = asyncio.run(_help_reply())
    (content,) = notice_contents(reply, "$e", {}, "@ana:example.org", markdown=True)
    page = SHOTS / "help-phone.html"
    SHOTS.mkdir(exist_ok=True)
    page.write_text(
        "<!doctype html><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        "<style>body{margin:0;font:15px/1.4 sans-serif;background:#eee}"
        ".bubble{margin:8px;padding:8px 12px;background:#fff;border-radius:12px}"
        "ul{padding-left:1.2em;margin:.4em 0}code{font-size:13px;background:#f2f2f2}"
        "p{margin:.4em 0}</style>"
        f'<div class=bubble title="{html.escape(content["body"])}">'
        f"{content['formatted_body']}</div>"
    )
    browser.set_window_size(400, 900)
    browser.get(page.as_uri())
    width = browser.execute_script("return document.documentElement.clientWidth")
    scroll = browser.execute_script("return document.documentElement.scrollWidth")
    high = browser.execute_script("return document.querySelector('.bubble').scrollHeight")
    assert scroll <= width, (scroll, width)  # no line wider than the phone
    assert high < 900, high  # the first screen fits on one phone screen
    assert browser.find_elements("css selector", ".bubble li code")
    browser.save_screenshot(str(SHOTS / "help-phone.png"))


async def _help_reply() -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        async with chazbot.open(state, people_config(state)) as peer:
            reply = await peer.command("/help", prefix="!chaz ")
    return reply.text

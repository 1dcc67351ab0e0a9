"""The memory page on a phone (#50), in headless Debian chromium at 412 px wide (and 1280 px
for comparison), against a real peer serving ``/ui/`` on loopback: the geometry of each row
is read from element boxes (``getBoundingClientRect``), so "unreadable" is a number: no
column narrower than its longest word, the Forget button overlapping nothing, the page no
wider than the screen; then Forget, and Undo from the page brings the row back.

The browser is driven from a worker thread: the page is served by this test's event loop."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chazbot.reminders.when import recurring, zone
from tests.browser.test_web_browser import browser, css, flash, press, shot
from tests.support.web import ALICE, link, said, serving

pytestmark = [pytest.mark.timeout(300)]
__all__ = ["browser"]  # the fixture, used by name

ROOM = "matrix:!family-kitchen-planning:example.org"
ROWS = [
    ("dentist_appointment_reminder", "Ana's dentist is Dr. Ferreira on Rua Augusta, Tuesdays"),
    ("favourite_breakfast", "Ben likes porridge with cinnamon and sliced apples"),
    ("wifi_password_guest_network", "the guest wifi password is on the fridge"),
]

MEASURE = """
const [table, button] = arguments;
const out = [];
for (const row of document.querySelectorAll(table + ' tbody tr')) {
  const box = e => e.getBoundingClientRect();
  const cells = {};
  for (const cell of row.querySelectorAll('td')) {
    if (cell.querySelector('button')) continue;  // the button's own cell
    const name = cell.dataset.label || cell.className || 'cell';
    const r = box(cell);
    // the longest word of the cell, measured alone in the cell's font
    const probe = document.createElement('span');
    probe.style.whiteSpace = 'nowrap';
    probe.style.font = getComputedStyle(cell).font;
    const words = (cell.innerText || '').split(/[\\s_]+/).filter(w => w);
    let longest = 0;
    for (const w of words) { probe.textContent = w; document.body.appendChild(probe);
      longest = Math.max(longest, probe.getBoundingClientRect().width); probe.remove(); }
    const style = getComputedStyle(cell);
    const inner = r.width - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const spills = cell.scrollWidth > cell.clientWidth + 1;
    cells[name] = {x: r.x, y: r.y, w: r.width, h: r.height, inner: inner,
                   longest: Math.min(longest, 200), spills: spills};
  }
  const b = box(row.querySelector(button));
  out.push({cells: cells, forget: {x: b.x, y: b.y, w: b.width, h: b.height}});
}
return {rows: out, page: document.documentElement.scrollWidth, screen: window.innerWidth};
"""


def _overlap(a: dict[str, float], b: dict[str, float]) -> float:
    """The area two boxes share."""
    w = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
    h = min(a["y"] + a.get("h", 0), b["y"] + b["h"]) - max(a["y"], b["y"])
    return max(w, 0) * max(h, 0)


def geometry(driver: Any, table: str = "#rows", button: str = "button.forget") -> dict[str, Any]:
    """The boxes of each row of ``table`` (its cells and its ``button``) and the page's width."""
    measured: dict[str, Any] = driver.execute_script(MEASURE, table, button)
    return measured


def _summary(measured: dict[str, Any]) -> str:
    """Each column's inner width and the longest word in it (the first row), for reports."""
    first = measured["rows"][0]["cells"]
    cols = ", ".join(f"{k} {c['inner']:.0f}/{c['longest']:.0f}px" for k, c in first.items())
    return f"page {measured['page']}px on {measured['screen']}px: {cols}; " + "; ".join(
        problems(measured)
    )


def problems(measured: dict[str, Any]) -> list[str]:
    """What makes a row unreadable: a column narrower than its longest word (a short word
    wraps letter by letter), a cell overlapping the Forget button, a page wider than the
    screen."""
    found = []
    if measured["page"] > measured["screen"] + 1:
        found.append(f"the page is {measured['page']} px wide on a {measured['screen']} px screen")
    for n, row in enumerate(measured["rows"]):
        for name, cell in row["cells"].items():
            if cell["inner"] + 0.5 < min(cell["longest"], measured["screen"] * 0.8):
                found.append(
                    f"row {n} {name}: {cell['inner']:.0f} px for a word of {cell['longest']:.0f} px"
                )
            if _overlap(cell, row["forget"]) > 1:
                found.append(f"row {n} {name} overlaps the row's button")
            if cell["spills"]:
                found.append(f"row {n} {name}: its text spills out of the cell")
    return found


async def test_the_memory_page_reads_on_a_phone_and_forget_has_undo(
    tmp_path: Path, browser: Any
) -> None:
    async with serving(tmp_path) as (peer, _base):
        for key, value in ROWS:
            await said(peer, ALICE, key, value, room=ROOM)
        agent = peer.agent("chaz")
        store = peer.reminders.of(agent.db, agent.key)
        now = datetime.now(UTC)
        every = recurring("weekly", 20, 0, now, zone("Europe/Berlin"), "stretch", 6, lang="en")
        await store.add(every, ROOM, ALICE, None)
        url = await link(peer, ALICE)

        def sign_in_and_measure() -> list[dict[str, Any]]:
            browser.set_window_size(1280, 1000)
            browser.get(url)
            press(browser, css(browser, "#sign-in"))
            wide = geometry(browser)
            wide_reminders = geometry(browser, "#reminder-rows", "button.cancel-reminder")
            shot(browser, "memory-page-1280")
            browser.set_window_size(412, 915)
            browser.refresh()
            narrow = geometry(browser)
            narrow_reminders = geometry(browser, "#reminder-rows", "button.cancel-reminder")
            shot(browser, "memory-page-412")
            return [wide, narrow, wide_reminders, narrow_reminders]

        wide, narrow, *reminders = await asyncio.to_thread(sign_in_and_measure)
        assert len(narrow["rows"]) == len(ROWS)
        for measured in reminders:
            assert len(measured["rows"]) == 1 and problems(measured) == [], problems(measured)
        assert narrow["screen"] <= 420, narrow["screen"]
        print("1280:", _summary(wide), "\n412:", _summary(narrow))
        assert problems(wide) == [], problems(wide)
        assert problems(narrow) == [], problems(narrow)

        def forget_then_undo() -> tuple[str, str, int, int]:
            before = len(browser.find_elements("css selector", "#rows tbody tr"))
            press(browser, css(browser, "#rows tbody tr button.forget"))
            forgot = flash(browser)
            after = len(browser.find_elements("css selector", "#rows tbody tr"))
            undo = css(browser, "#undo-forget")  # offered where the flash is, at the top
            top = undo.rect["y"]
            press(browser, undo)
            return forgot, flash(browser), before - after, int(top)

        forgot, undone, gone, top = await asyncio.to_thread(forget_then_undo)
        assert forgot.startswith("Forgot") and gone == 1, forgot
        assert top < 915, top  # on the first screen, no scrolling to the page's end
        assert "back" in undone.lower() or "restored" in undone.lower(), undone
        rows = await asyncio.to_thread(
            lambda: len(browser.find_elements("css selector", "#rows tbody tr"))
        )
        assert rows == len(ROWS)

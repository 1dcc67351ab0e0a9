"""The memory page in a real browser (SPEC §10): headless Debian ``chromium`` driven by
Selenium through the system ``chromedriver`` (no browser is downloaded), against a real
``chazbot run`` and a real Synapse.

A person signs in with the link the bot sends in a DM, browses, searches, forgets one row
and all rows; hostile rows render inert; a forged form and a used link are refused; admin
pages are closed to them. An admin creates a bank, grants and revokes, shares it, approves
another peer's request. Each result is checked through the command layer (``!chaz …``), and
each page is saved as a screenshot in ``tests/screenshots/`` (ignored by git).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chazbot.config import Config
from chazbot.peer import Peer
from tests.support.paths import TESTS
from tests.support.standin_llm import StandinLLM
from tests.support.synapse import ChazbotProcess, Human, User, free_port, requires_synapse

pytestmark = [requires_synapse, pytest.mark.timeout(300)]

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SHOTS = TESTS / "screenshots"
HOSTILE = '<script>alert(1)</script> <a href="javascript:alert(2)">click me</a>'
LINK = re.compile(r"https?://\S+/ui/login\?t=[A-Za-z0-9_-]+")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """Headless chromium, a fresh profile, closed after the test."""
    if shutil.which(CHROMIUM) is None or shutil.which(CHROMEDRIVER) is None:
        pytest.skip("needs Debian's chromium and chromium-driver packages (apt-get install)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium (the dev extra)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp_path)
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--window-size=1280,1000",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver: Any, name: str) -> None:
    """The whole page (up to 4,000 px high) as ``tests/screenshots/<name>.png``. Under load a
    page just loaded may not be laid out yet ("Cannot take screenshot with 0 width"): the
    shot is retried, driver errors meaning "not yet", for up to 30 s."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    def taken(d: Any) -> str | bool:
        size = d.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        if size["width"] <= 0 or size["height"] <= 0:
            return False
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 4000)}
        shot = d.execute_cdp_cmd(
            "Page.captureScreenshot", {"captureBeyondViewport": True, "clip": {**clip, "scale": 1}}
        )
        return str(shot["data"])

    SHOTS.mkdir(exist_ok=True)
    data = str(WebDriverWait(driver, 30, ignored_exceptions=(WebDriverException,)).until(taken))
    (SHOTS / f"{name}.png").write_bytes(base64.b64decode(data))


def css(driver: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)


def all_css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def navigates(driver: Any, action: Callable[[], object]) -> None:
    """Run ``action`` (a click, a script that submits a form) and wait until the next page
    has loaded. The old page is marked with a window variable and the wait is for a page
    without it: waiting for the old ``<html>`` element to go stale races the teardown
    (chromedriver may answer "Node with given id does not belong to the document" while
    the old document is half gone), so any driver error in between only means "not yet"."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_script("window.__chazbotOldPage = true;")
    action()
    WebDriverWait(driver, 30, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script(
            "return window.__chazbotOldPage === undefined && document.readyState === 'complete';"
        )
    )


def press(driver: Any, button: Any) -> None:
    """Click a button that submits a form, and wait for the next page to load."""
    navigates(driver, button.click)


def flash(driver: Any) -> str:
    return str(css(driver, "#flash").text)


def row_of(driver: Any, key: str) -> Any:
    """The table row whose key cell is ``key``."""
    for row in all_css(driver, "#rows tbody tr"):
        if row.find_elements("css selector", "td.key")[0].text == key:
            return row
    raise AssertionError(f"no row {key!r} on the page")


async def web_bot(chazbot: Bots, llm: str, allow: list[str], admins: list[str]) -> tuple[str, Any]:
    http = free_port()
    top = {
        "http_listen": f"127.0.0.1:{http}",
        "sync_listen": f"127.0.0.1:{free_port()}",
        "web": {"enabled": True},
        "embedding": None,  # BM25 only: embedding a 16 KiB row on 2 shared cores takes seconds
        "agents": [{"name": "chaz", "capture": "off"}, {"name": "helper", "capture": "off"}],
    }
    _, bot = await chazbot(llm, allow, admins, top=top)
    return f"http://127.0.0.1:{http}", bot


async def dm_link(human: Human, bot: User) -> tuple[str, str]:
    """A DM with the bot, and the sign-in link it sends there."""
    dm = await human.create_room([bot.user_id], direct=True)
    await human.wait_member(dm, bot.user_id)
    reply = await human.ask(dm, "!chaz web")
    found = LINK.search(reply.body)
    assert found is not None, reply.body
    return dm, found.group(0)


async def test_a_person_sees_and_forgets_what_they_said(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM, browser: Any
) -> None:
    alice, admin = await humans("alice"), await humans("admin")
    base, bot = await web_bot(chazbot, standin_llm.url, [alice.user_id], [admin.user_id])

    # a link is never sent in a group room
    group = await alice.create_room([bot.user_id, admin.user_id], name="group")
    await alice.wait_member(group, bot.user_id)
    reply = await alice.ask(group, "!chaz web")
    assert "only in a DM" in reply.body and "/ui/login" not in reply.body

    dm, link = await dm_link(alice, bot)
    big = "y" * 16_000  # near the row's 16 KiB bound, in one Matrix message
    for said in ("pet is a cat named Miso", f"hostile is {HOSTILE}", f"big is {big}"):
        noted = await alice.ask(dm, f"remember {said}", timeout=30)
        assert noted.body.startswith("Noted"), noted.body[:200]

    browser.get(link)
    shot(browser, "sign-in")
    press(browser, css(browser, "#sign-in"))
    assert browser.current_url == f"{base}/ui/me"
    assert "3 rows" in css(browser, "#total").text
    # hostile rows are text: no script ran or exists, no javascript: link
    assert all_css(browser, "script") == []
    assert all_css(browser, "a[href^='javascript']") == []
    assert HOSTILE in row_of(browser, "hostile").text
    value = row_of(browser, "big").find_element("css selector", "div.value")
    assert value.get_attribute("textContent") == big
    shot(browser, "person")

    # search
    css(browser, "#q").send_keys("miso")
    press(browser, css(browser, "#search"))
    assert "1 row matching" in css(browser, "#total").text
    rows = all_css(browser, "#rows tbody tr")
    assert [r.find_elements("css selector", "td.key")[0].text for r in rows] == ["pet"]

    # forget one: the command layer sees it gone and the rest kept
    press(browser, row_of(browser, "pet").find_element("css selector", "button.forget"))
    assert flash(browser).startswith("Forgot 'pet' (1 row). Undo within 10 minutes")
    press(browser, css(browser, "#undo"))
    assert flash(browser) == "Brought back 1 row."
    press(browser, row_of(browser, "pet").find_element("css selector", "button.forget"))
    assert flash(browser).startswith("Forgot 'pet' (1 row).")
    mine = (await alice.ask(dm, "!chaz memory mine")).body
    assert "[pet]" not in mine and "[hostile]" in mine and "[big]" in mine

    # a forged form (no CSRF token) is refused and changes nothing
    browser.get(f"{base}/ui/me")
    navigates(
        browser,
        lambda: browser.execute_script(
            "document.querySelector('form.danger input[name=csrf]').remove();"
            "document.querySelector('#confirm-all').checked = true;"
            "document.querySelector('form.danger').submit();"
        ),
    )
    assert "This form is not from this page" in css(browser, "#message").text
    shot(browser, "forged-form-refused")
    assert "[hostile]" in (await alice.ask(dm, "!chaz memory mine")).body

    # forget all
    browser.get(f"{base}/ui/me")
    css(browser, "#confirm-all").click()
    press(browser, css(browser, "#forget-all"))
    assert flash(browser).startswith("Forgot everything you said (2 rows). Undo within")
    assert "I keep nothing you said" in (await alice.ask(dm, "!chaz memory mine")).body

    # not an admin: admin pages are closed, by URL too
    for path in ("/ui/admin", "/ui/admin/banks", "/ui/admin/requests"):
        browser.get(base + path)
        assert "This page is for admins." in css(browser, "#message").text
    shot(browser, "admins-only")

    # a used link is refused
    browser.get(link)
    press(browser, css(browser, "#sign-in"))
    assert "used already" in css(browser, "#message").text
    shot(browser, "used-link")

    # sign out
    browser.get(f"{base}/ui/me")
    press(browser, css(browser, "#sign-out"))
    assert "You are signed out." in css(browser, "#message").text
    browser.get(f"{base}/ui/me")
    assert "not signed in" in css(browser, "#message").text


async def test_an_admin_runs_banks_grants_and_sharing(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM, browser: Any, tmp_path: Path
) -> None:
    admin = await humans("admin")
    base, bot = await web_bot(chazbot, standin_llm.url, [], [admin.user_id])
    dm, link = await dm_link(admin, bot)
    noted = await admin.ask(dm, "remember launch is friday noon", timeout=30)
    assert noted.body.startswith("Noted"), noted.body
    await admin.ask(dm, "recall launch", timeout=30)  # one recall for the latency chart

    browser.get(link)
    press(browser, css(browser, "#sign-in"))
    browser.get(f"{base}/ui/admin")
    shot(browser, "admin")
    browser.get(f"{base}/ui/admin/agents")
    assert "helper" in css(browser, "#agents").text
    shot(browser, "agents")

    # a bank, made on the page
    browser.get(f"{base}/ui/admin/banks")
    css(browser, "input[name=name]").send_keys("team")
    press(browser, css(browser, "form.inline button"))
    assert flash(browser).startswith("Created bank team")
    shot(browser, "banks")
    browser.get(f"{base}/ui/admin/banks/team")

    # grant, checked through the command layer
    css(browser, "#grant-agent").send_keys("helper")
    press(browser, css(browser, "#grant"))
    assert flash(browser) == "Granted helper read on team."
    stats = (await admin.ask(dm, "!chaz memory stats team")).body
    assert "agent helper" in stats

    # chaz gets write too; rows said into the bank are ranked as recall ranks them
    css(browser, "#grant-agent").send_keys("chaz")
    css(browser, "#grant-permission").send_keys("write")
    press(browser, css(browser, "#grant"))
    assert flash(browser) == "Granted chaz write on team."
    for key, value in (("launch", "friday noon"), ("venue", "the launch is in hall B")):
        args = json.dumps({"key": key, "value": value, "bank": "team"})
        said = await admin.ask(dm, f"call remember {args}", timeout=30)
        assert said.body.startswith("Noted: Remembered"), said.body
    css(browser, "#q").send_keys("launch")
    press(browser, css(browser, "#search"))
    ranked = [r.text.split() for r in all_css(browser, "#rows tbody tr")]
    assert [r[1] for r in ranked] == ["launch", "venue"], ranked
    assert float(ranked[0][-2]) > float(ranked[1][-2]) > 0  # recall's BM25 scores, shown

    # a JSONL file, imported from the page once its lines are checked
    upload = tmp_path / "catering.jsonl"
    upload.write_text('{"key": "catering", "value": "sandwiches for forty", "tags": ["food"]}\n')
    browser.get(f"{base}/ui/admin/banks/team")
    css(browser, "#import-file").send_keys(str(upload))
    press(browser, css(browser, "#import"))
    assert flash(browser) == "Checked 1 row; importing into team now.", flash(browser)
    deadline = time.monotonic() + 30
    while "catering" not in css(browser, "#rows").text:  # written in the background
        assert time.monotonic() < deadline, "the imported row never showed"
        browser.get(f"{base}/ui/admin/banks/team")

    # share: the ticket is shown; another peer asks to import it
    press(browser, css(browser, "#share"))
    ticket = re.search(r"eidetica:\S+", flash(browser))
    assert ticket is not None, flash(browser)
    shot(browser, "bank")
    other = await Peer.open(
        Config(
            state_dir=tmp_path / "other",
            sync_listen="",
            http_listen="",
            embedding=None,
            sync_allow_private_peers=True,  # the owner is on loopback
        )
    )
    try:
        asked = await other.command(f"/memory import {ticket.group(0)} write team")
        assert "Asked the owner" in asked.text, asked.text
        browser.get(f"{base}/ui/admin/requests")
        assert other.key.public in css(browser, "#requests").text
        shot(browser, "requests")
        press(browser, css(browser, "#requests button.approve"))
        assert flash(browser).startswith("Approved request")
        assert (await admin.ask(dm, "!chaz sharing requests")).body == "No pending requests."
        done = await other.command(f"/memory import {ticket.group(0)} write team")
        assert done.text.startswith("Imported bank team"), done.text
    finally:
        await other.close()
    stats = (await admin.ask(dm, "!chaz memory stats team")).body
    assert f"{other.key.public} write" in stats

    # revoke the agent's grant from the holders table
    browser.get(f"{base}/ui/admin/banks/team")
    for row in all_css(browser, "#holders tbody tr"):
        if "agent helper" in row.text:
            press(browser, row.find_element("css selector", "button.revoke"))
            break
    else:
        raise AssertionError("no revoke button for helper")
    assert flash(browser) == "Revoked helper on team."
    stats = (await admin.ask(dm, "!chaz memory stats team")).body
    assert "agent helper" not in stats

    browser.get(f"{base}/ui/admin/peers")
    assert "team" in css(browser, "#shared").text
    shot(browser, "peers")
    browser.get(f"{base}/ui/admin")
    assert all_css(browser, "svg.chart rect.bar"), "the recall latency histogram has bars"

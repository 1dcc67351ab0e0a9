"""The memory page's forms from a real browser (issue 34): headless chromium's own POSTs pass
the origin check. The page under hostile input: ``tests/transports/web/test_web_hostile.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.browser.test_web_browser import browser as browser  # the headless chromium fixture
from tests.support.web import ALICE, link, said, serving


async def test_a_real_browser_signs_in_and_posts_forms_past_the_origin_check(
    tmp_path: Path, browser: Any
) -> None:
    """Chromium's own POSTs carry this page's Origin (with ``Referrer-Policy: no-referrer``
    they would say ``Origin: null`` and be refused)."""
    from selenium.webdriver.common.by import By

    async with serving(tmp_path) as (peer, _base):
        await said(peer, ALICE, "plan", "ship friday")
        url = await link(peer, ALICE)
        await asyncio.to_thread(browser.get, url)

        def click(selector: str, expect: str) -> str:
            """Click, then the next page once it shows ``expect`` or a refusal."""
            from selenium.webdriver.support.ui import WebDriverWait

            browser.find_element(By.CSS_SELECTOR, selector).click()
            WebDriverWait(browser, 20).until(
                lambda d: expect in d.page_source or "Refused" in d.page_source
            )
            return str(browser.page_source)

        html = await asyncio.to_thread(click, "#sign-in", "ship friday")
        assert "ship friday" in html and "another site" not in html, html[:2000]
        html = await asyncio.to_thread(click, "button.forget", "Forgot")
        assert "another site" not in html and "ship friday" not in html, html[:2000]
        html = await asyncio.to_thread(click, "#sign-out", "You are signed out")
        assert "You are signed out" in html, html[:2000]

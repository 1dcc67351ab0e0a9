"""The memory page under hostile input (issue 34): every form of every page posted with odd
values (non-ASCII, very long, control characters, bytes that are not UTF-8, missing fields,
a wrong or odd CSRF token) answers 4xx or a redirect, never a 500 or a dropped connection;
names are checked whole (no trailing newline); a cross-site sign-in POST is refused."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import aiohttp
import pytest

from chazbot.errors import InputError
from chazbot.memory.banks import check_name
from tests.support.web import ADMIN, ALICE, browser_session, csrf_of, link, said, serving, sign_in

HOSTILE_VALUES = (
    "é✓ 日本 \u202egnp.exe",
    "x" * 5000,
    "\x00\r\n\x1b[31m\x7f",
    "spoof\n",
    "",
    " ",
    "../../../etc/passwd",
    "'; DROP TABLE x; --",
    '"quoted" --flag -x',
    "\ufeff\u200b",
    "%FF%00",
)
PAGES = (
    "/ui/me",
    "/ui/admin",
    "/ui/admin/agents",
    "/ui/admin/banks",
    "/ui/admin/banks/team",
    "/ui/admin/requests",
    "/ui/admin/peers",
)


@dataclass
class Form:
    action: str
    enctype: str
    fields: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)


class _Forms(HTMLParser):
    """The POST forms of a page: their action, fields (with the page's values) and files."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []
        self._open: Form | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and a.get("method", "get").lower() == "post":
            self._open = Form(a["action"], a.get("enctype", ""))
            self.forms.append(self._open)
        elif self._open is not None and tag in ("input", "select", "textarea", "button"):
            name = a.get("name")
            if not name:
                return
            if a.get("type") == "file":
                self._open.files.append(name)
            else:
                self._open.fields.setdefault(name, a.get("value", "x"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._open = None


def forms_of(html: str) -> list[Form]:
    parser = _Forms()
    parser.feed(html)
    return parser.forms


async def _post(client: aiohttp.ClientSession, url: str, form: Form, fields: dict[str, str]) -> int:
    if form.files or form.enctype == "multipart/form-data":
        data = aiohttp.FormData()
        for k, v in fields.items():
            data.add_field(k, v)
        for name in form.files:
            data.add_field(name, "é\x00\n{not json".encode(), filename="x é\t.jsonl")
        body: object = data
    else:
        body = fields
    async with client.post(url, data=body, allow_redirects=False) as answer:
        await answer.read()
        return answer.status


def test_names_are_checked_whole() -> None:
    for bad in ("spoof\n", "spoof\r", "a\nb", "", "-x", "x" * 65, "é"):
        with pytest.raises(InputError):
            check_name(bad)
    assert check_name("team-1.a_b") == "team-1.a_b"


async def test_a_bank_name_with_a_newline_is_refused_and_exports_still_answer(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as (peer, base):
        reply = await peer.command('/memory new "spoof\n"')
        assert not reply.ok and "bad bank name" in reply.text, reply.text
        assert await peer.registry.get("bank", "spoof\n") is None
        # a bank registered under such a name before (an older version) still exports
        await peer.command("/memory new team")
        team = await peer.registry.get("bank", "team")
        assert team is not None
        await peer.registry.add("bank", "old\r\nX-Evil: 1", team.db)
        async with browser_session() as client:
            await sign_in(client, await link(peer, ADMIN, admin=True))
            async with client.get(
                f"{base}/ui/admin/banks/old%0D%0AX-Evil:%201/export.jsonl"
            ) as got:
                assert got.status == 200
                assert "X-Evil" not in got.headers
                assert got.headers["Content-Disposition"] == (
                    'attachment; filename="old__X-Evil__1.jsonl"'
                )


async def test_every_form_takes_hostile_values_without_a_500(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with serving(tmp_path) as (peer, base):
        await peer.command("/memory new team")
        await said(peer, ALICE, "plan", "ship friday")
        seen: dict[tuple[str, tuple[str, ...]], Form] = {}
        statuses: list[tuple[str, str, int]] = []
        for person, admin in ((ALICE, False), (ADMIN, True)):
            async with browser_session() as client:
                await sign_in(client, await link(peer, person, admin=admin))
                for path in PAGES if admin else PAGES[:1]:
                    async with client.get(base + path) as page:
                        assert page.status == 200, path
                        html = await page.text()
                    for form in forms_of(html):
                        if form.action == "/ui/logout":
                            continue  # posted last: it ends the session
                        seen.setdefault((form.action, tuple(sorted(form.fields))), form)
                csrf = csrf_of(html)
                for path in (*(PAGES if admin else PAGES[:1]), "/ui/admin/banks/team/export.jsonl"):
                    for value in HOSTILE_VALUES:  # and every page's query with hostile values
                        # (a URL over aiohttp's 8 KiB line is a 400 the http listener logs with
                        # a traceback: bounded logging there is another part of issue 34)
                        params = {"q": value[:1000], "page": value[:1000]}
                        async with client.get(base + path, params=params) as page:
                            await page.read()
                            statuses.append((path, "?q", page.status))
                    async with client.get(f"{base}{path}/%00%ff%0a..") as page:
                        statuses.append((path, "/odd", page.status))
                for form in list(seen.values()):
                    url = base + form.action
                    names = [*form.fields]
                    for value in HOSTILE_VALUES:
                        for name in names:  # one hostile field at a time, the rest as shown
                            fields = {**form.fields, "csrf": csrf, name: value}
                            statuses.append(
                                (form.action, name, await _post(client, url, form, fields))
                            )
                        every = {n: value for n in names}  # every field hostile
                        statuses.append((form.action, "*", await _post(client, url, form, every)))
                    for name in names:  # each field missing
                        fields = {k: v for k, v in {**form.fields, "csrf": csrf}.items()}
                        fields.pop(name)
                        statuses.append(
                            (form.action, f"-{name}", await _post(client, url, form, fields))
                        )
                    # a body that is not UTF-8, and a charset nobody knows
                    for body, ctype in (
                        (
                            b"csrf=" + csrf.encode() + b"&key=\xff\xfe&back=\xc3",
                            "application/x-www-form-urlencoded",
                        ),
                        (b"csrf=abc", "application/x-www-form-urlencoded; charset=bogus-9"),
                        (
                            b"--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--\r\n",
                            "multipart/form-data; boundary=b",
                        ),
                        (b"\xff" * 100, "multipart/form-data"),
                    ):
                        async with client.post(
                            url, data=body, headers={"Content-Type": ctype}, allow_redirects=False
                        ) as answer:
                            await answer.read()
                            statuses.append((form.action, ctype, answer.status))
                async with client.post(f"{base}/ui/logout", data={"csrf": "é" * 43}) as answer:
                    statuses.append(("/ui/logout", "csrf", answer.status))
        actions = {a for a, _, _ in statuses}
        assert {"/ui/me/forget", "/ui/me/forget-all", "/ui/admin/act", "/ui/logout"} <= actions
        assert any(a.endswith("/import") for a in actions), actions
        failed = [s for s in statuses if s[2] >= 500]
        assert not failed, failed[:10]
        # hostile values with a wrong token were refused (403), never run
        assert (await peer.command("/memory stats team")).ok
        # no traceback in the log for any of it
        crashes = [r for r in caplog.records if r.exc_info or "Error handling request" in r.message]
        assert not crashes, crashes[0].getMessage()


async def test_the_sign_in_form_takes_hostile_values(tmp_path: Path) -> None:
    async with serving(tmp_path) as (_peer, base), browser_session() as client:
        for value in HOSTILE_VALUES:
            async with client.post(f"{base}/ui/login", data={"t": value}) as answer:
                assert answer.status in (400, 403), (value, answer.status)
        async with client.post(f"{base}/ui/login", data={}) as answer:
            assert answer.status == 403
        async with client.get(f"{base}/ui/login", params={"t": "\x00é\n"}) as answer:
            assert answer.status < 500


async def test_a_cross_site_sign_in_post_is_refused(tmp_path: Path) -> None:
    async with serving(tmp_path) as (peer, base):
        url = await link(peer, ALICE)
        token = url.split("t=", 1)[1]
        for headers in (
            {"Origin": "https://evil.example"},
            {"Origin": "null"},
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site"},
            {"Origin": base, "Sec-Fetch-Site": "cross-site"},
        ):
            async with (
                browser_session() as client,
                client.post(
                    f"{base}/ui/login", data={"t": token}, headers=headers, allow_redirects=False
                ) as answer,
            ):
                assert answer.status == 403, headers
                assert "Set-Cookie" not in answer.headers
        # the link was not used up by the refused posts: the person's own browser signs in
        async with (
            browser_session() as client,
            client.post(
                f"{base}/ui/login",
                data={"t": token},
                headers={"Origin": base, "Sec-Fetch-Site": "same-origin"},
                allow_redirects=False,
            ) as answer,
        ):
            assert answer.status == 303 and "Set-Cookie" in answer.headers

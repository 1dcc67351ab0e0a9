"""The memory page over real HTTP on loopback (SPEC §10), without a browser: sign-in links
(single use, expiry, rate limit, stored hashed), sessions and sign-out, CSRF, headers and
cookie flags, escaping of hostile rows, a person's rows, admin pages refused to others, and
the ``/web`` command's DM rule. The browser tests are ``test_web_browser.py``."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chazbot.commands.web_cmds import LINK_TTL_S, LINKS_PER_WINDOW, base_url, digest, issue_link
from chazbot.commands.web_signins import WebGrant, WebSignIns
from chazbot.config import Config, parse_config
from chazbot.errors import ConfigError, InputError, Unavailable
from chazbot.memory.audience import room_audience
from chazbot.memory.rows import MAX_VALUE_BYTES
from tests.support.web import (
    ADMIN,
    ALICE,
    BOB,
    browser_session,
    csrf_of,
    link,
    mine,
    said,
    serving,
    sign_in,
)

HOSTILE = (
    '<script>alert("x")</script><a href="javascript:alert(1)">click</a><img src=x onerror=alert(2)>'
)


async def test_a_link_signs_in_once_and_sessions_end(tmp_path: Path) -> None:
    async with serving(tmp_path) as (peer, base):
        url = await link(peer, ALICE)
        secret = url.split("t=", 1)[1]
        # stored hashed: the secret itself is nowhere in the state file
        await peer.ledger.probe()
        raw = (tmp_path / "chazbot.sqlite3").read_bytes()
        wal = tmp_path / "chazbot.sqlite3-wal"
        raw += wal.read_bytes() if wal.exists() else b""
        assert secret.encode() not in raw
        assert hashlib.sha256(secret.encode()).hexdigest().encode() in raw
        async with browser_session() as client:
            answer = await sign_in(client, url)
            assert answer.status == 303 and answer.headers["Location"] == "/ui/me"
            cookie = answer.headers["Set-Cookie"]
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
            assert "Secure" not in cookie  # plain http on loopback
            assert secret not in cookie
            async with client.get(f"{base}/ui/me") as page:
                assert page.status == 200
                assert ALICE in await page.text()
                assert page.headers["Content-Security-Policy"].startswith("default-src 'self'")
                assert page.headers["X-Frame-Options"] == "DENY"
                html = await page.text()
            # a used link is refused
            async with browser_session() as other:
                again = await sign_in(other, url)
                assert again.status == 403
                assert "used already" in await again.text()
                async with other.get(f"{base}/ui/me") as page:
                    assert page.status == 401
            # sign-out ends the session; a forged sign-out without the token is refused
            async with client.post(f"{base}/ui/logout", data={}) as refused:
                assert refused.status == 403
            async with client.post(
                f"{base}/ui/logout", data={"csrf": csrf_of(html)}, allow_redirects=False
            ) as out:
                assert out.status == 200
            async with client.get(f"{base}/ui/me") as page:
                assert page.status == 401


async def test_links_expire_are_rate_limited_and_need_the_allow_list(tmp_path: Path) -> None:
    async with serving(tmp_path) as (peer, _):
        old = await issue_link(peer.ledger, peer.config, ALICE, False, time.time() - LINK_TTL_S - 1)
        async with browser_session() as client:
            assert (await sign_in(client, old)).status == 403
        for _ in range(LINKS_PER_WINDOW):  # the expired one was issued before the window
            await link(peer, ALICE)
        with pytest.raises(Unavailable, match="sign-in links in 10 minutes"):
            await link(peer, ALICE)
        await link(peer, BOB)  # another person is not held back
        # someone off the allow-list (config changed since the link was made) is refused
        url = await link(peer, "@mallory:example.org")
        async with browser_session() as client:
            answer = await sign_in(client, url)
            assert answer.status == 403 and "allow-list" in await answer.text()


async def test_a_persons_page_shows_their_rows_inert_and_forgets_through_commands(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as (peer, base):
        big = "x" * (MAX_VALUE_BYTES - len(HOSTILE)) + HOSTILE
        await said(peer, ALICE, "hostile", HOSTILE)
        await said(peer, ALICE, "big", big)
        await said(peer, ALICE, "pet", "a cat named Miso", agent="helper")
        await said(peer, BOB, "bob.secret", "Bob's own row", present=(ALICE,))
        async with browser_session() as client:
            await sign_in(client, await link(peer, ALICE))
            async with client.get(f"{base}/ui/me") as page:
                html = await page.text()
            assert "<script>" not in html and 'href="javascript:' not in html
            assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
            assert "onerror=alert(2)&gt;" in html
            assert big[:1000] in html  # the largest value a row may hold, whole
            assert "a cat named Miso" in html and "helper" in html
            assert "Bob&#39;s own row" not in html  # only what Alice said
            assert "3 rows" in html
            async with client.get(f"{base}/ui/me", params={"q": "miso"}) as page:
                found = await page.text()
            assert "1 row matching" in found and "hostile" not in found.split("<tbody>")[1]
            async with client.get(f"{base}/ui/me/export.json") as download:
                data = json.loads(await download.text())
            assert {r["key"] for r in data["rows"]} == {"hostile", "big", "pet"}
            csrf = csrf_of(html)
            # forget one, through /memory forget-mine: the command layer sees it gone
            async with client.post(
                f"{base}/ui/me/forget", data={"csrf": csrf, "key": "pet", "back": "/ui/me"}
            ) as page:
                assert "Forgot &#39;pet&#39; (1 row)" in await page.text()
            kept = await mine(peer, ALICE)
            assert "pet" not in kept and "hostile" in kept
            # a form bigger than the listener's 1 KiB default: a 256-character key
            long_key = "é" * 256
            await said(peer, ALICE, long_key, "a long key")
            async with client.post(
                f"{base}/ui/me/forget", data={"csrf": csrf, "key": long_key, "back": "/ui/me"}
            ) as page:
                assert "(1 row)" in await page.text()
            # a forged form without the token changes nothing
            async with client.post(f"{base}/ui/me/forget-all", data={"confirm": "yes"}) as bad:
                assert bad.status == 403
            async with client.post(
                f"{base}/ui/me/forget-all", data={"csrf": csrf, "confirm": "yes"}
            ) as page:
                assert "Forgot everything you said (2 rows)" in await page.text()
            # Bob's row is untouched
            assert "bob.secret" in await mine(peer, BOB)
            # an off-site redirect target is never followed
            async with client.post(
                f"{base}/ui/me/forget",
                data={"csrf": csrf, "key": "nothing", "back": "https://evil.example/"},
                allow_redirects=False,
            ) as answer:
                assert answer.headers["Location"] == "/ui/me"


async def test_admin_pages_are_for_admins_only(tmp_path: Path) -> None:
    async with serving(tmp_path) as (peer, base):
        await peer.command("/memory new team")
        paths = [
            "/ui/admin",
            "/ui/admin/agents",
            "/ui/admin/banks",
            "/ui/admin/banks/team",
            "/ui/admin/requests",
            "/ui/admin/peers",
            "/ui/admin/banks/team/export.jsonl",
        ]
        async with browser_session() as client:
            await sign_in(client, await link(peer, ALICE, admin=True))  # the config says not
            for path in paths:
                async with client.get(base + path) as page:
                    assert page.status == 403, path
            async with client.get(f"{base}/ui/me") as page:
                csrf = csrf_of(await page.text())
            async with client.post(
                f"{base}/ui/admin/act",
                data={
                    "csrf": csrf,
                    "action": "grant",
                    "bank": "team",
                    "agent": "chaz",
                    "permission": "read",
                },
            ) as page:
                assert page.status == 403
        assert "chaz" not in (await peer.command("/memory stats team")).text.split("access")[1]
        async with browser_session() as client:
            await sign_in(client, await link(peer, ADMIN, admin=True))
            for path in paths:
                async with client.get(base + path) as page:
                    assert page.status == 200, path


async def test_the_peers_page_shows_each_synced_pair(tmp_path: Path) -> None:
    from chazbot.sync.store import Remotes

    async with serving(tmp_path) as (peer, base):
        team = await peer.hosting.create_bank("team")
        await Remotes(peer.ledger).add(team, "http:127.0.0.1:9")  # sync is not running here
        async with browser_session() as client:
            await sign_in(client, await link(peer, ADMIN, admin=True))
            async with client.get(f"{base}/ui/admin/peers") as page:
                html = await page.text()
        assert "<th>Last pull</th><th>Last push</th>" in html
        row = (
            "<tr><td>team</td><td>http:127.0.0.1:9</td><td>0</td><td>0</td><td>never</td>"
            "<td>never</td><td>sync off</td><td></td></tr>"
        )
        assert row in html, html


async def test_admin_actions_run_as_commands(tmp_path: Path) -> None:
    async with serving(tmp_path) as (peer, base):
        await peer.command("/memory new team")
        await peer.agent("chaz").remember("plan", HOSTILE, bank=None)
        async with browser_session() as client:
            await sign_in(client, await link(peer, ADMIN, admin=True))
            async with client.get(f"{base}/ui/admin/banks/team") as page:
                csrf = csrf_of(await page.text())
            form = {
                "csrf": csrf,
                "action": "grant",
                "bank": "team",
                "agent": "helper",
                "permission": "write",
                "back": "/ui/admin/banks/team",
            }
            async with client.post(f"{base}/ui/admin/act", data=form) as page:
                html = await page.text()
            assert "Granted helper write on team." in html
            assert "agent helper" in html
            await peer.agent("helper").remember("launch", "friday <b>noon</b>", bank="team")
            async with client.get(f"{base}/ui/admin/banks/team", params={"q": "launch"}) as page:
                html = await page.text()
            assert "friday &lt;b&gt;noon&lt;/b&gt;" in html and "BM25" in html
            form = {
                "csrf": csrf,
                "action": "revoke",
                "bank": "team",
                "agent": "helper",
                "back": "/ui/admin/banks/team",
            }
            async with client.post(f"{base}/ui/admin/act", data=form) as page:
                assert "Revoked helper on team." in await page.text()
            stats = await peer.command("/memory stats team")
            assert peer.agent("helper").key.public not in stats.text
            # bad input: the command's one-line error, nothing changed
            form = {
                "csrf": csrf,
                "action": "grant",
                "bank": "nope",
                "agent": "helper",
                "permission": "write",
                "back": "/ui/admin/banks",
            }
            async with client.post(f"{base}/ui/admin/act", data=form) as page:
                assert "no bank or agent &#39;nope&#39;" in await page.text()


async def test_the_web_command_answers_only_in_a_dm(tmp_path: Path) -> None:
    async with serving(tmp_path) as (peer, _):
        dm = room_audience("matrix:!dm:example.org", {ALICE}, lambda u: False)
        reply = await peer.command(
            "/web", session="matrix:!dm:example.org", sender=ALICE, is_admin=False, audience=dm
        )
        assert reply.ok and "/ui/login?t=" in reply.text, reply.text
        group = room_audience("matrix:!g:example.org", {ALICE, BOB}, lambda u: False)
        reply = await peer.command(
            "/web", session="matrix:!g:example.org", sender=ALICE, is_admin=False, audience=group
        )
        assert not reply.ok and "only in a DM" in reply.text and "t=" not in reply.text
        operator = await peer.command("/web")
        assert operator.ok and "(admin" in operator.text


def test_the_link_address_comes_from_the_config(tmp_path: Path) -> None:
    def cfg(**data: object) -> Config:
        return parse_config({"state_dir": str(tmp_path), "embedding": None, **data})

    assert base_url(cfg(web={"enabled": True, "public_url": "https://chaz.example.org/"})) == (
        "https://chaz.example.org"
    )
    assert base_url(cfg(web={"enabled": True})) == "http://127.0.0.1:8766"
    with pytest.raises(InputError, match=r"web\.enabled"):
        base_url(cfg())
    with pytest.raises(InputError, match=r"set web\.public_url"):
        base_url(cfg(web={"enabled": True}, http_listen="0.0.0.0:8766"))
    with pytest.raises(ConfigError, match="pages live under /ui/"):
        cfg(web={"enabled": True, "public_url": "https://x.example.org/chaz"})


async def test_secure_cookie_behind_https(tmp_path: Path) -> None:
    async with serving(tmp_path, public_url="https://chaz.example.org") as (peer, base):
        url = (await link(peer, ALICE)).replace("https://chaz.example.org", base)
        async with browser_session() as client:
            answer = await sign_in(client, url)
            cookie = answer.headers["Set-Cookie"]
            assert cookie.startswith("__Host-chazbot_web=") and "Secure" in cookie


def test_chazbot_web_link_prints_an_operator_link(tmp_path: Path) -> None:
    """``chazbot web-link`` (no service running: it opens the state itself) prints a link
    that the service, started later on the same state, accepts once, as the operator."""
    config = tmp_path / "config.yaml"
    config.write_text(
        json.dumps(
            {
                "state_dir": str(tmp_path / "state"),
                "embedding": None,
                "web": {"enabled": True, "public_url": "http://127.0.0.1:9"},
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "chazbot.cli", "--config", str(config), "web-link"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = re.search(r"http://127\.0\.0\.1:9(/ui/login\?t=\S+)", done.stdout)
    assert found is not None, done.stdout

    async def use() -> None:
        async with serving(tmp_path / "state") as (_, base), browser_session() as client:
            answer = await sign_in(client, base + found.group(1))
            assert answer.headers["Location"] == "/ui/admin"
            async with client.get(f"{base}/ui/admin/agents") as page:
                assert page.status == 200

    asyncio.run(use())
    off = subprocess.run(
        [sys.executable, "-m", "chazbot.cli", "--state-dir", str(tmp_path / "s2"), "web-link"],
        cwd=tmp_path / "state",  # no config.yaml there: the defaults, web off
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert off.returncode == 1 and "web.enabled: true" in off.stdout + off.stderr


async def test_sessions_expire_and_a_link_is_taken_once_even_at_once(tmp_path: Path) -> None:
    async with serving(tmp_path) as (peer, _):
        store = WebSignIns(peer.ledger)
        now = int(time.time())
        await store.add_session("d" * 64, WebGrant(ALICE, False, now + 60, "c"), now)
        assert await store.session("d" * 64, now + 59) is not None
        assert await store.session("d" * 64, now + 60) is None  # expired: gone
        assert await store.session("d" * 64, now) is None
        secret = (await link(peer, BOB)).split("t=", 1)[1]
        taken = await asyncio.gather(*(store.take_link(digest(secret), now) for _ in range(8)))
        assert [t.person for t in taken if t is not None] == [BOB]


async def test_a_jsonl_file_imports_into_a_bank_once_every_line_is_checked(
    tmp_path: Path,
) -> None:
    import aiohttp

    from chazbot.transports.web.uploads import UPLOAD_MAX_BYTES
    from tests.support.waits import wait_until

    async with serving(tmp_path) as (peer, base):
        await peer.command("/memory new team")
        url = f"{base}/ui/admin/banks/team/import"

        async def exported(client: aiohttp.ClientSession) -> list[dict[str, object]]:
            async with client.get(f"{base}/ui/admin/banks/team/export.jsonl") as answer:
                return [json.loads(line) for line in (await answer.text()).splitlines()]

        async with browser_session() as client:
            await sign_in(client, await link(peer, ADMIN, admin=True))
            async with client.get(f"{base}/ui/admin/banks/team") as page:
                html = await page.text()
            assert 'enctype="multipart/form-data"' in html and 'id="import"' in html
            csrf = csrf_of(html)

            def form(data: bytes, token: str = csrf) -> aiohttp.FormData:
                posted = aiohttp.FormData()
                posted.add_field("csrf", token)
                posted.add_field("file", data, filename="rows.jsonl")
                return posted

            async def post(data: bytes, token: str = csrf) -> str:
                posted = form(data, token)
                async with client.post(url, data=posted, allow_redirects=False) as answer:
                    assert answer.status == 303, await answer.text()
                async with client.get(f"{base}/ui/admin/banks/team") as page:
                    return await page.text()

            # a bad line anywhere writes nothing, and the page names it
            bad = b'{"key": "a", "value": "one"}\n{"key": "b"\n{"value": "no key"}\n'
            html = await post(bad)
            assert "Nothing imported: 2 bad lines (line 2: not JSON" in html, html
            assert "line 3: " in html
            assert await exported(client) == []
            html = await post(b'{"key": "a", "value": "caf\xe9"}\n')
            assert "The file is not UTF-8 text (byte 26)." in html, html
            assert "The file has no rows." in await post(b"\n\n")
            # a good file: checked, then written in the background
            windows = "\ufeff" + "\r\n".join(  # as a Windows editor saves it: a BOM, CRLF
                json.dumps({"key": f"k{i}", "value": f"row {i} <b>x</b>", "tags": ["web"]})
                for i in range(250)
            )
            good = windows.encode()
            html = await post(good)
            assert "Checked 250 rows; importing into team now." in html, html

            async def written() -> bool:
                return len(await exported(client)) == 250

            await wait_until(written)
            assert {"key": "k7", "value": "row 7 <b>x</b>"}.items() <= (
                next(r for r in await exported(client) if r["key"] == "k7").items()
            )
            # one import a bank at a time; the page shows how far the running one got
            many = "\n".join(
                json.dumps({"key": f"m{i}", "value": f"many {i}"}) for i in range(30_000)
            ).encode()
            async with browser_session() as other:  # a second admin at the same moment
                await sign_in(other, await link(peer, ADMIN, admin=True))
                async with other.get(f"{base}/ui/admin/banks/team") as page:
                    other_csrf = csrf_of(await page.text())
                answers = await asyncio.gather(
                    client.post(url, data=form(many), allow_redirects=False),
                    other.post(url, data=form(many, other_csrf), allow_redirects=False),
                )
                for answer in answers:
                    answer.release()
                pages = []
                for session in (client, other):
                    async with session.get(f"{base}/ui/admin/banks/team") as page:
                        pages.append(await page.text())
            said = [
                ("Checked 30,000 rows; importing into team now." in html)
                + 2 * ("An import into team is running; wait until it is done." in html)
                for html in pages
            ]
            assert sorted(said) == [1, 2], said  # one started it, the other was told to wait
            assert re.search(r"Importing: [\d,]+ of 30,000 rows written \(started by ", pages[1])

            async def all_written() -> bool:
                return len(await exported(client)) == 250 + 30_000

            await wait_until(all_written, timeout=60)
            # no CSRF token: refused before anything is read into the bank
            async with client.post(url, data=form(good, "forged")) as answer:
                assert answer.status == 403
            # over the bound: refused whole
            big = b'{"key": "k", "value": "v"}\n' * (UPLOAD_MAX_BYTES // 27 + 2)
            async with client.post(url, data=form(big)) as answer:
                assert answer.status == 413
            assert len(await exported(client)) == 250 + 30_000
        async with browser_session() as client:  # a person who is not an admin
            await sign_in(client, await link(peer, ALICE))
            async with client.get(f"{base}/ui/me") as page:
                token = csrf_of(await page.text())
            async with client.post(url, data=form(good, token)) as answer:
                assert answer.status == 403


async def test_the_persons_page_speaks_like_a_person(tmp_path: Path) -> None:
    """#36: the Where column was a raw room id (`!U_-m7ZOrl…QL0 (a DM)`) and every value
    repeated "@alice:localhost (2026-12-04):" beside its own Key and When columns."""
    async with serving(tmp_path) as (peer, base):
        await said(
            peer, ALICE, f"{ALICE}/2026-12-04/ab12", f"{ALICE} (2026-12-04): My cat is Miso."
        )
        await said(
            peer, ALICE, "dentist", "Dr. Weber", room="matrix:!grp:example.org", present=(BOB,)
        )
        assert (await peer.command("/tz Asia/Tokyo", sender=ALICE, session="x")).ok
        async with browser_session() as client:
            await sign_in(client, await link(peer, ALICE))
            async with client.get(f"{base}/ui/me") as page:
                html = await page.text()
        body = html.split("<tbody>")[1]
        assert "your DM with chaz" in body and "a group room of 2 people" in body, body
        assert "!room:example.org" not in body and "!grp" not in body
        assert "My cat is Miso." in body and f"{ALICE} (2026-12-04): My cat" not in body


async def test_the_pages_name_the_configured_command_prefix(tmp_path: Path) -> None:
    """The pages tell a visitor how to ask for a link with the Matrix command prefix the
    config sets, never a hard-coded "!chaz" (#38); without Matrix, the operator's command."""
    async with serving(tmp_path) as (peer, base):
        matrix = peer.config.matrix
        assert matrix is not None
        peer.hosting.config = peer.config.model_copy(
            update={"matrix": matrix.model_copy(update={"command_prefix": "!bot"})}
        )
        async with browser_session() as client:
            for path in ("/ui/", "/ui/me"):
                async with client.get(base + path) as page:
                    text = await page.text()
                    assert page.status == 401, path
                    assert "“!bot web”" in text and "!chaz" not in text, path
            async with client.post(
                f"{base}/ui/login", data={"t": "spent"}, allow_redirects=False
            ) as refused:
                text = await refused.text()
                assert refused.status == 403 and "used already" in text
                assert "“!bot web”" in text and "!chaz" not in text
            await sign_in(client, await link(peer, ADMIN, admin=True))
            async with client.get(f"{base}/ui/admin") as page:
                html = await page.text()
                assert page.status == 200
                assert "!bot people allow" in html and "!chaz" not in html
        peer.hosting.config = peer.config.model_copy(update={"matrix": None})
        async with browser_session() as client, client.get(f"{base}/ui/") as page:
            text = await page.text()
            assert page.status == 401 and "chazbot web-link" in text and "!chaz" not in text


async def test_the_agents_page_shows_each_agents_memory_settings_banks_and_size(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as (peer, base):
        await peer.command("/memory new team")
        await peer.command("/memory grant team chaz write")
        await peer.command("/memory config set max_entries 7")
        await peer.command("/memory config set auto_recall_enabled false")
        await peer.agent("chaz").remember("plan", "launch is friday", bank=None)
        chaz = peer.agent("chaz")
        size = await peer.ledger.db_size(chaz.db)
        async with browser_session() as client:
            await sign_in(client, await link(peer, ADMIN, admin=True))
            async with client.get(f"{base}/ui/admin/agents") as page:
                assert page.status == 200
                html = await page.text()
        row = html.split("<td>chaz<br>", 1)[1].split("</tr>", 1)[0]
        assert f"<td>1</td><td>{size} bytes</td>" in row, row
        assert "<td>team (write)</td>" in row, row
        assert "<td>off, up to 7 rows, from every attached bank</td>" in row, row
        helper = html.split("<td>helper<br>", 1)[1].split("</tr>", 1)[0]
        assert "<td>none</td><td>on, up to 3 rows, from every attached bank</td>" in helper

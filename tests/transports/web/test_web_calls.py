"""Web actions call the command layer with typed arguments (``Call``), never quoted command
text parsed again (issue 49): a value with quotes, spaces and line breaks reaches the command
as the form gave it, through the real page on a loopback listener and a real peer."""

from __future__ import annotations

from pathlib import Path

import pytest

from chazbot.commands import TREE, Call, UsageError
from tests.support.web import (
    ADMIN,
    ALICE,
    browser_session,
    csrf_of,
    link,
    mine,
    my_page_csrf,
    said,
    serving,
    sign_in,
)

AWKWARD = [
    'it\'s "quoted"  twice',
    "line one\nline two\r\nthree",
    "' ; /memory forget-mine all",
    '\\\'"\\"',
    "tab\there   and  spaces",
    "5",
    "all",
    "key",
    "-x --flag",
]
"""Values a line would need quoting for: quotes of both kinds, runs of spaces, line breaks,
backslashes, a second command, words that are keywords of the command itself."""
ONE_LINE = [v for v in AWKWARD if not any(c in v for c in "\n\r\t")]
"""Those a row's key may be (one line)."""


def test_a_call_binds_its_values_as_given() -> None:
    for value in AWKWARD:
        command, args = TREE.bind(
            Call(("agent", "set"), {"agent": "a", "key": "system_prompt", "value": value})
        )
        assert command.path == ("agent", "set")
        assert args == {"agent": "a", "key": "system_prompt", "value": value}


def test_a_call_is_checked_as_a_line_is() -> None:
    with pytest.raises(UsageError, match="unknown command"):
        TREE.bind(Call(("memory", "nope")))
    with pytest.raises(UsageError, match="missing <bank>"):
        TREE.bind(Call(("memory", "share")))
    with pytest.raises(UsageError, match="no argument 'bogus'"):
        TREE.bind(Call(("memory", "share"), {"bank": "b", "bogus": "x"}))
    with pytest.raises(UsageError, match="permission must be one of"):
        TREE.bind(Call(("memory", "grant"), {"bank": "b", "agent": "a", "permission": "all"}))
    # choices read as a line's are (case folded)
    _, args = TREE.bind(
        Call(("memory", "grant"), {"bank": "b", "agent": "a", "permission": "READ"})
    )
    assert args["permission"] == "read"
    # an absent optional argument keeps the handler's default
    _, args = TREE.bind(Call(("memory", "import"), {"ticket": "t"}))
    assert args == {"ticket": "t"}


async def test_a_raw_argument_arrives_intact_through_a_call(tmp_path: Path) -> None:
    """A raw argument takes the rest of a line as typed, so a quoted line would have kept the
    quotes: a call hands the value over whole."""
    async with serving(tmp_path) as (peer, _):
        await peer.command("/agent new scribe")
        for value in AWKWARD:
            call = Call(
                ("agent", "set"), {"agent": "scribe", "key": "system_prompt", "value": value}
            )
            reply = await peer.command(call)
            assert reply.ok, reply.text
            assert peer.agent("scribe").config.system_prompt == value.strip()
        refused = await peer.command(Call(("agent", "set"), {"agent": "scribe"}))
        assert not refused.ok and refused.usage_error and "missing <key>" in refused.text


async def test_a_forget_form_reaches_the_command_with_its_key_intact(tmp_path: Path) -> None:
    async with serving(tmp_path) as (peer, base):
        for value in ONE_LINE:
            await said(peer, ALICE, value, f"row of {value!r}")
        await said(peer, ALICE, "keeper", "stays")
        async with browser_session() as client:
            csrf = await my_page_csrf(client, peer, base, ALICE)
            for value in ONE_LINE:
                async with client.post(
                    f"{base}/ui/me/forget", data={"csrf": csrf, "key": value, "back": "/ui/me"}
                ) as page:
                    assert "(1 row)" in await page.text(), value
        kept = await mine(peer, ALICE)
        assert "keeper" in kept and "row of" not in kept, kept


async def test_an_admin_form_reaches_the_command_with_its_values_intact(tmp_path: Path) -> None:
    async with serving(tmp_path) as (peer, base), browser_session() as client:
        await sign_in(client, await link(peer, ADMIN, admin=True))
        async with client.get(f"{base}/ui/admin/banks") as page:
            csrf = csrf_of(await page.text())
        for n, value in enumerate(AWKWARD):
            form = {
                "csrf": csrf,
                "action": "new",
                "name": f"bank{n}",
                "description": value,
                "back": "/ui/admin/banks",
            }
            async with client.post(f"{base}/ui/admin/act", data=form) as page:
                assert page.status == 200
            hosted = await peer.registry.get("bank", f"bank{n}")
            assert hosted is not None, value
            # the form's fields are stripped (as before); the inside is kept as given
            assert hosted.data.get("description") == value.strip(), value

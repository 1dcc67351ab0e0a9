"""Red team, hostile input (after issue #34): attacks no earlier test tried, each on the real
surface it enters by (a real turn on real SQLite, the control socket on a unix socket, the
CLI in a subprocess, the Markdown a reply is sent as), asserting one clear line, nothing
written, and an event loop that keeps answering (its longest gap, with generous margins).

The attacks, and what they did before the fixes of this branch:

1. A 60 KB chat message of dots (or question marks): the word rules (``words.intent``) read
   every clause on the event loop: 3.3 s for everyone's rooms. Fixed: messages over 2,000
   characters are no request in words, and the rules run on a thread.
2. The same message captured (``capture: messages``): ``worth_keeping`` took 4.5 s on the
   loop. Fixed: capture's rules run on a thread.
3. Rows of 16 KiB built as "my son is my son …", then "What is my son's name?" to a model
   without tools: the answer check (``grounding.grounded``) took 16 s on the loop. Fixed: on a
   thread, each line it reads cut to 2,000 characters.
4. A reply of 8,000 ``[`` (a model told to repeat it, or memories listed back): Python-Markdown
   took 8 s per 8,000-character part (61 s for 16,000); 4,000 nested pairs 8 s; ``1. `` x
   2,600 raised RecursionError. Fixed: too much bracket work → escaped plain text,
   RecursionError → plain text, and the Matrix bot renders on a thread.
5. config.yaml with nine levels of nine YAML aliases ("billion laughs"): ``chazbot`` hung
   (over 120 s) expanding ``${ENV}`` over 3.9e8 values. Fixed: one line, at most 100,000
   values.
6. config.yaml nested 5,000 lists deep: a RecursionError traceback. Fixed: one line.
7. A model's tool call whose arguments nest 100,000 lists deep (memory and reminder tools):
   RecursionError out of the turn. Fixed: "not valid JSON" to the model.
8. A model's tool call with 10,000 unknown arguments, or a tool name of 100 KB: a 69 KB / 100
   KB error the model read back every step. Fixed: five named and counted, names cut.
9. A control-socket request line nested 500,000 deep, or such a line among an import's (what
   ``chazbot import-file`` sends a service): no answer and a traceback. Fixed: one line; the
   service keeps answering. Also a 2 MB line, and a line never ended (held).
10. A JSONL import line nested 100,000 deep: RecursionError out of the import. Fixed: "line 1:
    not JSON (nested too deep)", nothing written.
11. Sync bodies: nested 100,000 deep, a 4,000-digit integer, duplicate keys, NaN, lone
    surrogates, NUL: one line each (held).
12. Tickets of 1 MB, 100,000 ``pr=``, RTL/NUL/lone-surrogate hosts: one line each (held).
13. Time zones ``../../etc/passwd``, ``/etc/localtime``, NUL, 10 KB: one line, nothing set
    (held).
14. Bank names with RTL overrides, zero-width spaces, NUL, a lone surrogate, 10 KB: one line,
    nothing created (held).
15. Matrix events: a 64 KB body, a formatted_body of 10,000 pills, display names with regex
    characters: routed in milliseconds (held).
16. Reminder times: 1,000-character hostile texts, and the trigger search over 60 KB (held).
17. A bank page upload of 16 MiB of ``ab`` lines (5.6 million), by an admin: split on the
    event loop (1.7 s, 530 MB), then refused line by line (62 s on a thread). Fixed: more
    than 1,000,000 lines is one line, counted before anything is split; the rest on a thread.
18. A peer (named in a ticket) answering ``307`` to another address: the sync client followed
    it, re-posting its signed request to a plain-http address it would never call itself.
    Fixed: redirects are not followed; one line naming the peer.
19. A reminder stored by another writer of the agent's database with a rule that never
    happens ("FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30"): 6.4 s of the event loop per
    ``reminders`` listing (and per look of the delivery runner). Fixed: only the rule shapes
    chazbot makes are read; anything else is no reminder.
20. A gzip bomb (60 KB inflating to 60 MB) posted to the sign-in form, which anyone may post:
    413, peak memory not grown by the inflated size (held: aiohttp stops at the form's bound).
21. A command with a 30 KB argument from anyone the bot answers (``agent``, ``memory
    forget-mine``, ``memory stats``…): the error named it whole, a 30 KB reply. Fixed: each
    line of an error cut to 600 characters.
22. ``memory search`` (anyone the bot answers, in their room's agent) over rows of 16 KiB:
    a 160 KB reply, 20 Matrix messages for one command; the model's ``recall`` 192 KB. Fixed:
    each value shows its first 2,000 characters and how many more there are.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import chazbot
from chazbot.agent.capture import capture_message
from chazbot.agent.turn import run_turn
from chazbot.commands import ERROR_LINE_CHARS
from chazbot.config import AgentConfig, Config
from chazbot.errors import InputError
from chazbot.memory.audience import room_audience
from chazbot.memory.tools import run_tool
from chazbot.memory.transfer import import_lines, parse_all
from chazbot.reminders.tools import TOOLS as REMINDER_TOOLS
from chazbot.reminders.tools import Asking, run_reminder_tool
from chazbot.reminders.when import asks_for_reminder, understand, zone
from chazbot.sync import wire
from chazbot.sync.tickets import parse_ticket
from chazbot.transports.control import ControlServer
from chazbot.transports.matrix.rules import Me, render_markdown, route, text_contents
from tests.memory.test_query_bounds import longest_gap
from tests.support.standin_chat import OneAnswer

ALICE = "@alice:example.org"
LOOP_BOUND_S = 1.0  # honest figures: tens of milliseconds
DB = "sha256:" + "ab" * 32


def one_line(text: str) -> str:
    assert text and "\n" not in text and "Traceback" not in text, text
    assert len(text) < 1_000, len(text)
    return text


def quiet(tmp_path: Path) -> Config:
    return Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])


# 1-3: the word rules and the answer check --------------------------------------------------


@pytest.mark.parametrize("unit", [".", "?", "1:"])
async def test_a_huge_message_of_punctuation_never_holds_the_loop(
    tmp_path: Path, unit: str
) -> None:
    """Attacks 1 and 2: a 60 KB message through a real turn, then captured as a message."""
    text = unit * (60_000 // len(unit))
    async with chazbot.open(tmp_path, quiet(tmp_path)) as peer:
        chaz = peer.agent("chaz")
        dm = room_audience("dm", [ALICE], lambda u: False)
        alice = chaz.memory.within(peer.hearing(chaz, ALICE, dm))
        session = await peer.session("dm")
        model = OneAnswer("Understood.")
        gap, result = await longest_gap(run_turn(peer, chaz, session, text, ALICE, model, alice))
        assert gap < LOOP_BOUND_S, gap
        assert result.ok and model.seen, result.text  # it went to the model
        gap, _ = await longest_gap(
            capture_message(chaz, session, None, "messages", text, ALICE, result.text, None, alice)
        )
        assert gap < LOOP_BOUND_S, gap


async def test_rows_built_to_slow_the_answer_check_never_hold_the_loop(tmp_path: Path) -> None:
    """Attack 3: ten rows of 16 KiB "my son is my son …", then a question about the son
    to a model without tools (the answer check runs): the loop keeps answering, and the
    reply is still checked (an answer standing on nothing is withheld)."""
    async with chazbot.open(tmp_path, quiet(tmp_path)) as peer:
        chaz = peer.agent("chaz")
        dm = room_audience("dm", [ALICE], lambda u: False)
        alice = chaz.memory.within(peer.hearing(chaz, ALICE, dm))
        planted = ("my son is my son " * 1_000)[:16_000]
        for i in range(10):
            await alice.remember(f"son/{i}", planted)
        session = await peer.session("dm")
        model = OneAnswer("Your son is called Zebedee.")
        gap, result = await longest_gap(
            run_turn(peer, chaz, session, "What is my son's name?", ALICE, model, alice)
        )
        assert gap < LOOP_BOUND_S, gap
        assert result.withheld == "Your son is called Zebedee.", result.text


# 4: Markdown ----------------------------------------------------------------------------

HOSTILE_MARKDOWN = [
    "[" * 8_000,
    "![" * 4_000,
    "[a](" * 2_000,
    "(" * 8_000,
    "[" * 4_000 + "]" * 4_000,
    "(" * 4_000 + ")" * 4_000,
    "1. " * 2_666,
    "- " * 4_000,
    "> " * 4_000,
    "[x]" * 2_666,
]


@pytest.mark.parametrize("text", HOSTILE_MARKDOWN, ids=lambda t: repr(t[:6]))
def test_a_hostile_reply_renders_in_bounded_time_and_never_raises(text: str) -> None:
    """Attack 4, one part (8,000 characters, ``MAX_PART_CHARS``): honest worst 0.43 s."""
    began = time.perf_counter()
    html = render_markdown(text)
    took = time.perf_counter() - began
    assert took < 3.0, took
    assert isinstance(html, str) and "<script" not in html


def test_a_huge_hostile_reply_is_split_and_sent_as_plain_text() -> None:
    """Attack 4, a whole 60 KB reply of ``[``: parts within Matrix's size, plain text, fast;
    an honest reply still renders its Markdown."""
    began = time.perf_counter()
    contents = text_contents("[" * 60_000, "$e", {}, ALICE)
    assert time.perf_counter() - began < 5.0
    assert len(contents) >= 8
    assert all(c["formatted_body"].startswith("<p>[[[") for c in contents)
    deep = render_markdown("1. " * 2_666)  # nested past markdown-it's maxNesting: cut there
    assert deep.startswith("<ol>") and len(deep) < 2_000
    honest = text_contents("See [the docs](https://example.org) and **this**.", "$e", {}, ALICE)
    body = honest[0]["formatted_body"]
    assert '<a href="https://example.org">the docs</a>' in body and "<strong>" in body
    escaped = render_markdown("[" * 100 + "<img src=x onerror=alert(1)>")
    assert "<img" not in escaped and "&lt;img" in escaped


# 5-6: config ----------------------------------------------------------------------------


def _cli(where: Path, *args: str, timeout: float = 60.0) -> tuple[int, str, str]:
    """``chazbot <args>`` in a subprocess, killed if it runs past ``timeout``."""
    import subprocess

    env = {**os.environ, "CHAZBOT_CONFIG": str(where / "config.yaml")}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "chazbot.cli", *args],
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"chazbot {' '.join(args)} still running after {timeout} s")
    return done.returncode, done.stdout, done.stderr


def test_a_yaml_alias_bomb_in_the_config_is_one_line(tmp_path: Path) -> None:
    """Attack 5: nine levels of nine aliases (3.9e8 values once expanded)."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    (tmp_path / "config.yaml").write_text(
        f"state_dir: {tmp_path / 's'}\n" + "\n".join(lines) + "\n"
    )
    began = time.perf_counter()
    code, out, err = _cli(tmp_path, "cmd", "/memory list")
    assert time.perf_counter() - began < 30
    assert code != 0, out
    line = one_line(err.strip())
    assert "100,000 values" in line and "config.yaml" in line, line
    assert not (tmp_path / "s").exists()  # nothing made


def test_a_config_nested_thousands_deep_is_one_line(tmp_path: Path) -> None:
    """Attack 6."""
    (tmp_path / "config.yaml").write_text(
        f"state_dir: {tmp_path / 's'}\nagents: " + "[" * 5_000 + "]" * 5_000 + "\n"
    )
    code, out, err = _cli(tmp_path, "cmd", "/memory list")
    assert code != 0, out
    line = one_line(err.strip())
    assert "nested more than" in line, line
    assert not (tmp_path / "s").exists()


# 7-8: tool arguments from the model --------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000
MEMORY_TOOLS = ["remember", "recall", "forget", "list_memory_banks"]


async def test_tool_arguments_nested_past_the_parser_are_refused_in_one_line(
    tmp_path: Path,
) -> None:
    """Attack 7: memory tools and reminder tools; nothing written."""
    async with chazbot.open(tmp_path, quiet(tmp_path)) as peer:
        chaz = peer.agent("chaz")
        before = await peer.command("/memory stats self")
        for name in MEMORY_TOOLS:
            ok, text = await run_tool(chaz.memory, MEMORY_TOOLS, name, DEEP)
            assert not ok and "not valid JSON" in one_line(text), text
        asking = Asking(peer.reminders.of(chaz.db, chaz.key), "cli", "cli", True, "UTC", None)
        for name in REMINDER_TOOLS:
            ok, text = await run_reminder_tool(asking, [name], name, DEEP)
            assert not ok and "not valid JSON" in one_line(text), text
        assert (await peer.command("/memory stats self")).text == before.text


async def test_tool_errors_stay_short_whatever_the_model_sends(tmp_path: Path) -> None:
    """Attack 8: 10,000 unknown arguments, a 100 KB tool name, a 1 MB bank name, 100,000
    tags, wrong types: one short line each, nothing written."""
    async with chazbot.open(tmp_path, quiet(tmp_path)) as peer:
        chaz = peer.agent("chaz")
        calls: list[tuple[str, Any]] = [
            ("recall", {f"a{i}": 1 for i in range(10_000)}),
            ("x" * 100_000, {}),
            ("recall", {"query": "x", "bank": "b" * 1_000_000}),
            ("remember", {"key": "k", "value": "v", "tags": ["t"] * 100_000}),
            ("remember", {"key": 5, "value": {"a": [1] * 10_000}}),
            ("remember", {"key": "k\u0000\ud800", "value": "v"}),
            ("recall", {"query": ["x"] * 1_000}),
            ("recall", {"query": "x", "limit": 10**100}),
            ("forget", {"key": "\u202e" * 10_000}),
        ]
        for name, args in calls:
            ok, text = await run_tool(chaz.memory, MEMORY_TOOLS, name, args)
            assert not ok and len(one_line(text)) < 400, (name, len(text), text[:100])
        ok, text = await run_tool(chaz.memory, MEMORY_TOOLS, "recall", {"query": "k"})
        assert ok and text.startswith("No memories found"), text


# 9: the control socket ------------------------------------------------------------------


async def _ask(path: Path, line: bytes) -> bytes:
    """What the service answers to ``line`` (b"" when it closed the connection)."""
    reader, writer = await asyncio.open_unix_connection(str(path))
    try:
        writer.write(line)
        await writer.drain()
        return await asyncio.wait_for(reader.readline(), 30)
    except ConnectionResetError:
        return b""
    finally:
        writer.close()


async def test_control_requests_nested_too_deep_or_too_long_get_one_line(tmp_path: Path) -> None:
    """Attack 9: a request line nested 500,000 deep gets one line back; a 2 MB line is dropped;
    a line never ended is closed on its deadline; the service answers the next one."""
    async with chazbot.open(tmp_path, quiet(tmp_path)) as peer:
        server = ControlServer(peer)
        server.read_timeout = 0.5
        await server.start()
        try:
            hello = json.dumps({"op": "hello"}).encode() + b"\n"
            answer = await _ask(server.path, b"[" * 500_000 + b"\n")
            reply = json.loads(answer)
            assert reply["ok"] is False and "nested too deep" in one_line(reply["text"]), reply
            assert json.loads(await _ask(server.path, hello))["agent"] == "chaz"
            assert await _ask(server.path, b"x" * 2_000_000) == b""  # past MAX_REQUEST: closed
            assert json.loads(await _ask(server.path, hello))["agent"] == "chaz"
            reader, writer = await asyncio.open_unix_connection(str(server.path))
            writer.write(b'{"op": "hel')  # and nothing more
            assert await asyncio.wait_for(reader.read(), 10) == b""
            writer.close()
            assert server.timed_out == 1 and server.open == 0
            # an import (``chazbot import-file`` beside a service) whose line nests too deep
            reader, writer = await asyncio.open_unix_connection(str(server.path), limit=1 << 22)
            request = {"op": "import", "bank": "self", "lines": 2}
            writer.write(json.dumps(request).encode() + b"\n" + b"[" * 500_000 + b"\n")
            await writer.drain()
            said = (await asyncio.wait_for(reader.read(), 30)).decode()
            writer.close()
            assert "line 1: nested too deep" in said, said[:300]
            assert json.loads(await _ask(server.path, hello))["agent"] == "chaz"
        finally:
            await server.stop()


# 10: imports -----------------------------------------------------------------------------


async def test_an_import_line_nested_too_deep_is_named_and_nothing_written(tmp_path: Path) -> None:
    """Attack 10: through the function ``chazbot import-file`` and the bank page use."""
    lines = ['{"key": "fine", "value": "a row"}', "[" * 100_000 + "]" * 100_000]
    parsed, report = parse_all(lines)
    assert not parsed and report.errors == ["line 2: not JSON (nested too deep)"]
    async with chazbot.open(tmp_path, quiet(tmp_path)) as peer:
        chaz = peer.agent("chaz")
        report = await import_lines(peer.memory, chaz.db, chaz.key, lines)
        assert report.written == 0 and report.bad_lines == 1
        ok, text = await run_tool(chaz.memory, MEMORY_TOOLS, "recall", {"query": "fine"})
        assert ok and text.startswith("No memories found"), text


# 11-16: what held ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b'{"after": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"after": ' + b"9" * 4_000 + b"}",
        b'{"after": ' + b"9" * 5_000 + b"}",
        b'{"after": 1, "after": "x"}',
        b'{"wait": NaN}',
        b'{"wait": Infinity}',
        b'{"after": 1e400}',
        b'{"\\ud800": 1, "after": "\\ud800"}',
        b'{"after": "\\u0000"}',
        b"\xff\xfe{}",
    ],
    ids=lambda b: repr(b[:14]),
)
def test_odd_sync_bodies_get_one_line(body: bytes) -> None:
    """Attack 11: what ``wire.parse`` reads every sync body with (a key's standing is checked
    before any body is read, so only a key holding read gets this far)."""
    began = time.perf_counter()
    with pytest.raises(InputError) as caught:
        wire.parse(wire.EntriesRequest, body)
    assert time.perf_counter() - began < 1.0
    one_line(str(caught.value))


@pytest.mark.parametrize(
    "text",
    [
        f"eidetica:?db={DB}" + "&pr=http:a:1" * 100_000,
        "eidetica:?" + "x" * 1_000_000,
        f"eidetica:?db={DB}&pr=http:\u202eevil\u0000:80",
        f"eidetica:?db={DB}&pr=http:\ud800:80",
        f"eidetica:?db={DB}&pr=http:{'a' * 5000}:80",
        f"eidetica:?db={DB}\u200b&pr=http:127.0.0.1:80",
    ],
    ids=lambda t: repr(t[-12:]),
)
def test_hostile_tickets_get_one_line(text: str) -> None:
    """Attack 12."""
    began = time.perf_counter()
    with pytest.raises(InputError) as caught:
        parse_ticket(text)
    assert time.perf_counter() - began < 1.0
    one_line(str(caught.value))


async def test_hostile_time_zones_are_refused_and_nothing_set(tmp_path: Path) -> None:
    """Attack 13: through ``tz`` (as a person types it) and the zone reader."""
    names = ["../../etc/passwd", "/etc/localtime", "UTC\u0000", "Europe/" + "x" * 10_000, "\ud800"]
    for name in names:
        with pytest.raises(InputError) as caught:
            zone(name)
        one_line(str(caught.value))
    async with chazbot.open(tmp_path, quiet(tmp_path)) as peer:
        for name in names[:4]:
            reply = await peer.command(f"/tz {name}", session="dm", is_admin=False, sender=ALICE)
            assert not reply.ok, reply.text
            one_line(reply.text.splitlines()[0])
        shown = await peer.command("/tz", session="dm", is_admin=False, sender=ALICE)
        assert "passwd" not in shown.text and "localtime" not in shown.text, shown.text


@pytest.mark.parametrize(
    "name",
    ["\u202elive-bank", "bank\u200b", "bank\u0000", "bank\ud800", "b" * 10_000, "ba nk", "bank\n"],
    ids=repr,
)
async def test_hostile_bank_names_are_refused_and_nothing_made(tmp_path: Path, name: str) -> None:
    """Attack 14: one line, and the list of banks unchanged."""
    async with chazbot.open(tmp_path, quiet(tmp_path)) as peer:
        before = await peer.command("/memory list")
        reply = await peer.command(f"/memory new {json.dumps(name)}")
        assert not reply.ok, reply.text
        assert len(reply.text.splitlines()[0]) < 400
        assert (await peer.command("/memory list")).text == before.text


def test_giant_matrix_events_are_routed_in_milliseconds() -> None:
    """Attack 15."""
    me = Me("@chaz:example.org", ("chaz (bot) [.*+?", "c" * 200))
    pills = '<a href="https://matrix.to/#/@x:y">x</a>' * 10_000
    events: list[dict[str, Any]] = [
        {"msgtype": "m.text", "body": "a" * 64_000},
        {"msgtype": "m.text", "body": "chaz " * 12_000},
        {"msgtype": "m.text", "body": "x", "format": "org.matrix.custom.html",
         "formatted_body": pills},
        {"msgtype": "m.text", "body": "> " * 32_000,
         "m.relates_to": {"m.in_reply_to": {"event_id": "$x"}}},
        {"msgtype": "m.text", "body": "\u202e\u200b" * 30_000, "m.mentions": {"user_ids": 5}},
    ]  # fmt: skip
    for content in events:
        began = time.perf_counter()
        route(content, me=me, prefix="!chaz", is_dm=False, command_words={"memory"})
        route(content, me=me, prefix="!chaz", is_dm=True, command_words={"memory"})
        assert time.perf_counter() - began < 1.0


@pytest.mark.parametrize("unit", ["at 9 ", "every monday at ", "9", "1:", "um 9 Uhr ", "."])
def test_reminder_times_of_hostile_text_are_read_in_bounded_time(unit: str) -> None:
    """Attack 16: on the time-reading thread, but one text must not hold it for long."""
    now, tz = datetime(2026, 12, 4, 12, tzinfo=UTC), zone("Europe/Berlin")
    began = time.perf_counter()
    asks_for_reminder(unit * (60_000 // len(unit)))
    for text in (("remind me " + unit * 1_000)[:1_000], unit * 10_000):
        try:
            understand(text, now, tz)
        except InputError as exc:
            one_line(str(exc))
    assert time.perf_counter() - began < 5.0


# 17: the bank page's JSONL upload -----------------------------------------------------------


async def test_an_upload_of_millions_of_tiny_lines_is_refused_without_holding_the_loop(
    tmp_path: Path,
) -> None:
    """Attack 17: 16 MiB of ``ab`` lines (5.6 million) to a bank's import form, by an admin:
    split on the event loop (1.7 s, 530 MB) and then refused line by line on a thread (62 s).
    Now counted first: one line on the page, the loop free, nothing written."""
    import aiohttp

    from chazbot.transports.web.import_jobs import MAX_LINES
    from chazbot.transports.web.uploads import UPLOAD_MAX_BYTES
    from tests.support.web import ADMIN, browser_session, csrf_of, link, serving, sign_in

    async with serving(tmp_path) as (peer, base):
        await peer.command("/memory new team")
        async with browser_session() as client:
            await sign_in(client, await link(peer, ADMIN, admin=True))
            async with client.get(f"{base}/ui/admin/banks/team") as page:
                csrf = csrf_of(await page.text())
            posted = aiohttp.FormData()
            posted.add_field("csrf", csrf)
            posted.add_field("file", b"ab\n" * ((UPLOAD_MAX_BYTES - 4096) // 3), filename="x.jsonl")

            async def post() -> int:
                url = f"{base}/ui/admin/banks/team/import"
                async with client.post(url, data=posted, allow_redirects=False) as answer:
                    return answer.status

            gap, status = await longest_gap(post())
            assert status == 303 and gap < LOOP_BOUND_S, (status, gap)
            async with client.get(f"{base}/ui/admin/banks/team") as page:
                html = await page.text()
            assert f"The file has more than {MAX_LINES:,} lines" in html, html[-2000:]
        stats = await peer.command("/memory stats team")
        assert "rows written   = 0" in stats.text, stats.text


# 18: a peer that answers with a redirect ---------------------------------------------------


async def test_a_peer_redirecting_elsewhere_is_not_followed(tmp_path: Path) -> None:
    """Attack 18: a peer named in a ticket answers every sync call with ``307`` to another
    address (an internal service; a plain ``http:`` one off this host, which the client
    refuses to call by itself). The client followed it, re-posting the signed body there.
    Now: one line naming the peer, and the other address never asked (issue #47: nothing of
    what it answered, the redirect included, is repeated)."""
    from aiohttp import web

    from chazbot.errors import BackendError
    from chazbot.ledger import KeyPair
    from chazbot.sync import SyncClient

    hits: list[str] = []

    async def internal(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.json_response({"error": "you should never see this"})

    async def hostile(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(f"{inside}/latest/meta-data{request.path}")

    runners: list[web.AppRunner] = []
    ports: list[int] = []
    for handler in (internal, hostile):
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        ports.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    inside = f"http://127.0.0.1:{ports[0]}"
    client = SyncClient(KeyPair.generate(), allow_private_peers=True)
    try:
        with pytest.raises(BackendError) as caught:
            await client.heads(f"http:127.0.0.1:{ports[1]}", DB)
        one_line(str(caught.value))
        assert f"http:127.0.0.1:{ports[1]}" in str(caught.value)
        assert "not a chazbot peer" in str(caught.value), caught.value
        assert hits == []
    finally:
        await client.close()
        for runner in runners:
            await runner.cleanup()


# 19: a reminder written by another writer of the agent's database ---------------------------


@pytest.mark.parametrize(
    "rule",
    [
        "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30",  # never happens: dateutil steps to year 9999
        "FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30",
        "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30",
        "FREQ=SECONDLY",  # a reminder a second
        "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0\nRRULE:FREQ=SECONDLY",
    ],
)
async def test_a_stored_reminder_with_a_rule_chazbot_never_makes_is_ignored(
    tmp_path: Path, rule: str
) -> None:
    """Attack 19: reminders are signed fields of the agent's database, so any key that may
    write it (a peer the agent's database is shared with for writing) can store one with
    any RRULE. A rule that never happens took dateutil 3-6 s per look, on the event loop, and
    every listing and the delivery runner look twice or more. Now a rule outside the shapes
    chazbot makes (daily, weekly, monthly, an interval up to 12, a weekday, a time) is read
    as no reminder; one chazbot makes still lists."""
    async with chazbot.open(tmp_path, quiet(tmp_path)) as peer:
        chaz = peer.agent("chaz")
        session = await peer.session("room")
        hostile = {
            "room": session.name,
            "by": ALICE,
            "what": "spam",
            "tz": "UTC",
            "first": "2026-12-01T09:00:00+00:00",
            "rule": rule,
            "lang": "en",
            "cancelled": False,
        }
        honest = {
            **hostile,
            "what": "water the plants",
            "rule": "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
        }
        ops = [{"op": "set", "field": "rbad", "value": hostile}]
        ops.append({"op": "set", "field": "rgood", "value": honest})
        sent = [{"op": "set", "field": f, "value": hostile["first"]} for f in ("rbad", "rgood")]
        # delivered once already (the runner's mark, or the writer's), so the rule is read
        await peer.ledger.write(chaz.db, chaz.key, {"reminders": ops, "reminders_sent": sent})
        gap, listed = await longest_gap(peer.command("/reminders", session="room"))
        assert gap < LOOP_BOUND_S, gap
        assert "water the plants" in listed.text and "spam" not in listed.text, listed.text


# 20: a compressed body ---------------------------------------------------------------------


async def test_a_gzip_bomb_posted_to_the_sign_in_form_is_refused_unread(tmp_path: Path) -> None:
    """Attack 20: ``POST /ui/login`` (open to anyone) with ``Content-Encoding: gzip``, 60 KB
    that inflate to 60 MB (aiohttp inflates request bodies itself): refused (413) with the
    process's peak memory not grown by the inflated size (held: aiohttp stops at the form's
    bound)."""
    import resource
    import zlib

    import aiohttp

    from tests.support.web import serving

    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"a" * (1 << 20)
    bomb = b"".join(squeeze.compress(chunk) for _ in range(60)) + squeeze.flush()
    assert len(bomb) < 64 * 1024
    async with serving(tmp_path) as (_peer, base):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        headers = {
            "Content-Encoding": "gzip",
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": base,
        }
        url = f"{base}/ui/login"
        async with (
            aiohttp.ClientSession() as client,
            client.post(url, data=bomb, headers=headers) as answer,
        ):
            assert answer.status == 413, answer.status
        grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        assert grew_mb < 30, grew_mb


async def test_pushed_entries_nested_too_deep_are_refused_alone(tmp_path: Path) -> None:
    """Attack 11, the entries a push carries (read by the ledger, not ``wire``): one nested
    100,000 deep and one whose ops nest so, in one batch: each refused with a one-line reason,
    nothing stored, the ledger still writes (held)."""
    deep = b"[" * 100_000 + b"]" * 100_000
    async with chazbot.open(tmp_path, quiet(tmp_path)) as peer:
        chaz = peer.agent("chaz")
        nested_ops = b'{"db": "' + chaz.db.encode() + b'", "ops": ' + deep + b"}"
        result = await peer.ledger.ingest([deep, nested_ops])
        assert len(result.rejected) == 2 and not result.accepted, result
        for _, reason in result.rejected:
            one_line(reason)
        await chaz.remember("after", "the ledger still writes")
        ok, text = await run_tool(chaz.memory, MEMORY_TOOLS, "recall", {"query": "after"})
        assert ok and "[after]" in text, text


# 21: command errors that echo what was typed ------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "/agent {x}",
        "/memory forget-mine {x}",
        "/memory stats {x}",
        "/memory detach {x}",
        "/memory search {x} {x}",
        "/reminders cancel {x}",
        "/tz {x}",
        "/help {x}",
    ],
)
async def test_a_command_error_never_echoes_a_huge_argument(tmp_path: Path, line: str) -> None:
    """Attack 21: anyone the bot answers types a command with a 30 KB argument; many errors
    named it whole (a 30 KB reply, four Matrix messages for one). Now each line of an error
    is cut to ``ERROR_LINE_CHARS`` (600)."""
    async with chazbot.open(tmp_path, quiet(tmp_path)) as peer:
        text = line.format(x="x" * 30_000)
        reply = await peer.command(text, session="room", is_admin=False, sender=ALICE)
        assert len(reply.text) < 2_000, (len(reply.text), reply.text[:100])
        assert all(len(part) <= ERROR_LINE_CHARS for part in reply.text.splitlines()), reply.text


# 22: a search that lists long rows ---------------------------------------------------------


async def test_a_search_over_long_rows_shows_a_bounded_part_of_each(tmp_path: Path) -> None:
    """Attack 22: twelve rows of 16 KiB, then ``memory search`` (anyone the bot answers may
    search their room's agent) and the model's ``recall``: 160 KB and 192 KB before (20
    Matrix messages for one command). Now each value shows its first ``SHOWN_VALUE_CHARS``
    and how much more there is; export still gives it whole."""
    from chazbot.memory.tools import SHOWN_VALUE_CHARS

    async with chazbot.open(tmp_path, quiet(tmp_path)) as peer:
        chaz = peer.agent("chaz")
        for i in range(12):
            await chaz.remember(f"long{i}", ("word " * 3_300)[:16_000])
        reply = await peer.command("/memory search self word", session="cli")
        assert reply.ok and reply.text.count("- [long") == 10, reply.text[:200]
        assert len(reply.text) < 10 * (SHOWN_VALUE_CHARS + 100), len(reply.text)
        assert "(14,000 more characters)" in reply.text
        ok, text = await run_tool(
            chaz.memory, MEMORY_TOOLS, "recall", {"query": "word", "limit": 100}
        )
        assert ok and text.count("- [long") == 12 and len(text) < 12 * (SHOWN_VALUE_CHARS + 100)
        rows = await peer.memory.view(chaz.db)
        assert all(len(r.value) == 16_000 for r in rows.visible.values())

"""Fuzzing every input from outside with hypothesis: tickets, sync request headers and bodies
(over real HTTP to a real sync server), command lines through the peer's command entry point,
tool arguments from the model, and config files. Nothing may crash, nothing may reach the
caller as a traceback, and bad input may write nothing.

``CHAZBOT_FUZZ_EXAMPLES`` sets the examples per target (default 200; ``bench/fuzz.py`` runs
10,000). The peer runs in a background event loop (``Harness``), so the targets are plain
functions that ``bench/fuzz.py`` calls too.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chazbot.config import AgentConfig, Config, load_config
from chazbot.errors import ConfigError, InputError
from chazbot.ledger import KeyPair, Permission
from chazbot.memory.tools import TOOLS, run_tool
from chazbot.peer import Peer
from chazbot.sync.protocol import (
    KEY_HEADER,
    NONCE_HEADER,
    SIGNATURE_HEADER,
    TIME_HEADER,
    sign_request,
)
from chazbot.sync.tickets import Ticket, parse_ticket

T = TypeVar("T")
EXAMPLES = int(os.environ.get("CHAZBOT_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 1000,  # the test suite is repeatable; the bench explores
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SYNC_STATUSES = {200, 400, 401, 403, 404, 408, 409, 411, 413, 429, 503}


class _Tracebacks(logging.Handler):
    """Collects log records that carry a traceback (there must be none)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.found.append(f"{record.name}: {record.getMessage()}")


class Harness:
    """A peer with its sync server, running in an event loop on a background thread."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="chazbot-fuzz-"))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.tracebacks = _Tracebacks()
        logging.getLogger("chazbot").addHandler(self.tracebacks)
        self.run(self._open())

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _open(self) -> None:
        config = Config(
            state_dir=self.dir / "state",
            sync_listen="127.0.0.1:0",
            http_listen="",
            agents=[AgentConfig(name="chaz"), AgentConfig(name="other")],
        )
        self.peer = await Peer.open(config)
        await self.peer.sync.start()
        assert self.peer.sync.server is not None
        self.port = self.peer.sync.server.port
        # a database served to ``reader``, registered under no name (commands cannot reach it)
        self.admin = KeyPair.generate()
        self.db = await self.peer.ledger.create_db(self.admin, {"name": "served"})
        await self.peer.ledger.write(
            self.db, self.admin, {"notes": [{"op": "insert", "row": {"value": "v"}}]}
        )
        self.reader = KeyPair.generate()
        await self.peer.ledger.set_auth(
            self.db, self.admin, self.reader.public, Permission.parse("write", 10)
        )
        await self.peer.sharing.share(self.db)

    def close(self) -> None:
        async def stop() -> None:
            await self.peer.sync.stop()
            await self.peer.close()

        try:
            self.run(stop())
        finally:
            logging.getLogger("chazbot").removeHandler(self.tracebacks)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def verify(self) -> list[str]:
        return [str(p) for p in self.run(self.peer.ledger.verify(), 120)]


_harness: Harness | None = None


def harness() -> Harness:
    global _harness
    if _harness is None:
        _harness = Harness()
    return _harness


def close_harness() -> None:
    global _harness
    if _harness is not None:
        _harness.close()
        _harness = None


@pytest.fixture(scope="module", autouse=True)
def _shared_harness() -> Iterator[None]:
    yield
    shutil.rmtree(Path(tempfile.gettempdir()) / f"chazbot-fuzz-config-{os.getpid()}", True)
    h = _harness
    if h is not None:
        problems = h.verify()
        found = list(h.tracebacks.found)
        close_harness()
        assert problems == [], problems
        assert found == [], found


def one_line(text: str) -> bool:
    return bool(text.strip()) and "\n" not in text.strip() and "Traceback" not in text


# ---- tickets -----------------------------------------------------------------------------

HEX = st.text("0123456789abcdef", min_size=0, max_size=70)
DB_IDS = st.one_of(
    st.just("sha256:" + "ab" * 32), st.builds(lambda h: "sha256:" + h, HEX), st.text(max_size=80)
)
ADDRESSES = st.one_of(
    st.just("http:127.0.0.1:8765"),
    st.just("http:[::1]:1"),
    st.builds(
        lambda h, p: f"http:{h}:{p}",
        st.text(max_size=30),
        st.one_of(st.integers(-5, 70000).map(str), st.text(max_size=6)),
    ),
    st.text(max_size=60),
)
TICKET_PARTS = st.one_of(
    st.builds(lambda v: "db=" + v, DB_IDS),
    st.builds(lambda v: "pr=" + v, ADDRESSES),
    st.text(max_size=40),
)
TICKETS = st.one_of(
    st.text(max_size=300),
    st.builds(
        lambda scheme, parts: scheme + "&".join(parts),
        st.sampled_from(["eidetica:?", "EIDETICA:?", "eidetica:", "", " eidetica:?"]),
        st.lists(TICKET_PARTS, max_size=6),
    ),
)


@FUZZ
@given(TICKETS)
def test_fuzz_tickets(text: str) -> None:
    try:
        ticket = parse_ticket(text)
    except InputError as exc:
        assert one_line(str(exc)), str(exc)
        return
    assert isinstance(ticket, Ticket) and ticket.addresses
    assert parse_ticket(str(ticket)) == ticket  # what we parse, we print back the same


# ---- sync requests over HTTP -----------------------------------------------------------

HEADER_TEXT = st.text(
    st.characters(min_codepoint=32, max_codepoint=126), max_size=140
)  # what an HTTP header can carry
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=20,
)
BODY_KEYS = st.sampled_from(["after", "limit", "ids", "entries", "permission", "x"])
BODIES = st.one_of(
    st.binary(max_size=300),
    st.dictionaries(BODY_KEYS, JSON_VALUES, max_size=4).map(lambda d: json.dumps(d).encode()),
    st.lists(
        st.binary(max_size=80).map(lambda b: __import__("base64").b64encode(b).decode()), max_size=5
    ).map(lambda entries: json.dumps({"entries": entries}).encode()),
    st.sampled_from(
        [b'{"after": 0}', b'{"ids": []}', b'{"permission": "read"}', b'{"entries": []}', b"{}"]
    ),
)
ENDPOINTS = st.sampled_from(["heads", "entries", "have", "push", "access", "nope", ""])
MODES = st.sampled_from(["signed", "stranger", "bogus", "unsigned", "stale"])


def _post(
    port: int, path: str, body: bytes, headers: dict[str, str], length: bool
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.putrequest("POST", path, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        if length:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            conn.send(body)  # refused before the body: the answer is waiting
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@FUZZ
@given(
    endpoint=ENDPOINTS,
    db=st.one_of(st.just("served"), DB_IDS),
    mode=MODES,
    body=BODIES,
    overrides=st.dictionaries(
        st.sampled_from([KEY_HEADER, TIME_HEADER, NONCE_HEADER, SIGNATURE_HEADER, "Content-Type"]),
        HEADER_TEXT,
        max_size=2,
    ),
    length=st.booleans(),
)
def test_fuzz_sync_requests(
    endpoint: str, db: str, mode: str, body: bytes, overrides: dict[str, str], length: bool
) -> None:
    h = harness()
    path = f"/v1/dbs/{h.db if db == 'served' else db}/{endpoint}"
    if not all(32 < ord(c) < 127 and c not in "#?%" for c in path):
        path = f"/v1/dbs/{h.db}/{endpoint}"
    now = time.time() - (400 if mode == "stale" else 0)
    key = h.reader if mode in ("signed", "stale") else KeyPair.generate()
    server = f"http:127.0.0.1:{h.port}"
    headers = (
        sign_request(key, "POST", path, body, now, server=server) if mode != "unsigned" else {}
    )
    if mode == "bogus":
        headers[KEY_HEADER] = h.reader.public
    headers.update(overrides)
    status, raw = _post(h.port, path, body, headers, length)
    assert status in SYNC_STATUSES, (status, raw[:300])
    if not length and body:
        # no Content-Length: the body bytes are a malformed next request on the stream;
        # aiohttp's parser may answer that with a plain 400 (and we log one line)
        return
    answer = json.loads(raw)
    assert isinstance(answer, dict)
    if status != 200:
        assert one_line(str(answer.get("error", ""))), answer


# ---- commands ----------------------------------------------------------------------------

COMMAND_WORDS = [
    "memory new", "memory list", "memory delete", "memory grant", "memory revoke",
    "memory share", "memory unshare", "memory import", "memory attach", "memory detach",
    "memory config", "memory config set", "memory config show", "memory config reset",
    "memory reindex", "memory forget", "memory search", "memory stats",
    "sharing requests", "sharing approve", "sharing reject", "agent", "help", "bogus",
]  # fmt: skip
ARG_WORDS = st.one_of(
    st.sampled_from(
        ["bank1", "b2", "chaz", "other", "read", "write", "admin", "0", "1", "-1", "99999999999",
         "max_entries", "auto_recall", "sha256:" + "ab" * 32, "eidetica:?db=sha256:" + "cd" * 32
         + "&pr=http:127.0.0.1:1", '"quoted', "ünïcode", ""]
    ),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=20),
)  # fmt: skip


@FUZZ
@given(
    prefix=st.sampled_from(["/", "/", "", "//", " /"]),
    words=st.sampled_from(COMMAND_WORDS),
    args=st.lists(ARG_WORDS, max_size=4),
    admin=st.booleans(),
    agent=st.sampled_from(["chaz", "other"]),
)
def test_fuzz_commands(prefix: str, words: str, args: list[str], admin: bool, agent: str) -> None:
    h = harness()
    text = prefix + " ".join([words, *args])
    reply = h.run(h.peer.command(text, agent=agent, session=f"fuzz-{agent}", is_admin=admin))
    assert isinstance(reply.text, str) and "Traceback" not in reply.text
    if not reply.ok:
        assert reply.text.strip(), text


# ---- tool arguments from the model --------------------------------------------------------

TOOL_KEYS = st.sampled_from(["key", "value", "tags", "bank", "query", "limit", "extra"])
TOOL_ARGS = st.one_of(
    st.text(max_size=200),
    st.dictionaries(TOOL_KEYS, JSON_VALUES, max_size=5).map(json.dumps),
    st.dictionaries(TOOL_KEYS, JSON_VALUES, max_size=5),
    st.fixed_dictionaries(
        {"key": st.text(max_size=300), "value": st.text(max_size=500)},
        optional={
            "tags": st.lists(st.text(max_size=30), max_size=20),
            "bank": st.text(max_size=20),
        },
    ).map(json.dumps),
)


@FUZZ
@given(name=st.one_of(st.sampled_from(sorted(TOOLS)), st.text(max_size=20)), arguments=TOOL_ARGS)
def test_fuzz_tool_arguments(name: str, arguments: str | dict[str, Any]) -> None:
    h = harness()
    agent = h.peer.agents["chaz"]

    async def call() -> tuple[bool, str, int, int]:
        before = await h.peer.ledger.count_entries(agent.db)
        ok, text = await run_tool(agent.memory, agent.config.allowed_tools, name, arguments)
        return ok, text, before, await h.peer.ledger.count_entries(agent.db)

    ok, text, before, after = h.run(call())
    assert isinstance(text, str) and text.strip() and "Traceback" not in text
    if not ok:
        assert after == before, "a refused tool call wrote to the agent's memory"


# ---- config files ----------------------------------------------------------------------------

CONFIG_KEYS = st.sampled_from(
    [*Config.model_fields, "bogus", "llm", "embedding", "matrix", "agents", "logging"]
)
CONFIG_TREES = st.dictionaries(CONFIG_KEYS, JSON_VALUES, max_size=6)
CONFIG_TEXT = st.one_of(
    CONFIG_TREES.map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
    st.text(max_size=300),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.builds(
        lambda k, v: f"{k}: {v}\n",
        CONFIG_KEYS,
        st.sampled_from(["${NOPE}", "${HOME}", "${X:-1}", "[", "{a: 1}", "- 1", "0.0.0.0:1", "''"]),
    ),
)


@FUZZ
@given(CONFIG_TEXT)
def test_fuzz_config_files(text: str) -> None:
    where = Path(tempfile.gettempdir()) / f"chazbot-fuzz-config-{os.getpid()}"
    where.mkdir(exist_ok=True)
    path = where / "config.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        assert one_line(str(exc)), str(exc)
        return
    assert isinstance(cfg, Config)


TARGETS = {
    "tickets": test_fuzz_tickets,
    "sync requests": test_fuzz_sync_requests,
    "commands": test_fuzz_commands,
    "tool arguments": test_fuzz_tool_arguments,
    "config files": test_fuzz_config_files,
}

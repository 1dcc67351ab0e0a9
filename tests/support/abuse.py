"""Helpers for the abuse tests: a real ``chazbot run`` serving a bank on loopback, a legitimate
peer syncing with it, and the small clients attackers would write. No test lives here.

Attack traffic comes from 127.0.0.2 and up (Linux routes all of 127/8 to loopback), so the
server sees it from other addresses than the legitimate peer on 127.0.0.1, as it would on a
network.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

from chazbot.ledger import KeyPair
from chazbot.sync.guard import GuardSettings
from chazbot.sync.protocol import (
    KEY_HEADER,
    NONCE_HEADER,
    PROTOCOL,
    PROTOCOL_HEADER,
    SERVER_HEADER,
    SIGNATURE_HEADER,
    TIME_HEADER,
    sign_request,
)
from tests.support.synapse import free_port
from tests.support.sync import Node, wait_until

if TYPE_CHECKING:
    from chazbot.transports.http import HttpServer


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, in KiB, from /proc/PID/status."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0])
    return out


@dataclass
class Served:
    """A ``chazbot run`` subprocess serving bank ``shared`` on ``sync_port``."""

    workdir: Path
    proc: subprocess.Popen[bytes]
    sync_port: int
    ticket: str = ""

    @property
    def address(self) -> str:
        return f"http:127.0.0.1:{self.sync_port}"

    @property
    def db(self) -> str:
        return self.ticket.split("db=")[1].split("&")[0]

    def log(self) -> str:
        return (self.workdir / "chazbot.log").read_text(errors="replace")

    def rss_kb(self) -> int:
        return proc_status(self.proc.pid)["VmRSS"]

    def peak_kb(self) -> int:
        return proc_status(self.proc.pid)["VmHWM"]

    def alive(self) -> bool:
        return self.proc.poll() is None

    async def control(self, request: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        path = self.workdir / "state" / "control.sock"
        reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 20)
        try:
            writer.write(json.dumps(request).encode() + b"\n")
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), timeout)
        finally:
            writer.close()
        reply = json.loads(line)
        assert isinstance(reply, dict)
        return reply

    async def cmd(self, text: str, timeout: float = 60.0) -> dict[str, Any]:
        return await self.control({"op": "cmd", "text": text}, timeout)

    async def remember(self, key: str, value: str) -> None:
        arguments = json.dumps({"key": key, "value": value, "bank": "shared"})
        reply = await self.control({"op": "tool", "name": "remember", "arguments": arguments})
        assert reply["ok"], reply


def fd_count(pid: int) -> int:
    """Open descriptors of a process, from /proc/PID/fd."""
    return len(os.listdir(f"/proc/{pid}/fd"))


async def start_served(workdir: Path, nofile: int | None = None, **config: Any) -> Served:
    """Start ``chazbot run`` with sync on loopback and share a bank the agent writes to
    (``nofile``: the process's descriptor limit, as ``ulimit -n``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cfg = {
        "state_dir": str(workdir / "state"),
        "sync_listen": f"127.0.0.1:{port}",
        "sync_allow_private_peers": True,  # every peer of these tests is on loopback
        "http_listen": "",
        **config,
    }
    (workdir / "config.yaml").write_text(json.dumps(cfg))
    log = open(workdir / "chazbot.log", "ab")  # noqa: SIM115 (owned by the process)
    proc = subprocess.Popen(
        [sys.executable, "-m", "chazbot.cli", "--config", str(workdir / "config.yaml"), "run"],
        cwd=workdir,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
        preexec_fn=None if nofile is None else (lambda: _limit_descriptors(nofile)),
    )
    log.close()
    served = Served(workdir, proc, port)

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"chazbot exited {proc.returncode}:\n{served.log()[-3000:]}")
        return "chazbot is running" in served.log()

    await wait_until(_true(ready), 60.0, "chazbot run to start")
    for command in ("/memory new shared", "/memory grant shared chaz write"):
        reply = await served.cmd(command)
        assert reply["ok"], reply
    reply = await served.cmd("/memory share shared")
    found = re.search(r"eidetica:\S+", reply["text"])
    assert reply["ok"] and found, reply
    served.ticket = found.group(0)
    return served


def _limit_descriptors(n: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


async def stop_served(served: Served) -> str:
    """SIGTERM and wait; return the log. The process must exit cleanly."""
    if served.alive():
        served.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(served.proc.wait, 30)
        except subprocess.TimeoutExpired:
            served.proc.kill()
            raise
    assert served.proc.returncode == 0, served.log()[-3000:]
    return served.log()


def _true(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def run() -> bool:
        return check()

    return run


async def legit_peer(served: Served, path: Path, permission: str = "read") -> Node:
    """An in-process peer that imports ``shared`` (asking, then approved by the owner)."""
    node = await Node.open(path)
    first = await node.replicator.import_db(served.ticket, permission)
    if first.status == "pending":
        reply = await served.cmd(f"/sharing approve {first.request_id}")
        assert reply["ok"], reply
        done = await node.replicator.import_db(served.ticket, permission)
        assert done.status == "done", done
    return node


async def visible_delay(served: Served, node: Node, timeout: float = 10.0) -> float:
    """Seconds from an owner's write (through the control socket) until ``node`` holds it."""
    before = await node.ledger.count_entries(served.db)
    started = time.monotonic()
    await served.remember(f"k{secrets.token_hex(4)}", "a legitimate write")

    async def arrived() -> bool:
        return await node.ledger.count_entries(served.db) > before

    await wait_until(arrived, timeout, "the owner's write to reach the peer")
    return time.monotonic() - started


@contextlib.asynccontextmanager
async def attacker(
    host: str = "127.0.0.2", limit: int = 64
) -> AsyncIterator[aiohttp.ClientSession]:
    """An HTTP client session whose connections come from ``host``."""
    connector = aiohttp.TCPConnector(local_addr=(host, 0), limit=limit, force_close=True)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=15)
    ) as session:
        yield session


async def post(
    session: aiohttp.ClientSession,
    served_address: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
) -> int:
    """POST and return the status (0 when the connection failed)."""
    url = "http://" + served_address.removeprefix("http:") + path
    try:
        async with session.post(url, data=body, headers=headers) as resp:
            await resp.read()
            return resp.status
    except (aiohttp.ClientError, OSError, TimeoutError):
        return 0


def bogus_headers(key: str, server: str) -> dict[str, str]:
    """Well-formed signature headers naming ``key`` and ``server`` (the peer address the
    request goes to), with a signature that cannot verify: the server reads the body of a
    key that holds something before it finds out."""
    return {
        PROTOCOL_HEADER: PROTOCOL,
        SERVER_HEADER: server,
        KEY_HEADER: key,
        TIME_HEADER: str(int(time.time() * 1000)),
        NONCE_HEADER: secrets.token_hex(16),
        SIGNATURE_HEADER: secrets.token_hex(64),
    }


def signed(key: KeyPair, path: str, body: bytes, server: str) -> dict[str, str]:
    """Headers signing a POST of ``body`` to ``path`` by ``key``, for the server at the peer
    address ``server``."""
    return sign_request(key, "POST", path, body, time.time(), server=server)


async def raw_request(
    host: str, port: int, head: str, body_parts: list[bytes], gap: float, source: str
) -> bytes:
    """Send a request head, then ``body_parts`` with ``gap`` seconds between them; return
    what the server answered first (possibly before the body was sent: then the rest of
    the body is not sent)."""
    reader, writer = await asyncio.open_connection(host, port, local_addr=(source, 0))
    answer = asyncio.ensure_future(reader.read(4096))
    try:
        writer.write(head.encode())
        await writer.drain()
        for part in body_parts:
            done, _ = await asyncio.wait({answer}, timeout=gap)
            if done:
                break
            writer.write(part)
            await writer.drain()
        return await asyncio.wait_for(answer, 30)
    except ConnectionError:
        return await asyncio.wait_for(answer, 5) if answer.done() else b""
    finally:
        answer.cancel()
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def head(path: str, length: int | None, headers: dict[str, str]) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return "\r\n".join(lines) + "\r\n\r\n"


class Holder:
    """A connection from ``source`` that holds the server's attention without finishing a
    request: ``prefix`` (e.g. empty lines, which HTTP lets precede a request line), then a
    request head sent one header line per ``gap`` (never finished) or, with ``body``, a
    complete ``POST`` head announcing ``body`` bytes sent one byte per ``gap``; ``tls``:
    half a TLS ClientHello instead, then nothing. ``closed`` is set once the server has
    dropped it (or refused it); with ``again`` it then connects again (``drops`` counts the
    ends) until stopped, as an attacker would."""

    def __init__(
        self,
        port: int,
        source: str,
        path: str,
        prefix: bytes = b"",
        body: int = 0,
        headers: dict[str, str] | None = None,
        again: bool = False,
        tls: bool = False,
    ) -> None:
        self.port, self.source, self.path = port, source, path
        self.prefix, self.body, self.headers = prefix, body, headers or {}
        self.again, self.tls = again, tls
        self.closed = asyncio.Event()
        self.drops = 0
        self.task: asyncio.Task[None] | None = None

    def start(self, gap: float = 0.2, rounds: int = 1000) -> Holder:
        self.task = asyncio.ensure_future(self.hold(gap, rounds))
        return self

    async def hold(self, gap: float, rounds: int) -> None:
        while True:
            await self.run(gap, rounds)
            self.drops += 1
            if not self.again:
                return
            await asyncio.sleep(0.05)

    async def run(self, gap: float, rounds: int) -> None:
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", self.port, local_addr=(self.source, 0)
            )
        except OSError:
            self.closed.set()
            return
        if self.tls:
            try:
                writer.write(HALF_HELLO)
                await reader.read(1)  # b"" once the server closes it
            except (ConnectionError, OSError):
                pass
            finally:
                self.closed.set()
                writer.close()
            return
        try:
            start = f"POST {self.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            start += "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
            if self.body:
                start += (
                    "Content-Type: application/x-www-form-urlencoded\r\n"
                    f"Content-Length: {self.body}\r\n\r\nt="
                )
            writer.write(self.prefix + start.encode())
            for n in range(rounds):
                await writer.drain()
                try:
                    if await asyncio.wait_for(reader.read(1), gap) == b"":
                        return
                except TimeoutError:
                    pass
                writer.write(b"a" if self.body else f"X-Slow-{n}: 1\r\n".encode())
        except (ConnectionError, OSError):
            return
        finally:
            self.closed.set()
            writer.close()

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()


def hold(
    port: int,
    sources: list[str],
    path: str,
    prefix: bytes = b"",
    body: int = 0,
    gap: float = 0.2,
    headers: dict[str, str] | None = None,
    again: bool = False,
    tls: bool = False,
) -> list[Holder]:
    """One ``Holder`` per entry of ``sources`` (an address repeated holds that many)."""
    return [Holder(port, s, path, prefix, body, headers, again, tls).start(gap) for s in sources]


HALF_HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
"""A TLS record header and the start of a ClientHello: a handshake begun, never finished."""


async def success_rate(call: Callable[[], Awaitable[bool]], tries: int) -> float:
    """The share of ``tries`` calls (one after the other) that succeeded."""
    ok = 0
    for _ in range(tries):
        with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
            ok += bool(await asyncio.wait_for(call(), 10))
    return ok / tries


@contextlib.asynccontextmanager
async def web_listener(state: Path, guard: GuardSettings) -> AsyncIterator[HttpServer]:
    """The http listener with the memory page on loopback, its guard's caps ``guard``."""
    from chazbot.peer import Peer
    from chazbot.transports.http import HttpServer
    from chazbot.transports.web import WebUI
    from tests.support.web import web_config

    peer = await Peer.open(web_config(state))
    server = HttpServer(peer, "127.0.0.1:0", None, WebUI(peer).mount, guard=guard)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
        await peer.close()


async def get_ok(url: str) -> bool:
    """A fresh connection's GET of ``url`` answered 200."""
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        await resp.read()
        return resp.status == 200

"""The control socket: ``chazbot cmd``, ``tool`` and ``chat`` reach a running service through it.

A unix socket ``control.sock`` in the state directory (owner-only). One JSON request per
line, one JSON reply per line. Requests (``agent`` is optional everywhere):

- ``{"op": "cmd", "text", "session", "sender"}``: a command line → ``{ok, text, usage_error}``
- ``{"op": "tool", "name", "arguments"}``: one agent tool → ``{ok, text}``
- ``{"op": "chat", "text", "session"}``: one agent turn → ``{ok, text, agent}``
- ``{"op": "hello", "session"}``: which agent answers in a session → ``{ok, agent}``
- ``export``, ``import``, ``reindex``, ``verify``, ``backup``: long jobs that stream their
  progress back (``control_ops``)

Connections are capped (a tenth of the descriptors, ``sync.guard.descriptor_budget``; past
it a newcomer is closed at once) and each must send its request line within
``READ_TIMEOUT_S``, so idle or trickling clients cannot hold descriptors the service needs.

Only the process holding the state dir's lock (``chazbot run``) serves the socket, so only
it ever replaces or removes it. When no service listens, the client side (``ask``) opens the
state directory itself, taking the lock, so a ``run`` started meanwhile refuses instead of
diverging.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from chazbot.config import Config
from chazbot.errors import BackendError, ChazError, ConflictError, InputError
from chazbot.ledger.statelock import ROLE_SERVICE, StateLocked
from chazbot.peer import Peer
from chazbot.sync.guard import descriptor_budget

log = logging.getLogger(__name__)

T = TypeVar("T")
SOCKET_NAME = "control.sock"
MAX_REQUEST = 1024 * 1024
READ_TIMEOUT_S = 30.0
"""A connection must send its request line within this (an idle one is closed)."""
SENDERS = ("cli", "terminal")
START_WAIT_S = 60.0
"""How long a client waits for a service that holds the lock but is still starting."""


def socket_path(cfg: Config) -> Path:
    return Path(cfg.state_dir) / SOCKET_NAME


def _text(request: dict[str, Any], name: str, default: str | None = None) -> str:
    value = request.get(name)
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise InputError(f"{request.get('op')} needs a {name} string")
    return value


async def handle_request(peer: Peer, request: Any) -> dict[str, Any]:
    """Answer one control request (shared by the socket and tests)."""
    from chazbot.memory.tools import run_tool

    if not isinstance(request, dict):
        raise InputError("a control request is a JSON object")
    op = request.get("op")
    agent = request.get("agent")
    if agent is not None and not isinstance(agent, str):
        raise InputError("agent must be a string")
    if op == "cmd":
        text, session = _text(request, "text"), _text(request, "session", "cli")
        sender = _text(request, "sender", "cli")
        if sender not in SENDERS:
            raise InputError(f"sender is one of {', '.join(SENDERS)}")
        reply = await peer.command(text, agent=agent, session=session, sender=sender)
        return {"ok": reply.ok, "text": reply.text, "usage_error": reply.usage_error}
    if op == "tool":
        name, arguments = _text(request, "name"), _text(request, "arguments", "{}")
        who = peer.agent(agent) if agent else next(iter(peer.agents.values()))
        ok, text = await run_tool(who.memory, who.config.allowed_tools, name, arguments)
        return {"ok": ok, "text": text}
    if op == "chat":
        text, session = _text(request, "text"), _text(request, "session", "terminal")
        sess = await peer.session(session)
        who = peer.agent(agent) if agent else await peer.session_agent(sess)
        result = await peer.chat(text, agent=who.name, session=session, sender="terminal")
        return {"ok": result.ok, "text": result.text, "agent": who.name}
    if op == "hello":
        sess = await peer.session(_text(request, "session", "terminal"))
        who = peer.agent(agent) if agent else await peer.session_agent(sess)
        return {"ok": True, "agent": who.name}
    raise InputError(f"unknown control op {str(op)[:40]!r}")


def _answers(path: Path) -> bool:
    """Whether a process accepts connections on the unix socket at ``path``."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


class ControlServer:
    """Serves control requests on the unix socket while ``chazbot run`` runs.

    Started only by the holder of the state dir's lock. A socket file left by a dead process
    is replaced; one a live process answers on is never touched. On stop the socket is
    removed only if it is still the one this server made.
    """

    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self.path = socket_path(peer.config)
        self._server: asyncio.AbstractServer | None = None
        self._inode: int | None = None
        self.max_connections = descriptor_budget(0.1)
        self.read_timeout = READ_TIMEOUT_S
        self.open = 0
        self.refused = 0
        self.timed_out = 0
        self._refusal_logged = 0.0

    async def start(self) -> None:
        if self.path.exists() or self.path.is_symlink():
            if await asyncio.to_thread(_answers, self.path):
                raise ConflictError(f"another process serves {self.path}; is a service running?")
            self.path.unlink()  # stale: its process is gone
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._serve, path=str(self.path), limit=MAX_REQUEST
            )
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        self._inode = self.path.stat().st_ino

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            if self._inode is not None and self.path.stat().st_ino == self._inode:
                self.path.unlink()
        self._inode = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from chazbot.transports.control_ops import is_streaming, serve_streaming

        if self.open >= self.max_connections:
            self.refused += 1
            now = time.monotonic()
            if now - self._refusal_logged > 60.0:
                self._refusal_logged = now
                log.warning("control socket: %d connections open; refusing more", self.open)
            writer.transport.abort()
            return
        self.open += 1
        try:
            try:
                line = await asyncio.wait_for(reader.readline(), self.read_timeout)
            except TimeoutError:
                self.timed_out += 1
                return
            try:
                request = json.loads(line)
                if is_streaming(request):  # export, import, reindex, verify, backup
                    await serve_streaming(self.peer, request, reader, writer)
                    return
                reply = await handle_request(self.peer, request)
            except (ValueError, ChazError) as exc:
                reply = {
                    "ok": False,
                    "text": f"error: {exc}" if not isinstance(exc, ChazError) else str(exc),
                }
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, asyncio.LimitOverrunError, ValueError) as exc:
            log.warning("control request failed: %s", exc)
        finally:
            self.open -= 1
            writer.close()


async def send_to_service(cfg: Config, request: dict[str, Any]) -> dict[str, Any] | None:
    """Send one request to a running service; None when no service listens."""
    path = socket_path(cfg)
    if not path.exists():
        return None
    try:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=MAX_REQUEST)
    except (ConnectionRefusedError, FileNotFoundError):
        return None
    try:
        writer.write(json.dumps(request).encode() + b"\n")
        await writer.drain()
        line = await reader.readline()
    except (ConnectionError, asyncio.LimitOverrunError, ValueError) as exc:
        raise BackendError(f"the running service failed to answer: {exc}") from exc
    finally:
        writer.close()
    return decode_reply(line, "the running service stopped before answering")


def decode_reply(line: bytes, stopped: str) -> dict[str, Any]:
    """One reply line from the service as a JSON object; ``stopped`` when the line is empty
    (the service closed the connection), a one-line BackendError when it is malformed."""
    if not line:
        raise BackendError(stopped)
    try:
        reply = json.loads(line)
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        raise BackendError("the running service sent a malformed reply")
    return reply


async def reach(cfg: Config, request: dict[str, Any], role: str) -> dict[str, Any] | Peer:
    """The running service's reply to ``request``; with no service, the peer opened here
    (holding the state dir's lock, so no service starts beside it: close it when done).

    A service that holds the lock but does not listen yet is still starting: wait for it.
    """

    async def open_here() -> Peer:
        return await Peer.open(cfg, role=role)

    return await service_or_locally(lambda: send_to_service(cfg, request), open_here)


R = TypeVar("R")
L = TypeVar("L")


async def service_or_locally(
    service: Callable[[], Awaitable[R | None]], locally: Callable[[], Awaitable[L]]
) -> R | L:
    """``service()`` when the running service answers (not None), else ``locally()`` (which
    opens the state dir, taking its lock). A service that holds the lock but does not listen
    yet is still starting: poll for its socket until ``START_WAIT_S``."""
    deadline = time.monotonic() + START_WAIT_S
    told = False
    while True:
        answered = await service()
        if answered is not None:
            return answered
        try:
            return await locally()
        except StateLocked as busy:
            if busy.role != ROLE_SERVICE or time.monotonic() > deadline:
                raise
            if not told:
                log.info("waiting for chazbot run (pid %d) to start listening", busy.pid)
                told = True
            await asyncio.sleep(0.1)  # poll for its socket


async def ask(
    cfg: Config,
    request: dict[str, Any],
    locally: Callable[[Peer], Awaitable[dict[str, Any]]],
    role: str = "cli",
) -> dict[str, Any]:
    """``request`` answered by the running service, or by ``locally(peer)`` without one."""
    found = await reach(cfg, request, role)
    if not isinstance(found, Peer):
        return found
    try:
        return await locally(found)
    finally:
        await found.close()


class ServiceChat:
    """``chazbot chat`` through a running service (see ``terminal.ChatTarget``)."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg

    async def _send(self, request: dict[str, Any]) -> dict[str, Any]:
        reply = await send_to_service(self.cfg, request)
        if reply is None:
            raise BackendError("the running service has stopped")
        return reply

    async def agent_name(self, agent: str | None, session: str) -> str:
        reply = await self._send({"op": "hello", "agent": agent, "session": session})
        if not reply.get("ok") or not isinstance(reply.get("agent"), str):
            raise InputError(str(reply.get("text") or "the service named no agent"))
        return str(reply["agent"])

    async def command(self, text: str, agent: str, session: str) -> str:
        request = {"op": "cmd", "text": text, "agent": agent, "session": session}
        return str((await self._send({**request, "sender": "terminal"}))["text"])

    async def chat(self, text: str, agent: str, session: str) -> str:
        request = {"op": "chat", "text": text, "agent": agent, "session": session}
        return str((await self._send(request))["text"])

"""The control socket: ``chazbot cmd``, ``tool`` and ``chat`` reach a running service through it.

A unix socket ``control.sock`` in the state directory (owner-only). One JSON request per
line, one JSON reply per line. Requests (``agent`` is optional everywhere):

- ``{"op": "cmd", "text", "session", "sender"}``: a command line → ``{ok, text, usage_error}``
- ``{"op": "tool", "name", "arguments", "session"}``: one agent tool → ``{ok, text}``; the
  memory tools and the reminder tools, with the operator's rights (a reminder is set in
  ``session``, default ``cli``, in the configured zone)
- ``{"op": "chat", "text", "session"}``: one agent turn → ``{ok, text, agent}``
- ``{"op": "hello", "session"}``: which agent answers in a session → ``{ok, agent}``
- ``export``, ``import``, ``reindex``, ``verify``, ``backup``: long jobs that stream their
  progress back (``control_ops``)

This module is the server; the client side (``chazbot cmd``, ``ask``, ``ServiceChat``) is
``control_client``, which both this module and ``control_ops`` use.

Connections are capped (a tenth of the descriptors, ``sync.guard.descriptor_budget``; past
it a newcomer is closed at once) and each must send its request line within
``READ_TIMEOUT_S``, so idle or trickling clients cannot hold descriptors the service needs.

Only the process holding the state dir's lock (``chazbot run``) serves the socket, so only
it ever replaces or removes it. When no service listens, the client side
(``control_client.ask``) opens the state directory itself, taking the lock, so a ``run``
started meanwhile refuses instead of diverging.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from chazbot.errors import ChazError, ConflictError, InputError
from chazbot.memory.tools import run_tool
from chazbot.peer import Peer
from chazbot.peer_hosting import Agent
from chazbot.reminders.tools import TOOLS as REMINDER_TOOLS
from chazbot.reminders.tools import Asking, run_reminder_tool
from chazbot.sync.guard import descriptor_budget
from chazbot.transports.control_client import MAX_REQUEST, socket_path
from chazbot.transports.control_ops import is_streaming, serve_streaming

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 30.0
"""A connection must send its request line within this (an idle one is closed)."""
SENDERS = ("cli", "terminal")


def _text(request: dict[str, Any], name: str, default: str | None = None) -> str:
    value = request.get(name)
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise InputError(f"{request.get('op')} needs a {name} string")
    return value


def _operator_asking(peer: Peer, who: Agent, room: str) -> Asking:
    """A reminder tool called by the operator (``chazbot tool``): their full view, no cap,
    any reminder cancellable, times read in the configured zone, set in ``room``."""
    store = peer.reminders.of(who.db, who.key)
    return Asking(store, room, "cli", True, peer.config.timezone, None)


async def handle_request(peer: Peer, request: Any) -> dict[str, Any]:
    """Answer one control request (shared by the socket and tests)."""
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
        if name in REMINDER_TOOLS:
            room = await peer.session(_text(request, "session", "cli"))
            asking = _operator_asking(peer, who, room.name)
            ok, text = await run_reminder_tool(asking, who.config.allowed_tools, name, arguments)
        else:
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
            except RecursionError:  # JSON nested past the parser's depth
                reply = {"ok": False, "text": "error: the request is nested too deep"}
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

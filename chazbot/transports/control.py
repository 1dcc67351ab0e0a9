"""The control socket: ``chazbot cmd`` and ``chazbot tool`` reach a running service through it.

A unix socket ``control.sock`` in the state directory (owner-only). One JSON request per
line, one JSON reply per line. When no service listens, the client returns None and the
caller opens the state directory itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from chazbot.config import Config
from chazbot.errors import ChazError, InputError
from chazbot.peer import Peer

log = logging.getLogger(__name__)

SOCKET_NAME = "control.sock"
MAX_REQUEST = 1024 * 1024


def socket_path(cfg: Config) -> Path:
    return Path(cfg.state_dir) / SOCKET_NAME


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
        text, session = request.get("text"), request.get("session") or "cli"
        if not isinstance(text, str) or not isinstance(session, str):
            raise InputError("cmd needs text and session strings")
        reply = await peer.command(text, agent=agent, session=session, sender="cli")
        return {"ok": reply.ok, "text": reply.text, "usage_error": reply.usage_error}
    if op == "tool":
        name, arguments = request.get("name"), request.get("arguments", "{}")
        if not isinstance(name, str) or not isinstance(arguments, str):
            raise InputError("tool needs name and arguments strings")
        who = peer.agent(agent) if agent else next(iter(peer.agents.values()))
        ok, text = await run_tool(who.memory, who.config.allowed_tools, name, arguments)
        return {"ok": ok, "text": text}
    raise InputError(f"unknown control op {str(op)[:40]!r}")


class ControlServer:
    """Serves control requests on the unix socket while ``chazbot run`` runs."""

    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self.path = socket_path(peer.config)
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._serve, path=str(self.path), limit=MAX_REQUEST
            )
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            try:
                reply = await handle_request(self.peer, json.loads(line))
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
    finally:
        writer.close()
    reply = json.loads(line)
    if not isinstance(reply, dict):
        raise ChazError("the running service sent a malformed reply")
    return reply

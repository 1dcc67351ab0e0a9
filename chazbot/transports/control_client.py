"""The client side of the control socket (``control``): where the socket is, one request
and its reply, and the choice between a running service and opening the state dir here.

``chazbot cmd``, ``tool``, ``chat`` and the long jobs (``control_ops.operate``) reach a
running ``chazbot run`` through these; with no service listening they open the state
directory themselves, taking its lock, so a ``run`` started meanwhile refuses instead of
diverging. The server (``control.ControlServer``) and ``control_ops`` both use this module;
it uses neither, and loads the peer only to open the state dir here: a client of a running
service starts in a fraction of the time (``chazbot cmd`` loaded all of chazbot, 1 s or more,
to send one line to the socket).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from chazbot.config import Config
from chazbot.errors import BackendError, InputError
from chazbot.ledger.statelock import ROLE_SERVICE, StateLocked

if TYPE_CHECKING:
    from chazbot.peer import Peer

log = logging.getLogger(__name__)

SOCKET_NAME = "control.sock"
MAX_REQUEST = 1024 * 1024
"""The longest line either side reads (a request, a reply, one streamed message)."""
START_WAIT_S = 60.0
"""How long a client waits for a service that holds the lock but is still starting."""


def socket_path(cfg: Config) -> Path:
    return Path(cfg.state_dir) / SOCKET_NAME


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
        from chazbot.peer import Peer  # here only: a client of a running service never loads it

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
    if isinstance(found, dict):
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

"""``chazbot run``: the long-running service of one peer.

Starts, in order: the peer (holding the state dir's lock, so a second ``run`` on it is
refused; state, keys, agents, default banks), the control socket, the
sync server and replicator (when ``sync_listen`` is set), the health and metrics endpoint
(when ``http_listen`` is set), and the Matrix bot (when ``matrix`` is configured). SIGTERM
and SIGINT stop everything cleanly; SIGHUP (``kill -HUP`` the service) reloads the config's
agents and default banks, as the ``agent reload`` command does (``!chaz agent reload`` in
Matrix, with the configured prefix).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from chazbot.config import Config, load_config
from chazbot.errors import ChazError
from chazbot.ledger.archive import remove_leftovers
from chazbot.ledger.statelock import ROLE_SERVICE
from chazbot.peer import Peer
from chazbot.transports.control import ControlServer
from chazbot.transports.matrix.rules import SESSION_PREFIX
from chazbot.transports.tables import FEATURE_TABLES

if TYPE_CHECKING:
    from chazbot.memory.audience import Audience
    from chazbot.transports.matrix.bot import MatrixBot

log = logging.getLogger(__name__)


class Service:
    """Everything ``chazbot run`` runs, with an orderly start and stop."""

    def __init__(self, config: Config, config_path: str | None = None) -> None:
        self.config = config
        self.config_path = config_path
        self.peer: Peer | None = None
        self._stops: list[Callable[[], Awaitable[None]]] = []
        self.stopping = asyncio.Event()
        self.matrix: MatrixBot | None = None

    async def start(self) -> Peer:
        # Holds the state dir's lock from here until stop: a second ``run`` is refused.
        peer = await Peer.open(
            self.config, role=ROLE_SERVICE, config_loader=lambda: load_config(self.config_path)
        )
        self.peer = peer
        self._stops.append(peer.close)
        for table in FEATURE_TABLES:  # each feature's own tables, made or brought up to date
            await peer.ledger.table(table)
        await asyncio.to_thread(remove_leftovers, peer.state_dir)  # of killed backups, restores
        control = ControlServer(peer)
        await control.start()
        self._stops.append(control.stop)
        for starter in (self._start_sync, self._start_http, self._start_matrix):
            await starter(peer)
        log.info(
            "chazbot is running (state %s; %s)",
            Path(self.config.state_dir).resolve(),
            await peer.describe(),
        )
        return peer

    async def _start_sync(self, peer: Peer) -> None:
        if self.config.sync_listen:
            await peer.sync.start()
            self._stops.append(peer.sync.stop)

    async def _start_http(self, peer: Peer) -> None:
        if not self.config.http_listen:
            return
        from chazbot.transports.http import HttpServer

        mount = None
        if self.config.web.enabled:
            from chazbot.transports.web import WebUI

            mount = WebUI(peer, self).mount
        server = HttpServer(peer, self.config.http_listen, self, mount)
        await server.start()
        self._stops.append(server.stop)
        if mount is not None:
            host = self.config.http_listen.rpartition(":")[0]
            matrix = self.config.matrix
            ask = f"{matrix.command_prefix} web in a DM, or " if matrix is not None else ""
            log.info(
                "memory page on http://%s:%d/ui/ (sign in: %schazbot web-link)",
                host,
                server.port,
                ask,
            )

    async def _start_matrix(self, peer: Peer) -> None:
        if self.config.matrix is None:
            return
        from chazbot.transports.matrix.bot import MatrixBot

        bot = MatrixBot(peer, self.config.matrix)
        self.matrix = bot
        await bot.start()
        self._stops.append(bot.stop)

    def room_name(self, session: str) -> str | None:
        """A session's room name as the Matrix transport knows it (for the memory page)."""
        return self.matrix.room_name(session) if self.matrix is not None else None

    async def room_audience(self, session: str) -> Audience | None:
        """Who reads a Matrix session now (for the memory page's sign-in links); None when
        the session is no Matrix room of this bot's."""
        if self.matrix is None or not session.startswith(SESSION_PREFIX):
            return None
        return await self.matrix.audience(session.removeprefix(SESSION_PREFIX))

    async def reload(self) -> None:
        """SIGHUP: what the ``agent reload`` command does (``Hosting.reload_config``: re-read
        the config, apply agents and default banks, idempotent); a bad config changes
        nothing."""
        if self.peer is None:
            return
        try:
            log.info("%s", await self.peer.hosting.reload_config())
        except ChazError as exc:
            log.error("config reload failed, keeping the old config: %s", exc)

    async def stop(self) -> None:
        while self._stops:
            stop = self._stops.pop()
            try:
                await stop()
            except Exception:
                log.exception("error while stopping")

    async def run_forever(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(self.reload()))
        try:
            await self.start()
            await self.stopping.wait()
        finally:
            if self._stops:
                log.info("stopping")
            await self.stop()
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(sig)

"""``/healthz`` and ``/metrics`` on ``http_listen``.

/healthz reports each check (Matrix sync alive, DB writable, LLM reachable) and answers 200
when all that are configured pass, 503 otherwise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from chazbot import metrics
from chazbot.errors import BackendError, ChazError

if TYPE_CHECKING:
    from chazbot.peer import Peer

log = logging.getLogger(__name__)
MATRIX_STALE_S = 90.0


def split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


class SyncCollector(Collector):
    """Sync entries sent, received and refused, read from the peer at scrape time."""

    def __init__(self, peer: Peer) -> None:
        self.peer = peer

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "chazbot_sync_entries", "Sync entries by direction", labels=["direction"]
        )
        for direction, value in self.peer.sync_counters().items():
            family.add_metric([direction], value)
        yield family


class HttpServer:
    def __init__(self, peer: Peer, listen: str, service: Any = None) -> None:
        self.peer = peer
        self.listen = listen
        self.service = service
        self._runner: web.AppRunner | None = None
        self._collector: SyncCollector | None = None
        self.port = 0

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1024)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/metrics", self.metrics)
        return app

    async def start(self) -> None:
        host, port = split_listen(self.listen)
        self._collector = SyncCollector(self.peer)
        metrics.REGISTRY.register(self._collector)
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            self._runner = None
            raise BackendError(
                f"cannot listen on http_listen {self.listen}: {exc.strerror}"
            ) from exc
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else port
        log.info("health and metrics on http://%s:%d", host, self.port)

    async def stop(self) -> None:
        if self._collector is not None:
            metrics.REGISTRY.unregister(self._collector)
            self._collector = None
        if self._runner is not None:
            await self._runner.cleanup()

    async def checks(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        try:
            await self.peer.ledger.local(
                "INSERT OR REPLACE INTO local_kv (key, value) VALUES ('healthz', ?)",
                (str(time.time()),),
            )
            out["db"] = {"ok": True}
        except Exception as exc:
            out["db"] = {"ok": False, "error": str(exc)}
        bot = getattr(self.service, "matrix", None)
        if bot is not None:
            last = getattr(bot, "last_sync_ok", None)
            alive = last is not None and time.time() - float(last) < MATRIX_STALE_S
            out["matrix"] = {
                "ok": bool(alive and getattr(bot, "healthy", True)),
                "last_sync_ok": last,
            }
        llm = self.peer.llm
        if llm is not None:
            try:
                await llm.ping()
                out["llm"] = {"ok": True}
            except ChazError as exc:
                out["llm"] = {"ok": False, "error": str(exc)}
        else:
            out["llm"] = {"ok": True, "note": "no LLM configured"}
        return out

    async def healthz(self, request: web.Request) -> web.Response:
        checks = await self.checks()
        healthy = all(c["ok"] for c in checks.values())
        return web.json_response({"ok": healthy, "checks": checks}, status=200 if healthy else 503)

    async def metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(metrics.REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

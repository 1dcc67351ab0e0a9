"""``/healthz`` and ``/metrics`` on ``http_listen``.

/healthz reports each check (Matrix sync alive, state DB answering, LLM reachable) and
answers 200 when all that are configured pass, 503 otherwise. It is unauthenticated, so it
is cheap: the answer is cached for ``HealthTiming.cache_s`` (concurrent callers share one
check; a failing answer only for ``fail_cache_s``, so a service that just became healthy, e.g.
at start once its model loaded and Matrix synced, says so at the next poll, not 5 s later),
the DB check is a read (no write per call), and the LLM probe is cached for ``llm_cache_s``.
Connections are capped per address (``MAX_PER_ADDRESS``), per IPv6 /48 and in all (a tenth
of the descriptors, a few kept for addresses holding none), must send a complete head within
10 s and keep a least rate on a body, and the oldest stalled one gives way to a newcomer from
an address holding none (``sync.guard``, as the sync port; ``guard`` overrides the caps).
A client that goes away mid-request, a refused connection
or a malformed request costs a count in ``/metrics`` (``chazbot_connections_total``, by
listener and outcome) and at most one log line a minute for each kind, never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from chazbot import metrics
from chazbot.errors import BackendError, ChazError
from chazbot.sync.guard import (
    CLIENT_GONE,
    KEEPALIVE_TIMEOUT_S,
    ConnectionGuard,
    GuardSettings,
    Notes,
    descriptor_budget,
)
from chazbot.sync.guarded import GuardedSite
from chazbot.sync.quiet_logs import OneLineLogger, quiet_failed_accepts

if TYPE_CHECKING:
    from chazbot.peer import Peer
    from chazbot.peer_sharing import SyncService

log = logging.getLogger(__name__)
MAX_PER_ADDRESS = 64


@dataclass(frozen=True)
class HealthTiming:
    """How long /healthz keeps its answers, passed in (``HttpServer(timing=)``); tests build
    their own, never flip a module global."""

    cache_s: float = 5.0
    """A healthy answer is reused this long (callers meanwhile share it)."""
    fail_cache_s: float = 0.25
    """A failing one only this long: a service that just became healthy says so at once."""
    llm_cache_s: float = 30.0
    """The LLM probe's answer is reused this long."""
    matrix_stale_s: float = 90.0
    """Matrix is unhealthy when its last good sync is older than this."""


DEFAULT_HEALTH_TIMING = HealthTiming()


def split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


class SyncCollector(Collector):
    """Sync entries sent, received and refused, sync requests refused by reason, and the
    synced pairs by state, read from the peer's sync service at scrape time."""

    def __init__(self, sync: SyncService) -> None:
        self.sync = sync

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "chazbot_sync_entries", "Sync entries by direction", labels=["direction"]
        )
        for direction, value in self.sync.counters().items():
            family.add_metric([direction], value)
        yield family
        refused = CounterMetricFamily(
            "chazbot_sync_requests_refused",
            "Sync requests the server refused, by reason",
            labels=["reason"],
        )
        for reason, value in self.sync.requests_refused().items():
            refused.add_metric([reason], value)
        yield refused
        pairs = GaugeMetricFamily(
            "chazbot_sync_pairs", "Synced (bank, peer) pairs by state", labels=["state"]
        )
        replicator = self.sync.replicator
        status = replicator.status() if replicator is not None else []
        failing = sum(p.failing for p in status)
        pairs.add_metric(["ok"], len(status) - failing)
        pairs.add_metric(["failing"], failing)
        yield pairs


class GuardCollector(Collector):
    """The connection guards' counts (this listener's and the sync port's), read at scrape
    time: ``chazbot_connections_total{listener, outcome}`` and ``chazbot_connections_open``."""

    OUTCOMES = ("refused", "evicted", "timed_out", "body_timed_out", "too_large", "aborted")

    def __init__(self, guards: Callable[[], list[ConnectionGuard]]) -> None:
        self.guards = guards

    def collect(self) -> Iterator[Metric]:
        total = CounterMetricFamily(
            "chazbot_connections",
            "Connections refused, closed by the guard (evicted for another address, no head "
            "in time, body too slow, head too large) or aborted by their client",
            labels=["listener", "outcome"],
        )
        open_now = GaugeMetricFamily(
            "chazbot_connections_open", "Connections open now", labels=["listener"]
        )
        for guard in self.guards():
            counts = guard.counts()
            for outcome in self.OUTCOMES:
                total.add_metric([guard.name, outcome], counts[outcome])
            open_now.add_metric([guard.name], counts["open"])
        yield total
        yield open_now


class HttpServer:
    def __init__(
        self,
        peer: Peer,
        listen: str,
        service: Any = None,
        mount: Callable[[web.Application], None] | None = None,
        guard: GuardSettings | None = None,
        timing: HealthTiming = DEFAULT_HEALTH_TIMING,
    ) -> None:
        self.peer = peer
        self.timing = timing
        self.mount = mount  # adds more routes (the memory page under /ui/, transports/web)
        self.listen = listen
        self.service = service
        self._runner: web.AppRunner | None = None
        self._collector: SyncCollector | None = None
        self.port = 0
        self._checked: tuple[float, dict[str, dict[str, Any]]] | None = None
        self._checking: asyncio.Future[dict[str, dict[str, Any]]] | None = None
        self._llm_checked: tuple[float, dict[str, Any]] | None = None
        self.guard = ConnectionGuard(
            "http",
            guard
            or GuardSettings(max_total=descriptor_budget(0.1), max_per_address=MAX_PER_ADDRESS),
            Notes(log),
        )
        self._guards: GuardCollector | None = None

    def guards(self) -> list[ConnectionGuard]:
        sync = self.peer.sync.server
        return [self.guard] + ([sync.guard] if sync is not None else [])

    @web.middleware
    async def _client_gone(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(request)
            return response
        except CLIENT_GONE as exc:
            self.guard.client_gone(exc)
            return web.Response(status=400, text="request aborted")

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1024, middlewares=[self._client_gone])
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/metrics", self.metrics)
        if self.mount is not None:
            self.mount(app)
        return app

    async def start(self) -> None:
        host, port = split_listen(self.listen)
        self._collector = SyncCollector(self.peer.sync)
        metrics.REGISTRY.register(self._collector)
        self._guards = GuardCollector(self.guards)
        metrics.REGISTRY.register(self._guards)
        logger = OneLineLogger("chazbot.transports.http.server", self.guard.note, CLIENT_GONE)
        logger.parent = log
        self._runner = web.AppRunner(
            self.app(), access_log=None, keepalive_timeout=KEEPALIVE_TIMEOUT_S, logger=logger
        )
        await self._runner.setup()
        quiet_failed_accepts()
        site = GuardedSite(self._runner, host, port, self.guard)
        try:
            await site.start()
        except OSError as exc:
            await self.stop()
            self._runner = None
            raise BackendError(
                f"cannot listen on http_listen {self.listen}: {exc.strerror}"
            ) from exc
        bound = [a for a in self._runner.addresses if isinstance(a, tuple)]
        self.port = int(bound[0][1]) if bound else port
        log.info("health and metrics on http://%s:%d", host, self.port)

    async def stop(self) -> None:
        if self._collector is not None:
            metrics.REGISTRY.unregister(self._collector)
            self._collector = None
        if self._guards is not None:
            metrics.REGISTRY.unregister(self._guards)
            self._guards = None
        if self._runner is not None:
            await self._runner.cleanup()

    async def checks(self) -> dict[str, dict[str, Any]]:
        """The checks, at most one run per ``timing.cache_s`` (callers meanwhile share it)."""
        now = time.monotonic()
        if self._checked is not None:
            at, last = self._checked
            ok = all(c["ok"] for c in last.values())
            if now - at < (self.timing.cache_s if ok else self.timing.fail_cache_s):
                return last
        if self._checking is None:
            self._checking = asyncio.ensure_future(self._run_checks())
        checking = self._checking
        try:
            out = await asyncio.shield(checking)
        finally:
            if self._checking is checking and checking.done():
                self._checking = None
        self._checked = (time.monotonic(), out)
        return out

    async def _run_checks(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        try:
            await self.peer.ledger.probe()
            out["db"] = {"ok": True}
        except Exception as exc:
            out["db"] = {"ok": False, "error": str(exc)}
        # the LLM first: its first probe loads an embedded model (seconds), and Matrix's state
        # is read after it, so the answer says how Matrix is now, not before the load
        llm = await self._llm_check()
        bot = getattr(self.service, "matrix", None)
        if bot is not None:
            last = getattr(bot, "last_sync_ok", None)
            alive = last is not None and time.time() - float(last) < self.timing.matrix_stale_s
            out["matrix"] = {
                "ok": bool(alive and getattr(bot, "healthy", True)),
                "last_sync_ok": last,
            }
        out["llm"] = llm
        return out

    async def _llm_check(self) -> dict[str, Any]:
        llm = self.peer.models.llm
        if llm is None:
            return {"ok": True, "note": "no LLM configured"}
        cached = self._llm_checked
        if cached is not None and time.monotonic() - cached[0] < self.timing.llm_cache_s:
            return cached[1]
        try:
            await llm.ping()
            result: dict[str, Any] = {"ok": True}
        except ChazError as exc:
            result = {"ok": False, "error": str(exc)}
        self._llm_checked = (time.monotonic(), result)
        return result

    async def healthz(self, request: web.Request) -> web.Response:
        checks = await self.checks()
        healthy = all(c["ok"] for c in checks.values())
        return web.json_response({"ok": healthy, "checks": checks}, status=200 if healthy else 503)

    async def metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(metrics.REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

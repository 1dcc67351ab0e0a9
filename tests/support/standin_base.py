"""What both OpenAI-compatible stand-ins share: a loopback aiohttp server that records every
request and can be told to fail, hang, or answer garbage, before its own rules answer."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web

from tests.support.waits import wait_until


@dataclass
class Failure:
    status: int
    headers: dict[str, str]
    body: str


@dataclass
class StandinServer:
    """Base of the stand-ins; ``url`` is the ``.../v1`` base once started."""

    api_key: str | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
        self._failures: list[Failure] = []
        self._hangs = 0
        self._raw: list[tuple[str, str]] = []  # (content type, body) answered with 200
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None

    # -- knobs ------------------------------------------------------------------------------

    def fail(
        self,
        count: int = 1,
        status: int = 500,
        retry_after: float | str | None = None,
        body: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """The next ``count`` requests get ``status`` (with Retry-After if given, seconds or an
        HTTP date; ``headers`` adds others, such as ``retry-after-ms``)."""
        text = body or json.dumps({"error": {"message": f"stand-in failure {status}"}})
        extra = dict(headers or {})
        if retry_after is not None:
            extra["Retry-After"] = (
                retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
            )
        self._failures.extend(Failure(status, extra, text) for _ in range(count))

    def hang(self, count: int = 1) -> None:
        """The next ``count`` requests get no answer until ``release()`` or teardown."""
        self._hangs += count

    def release(self) -> None:
        """Let every hanging request go (they answer 503)."""
        self._release.set()

    def malformed(self, count: int = 1, body: str = "this is not JSON {") -> None:
        """The next ``count`` requests get 200 with ``body`` as is."""
        self._raw.extend([("text/plain", body)] * count)

    def client_settings(self, **overrides: Any) -> dict[str, Any]:
        """Config values for a client of this stand-in (fast: 1 retry, 5 s timeout)."""
        values: dict[str, Any] = {
            "backend": "openai",
            "api_base": self.url,
            "api_key": self.api_key,
            "model": getattr(self, "model_name", "standin"),
            "timeout_s": 5.0,
            "max_retries": 1,
        }
        values.update(overrides)
        return values

    async def wait_for_requests(self, count: int, timeout: float = 30.0) -> None:
        """Wait until ``count`` requests have arrived."""
        await wait_until(lambda: len(self.requests) >= count, timeout, f"{count} requests")

    # -- life -------------------------------------------------------------------------------

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def start(self) -> None:
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}/v1"

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Close the port (idempotent); afterwards the backend is down."""
        self._release.set()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    # -- request handling ---------------------------------------------------------------------

    def authorised(self, request: web.Request) -> bool:
        return self.api_key is None or request.headers.get("Authorization") == (
            f"Bearer {self.api_key}"
        )

    def unauthorised(self, request: web.Request) -> web.Response:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ")
        # Like OpenAI, echo the key that was given: the client must not repeat it.
        message = f"Incorrect API key provided: {given}" if given else "Missing API key"
        return web.json_response(
            {"error": {"message": message, "type": "invalid_request_error"}}, status=401
        )

    async def receive(self, request: web.Request) -> tuple[dict[str, Any], web.Response | None]:
        """Record the request; return its body and, when a knob applies, the answer to give."""
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        if not isinstance(body, dict):
            body = {"_unparsed": body}
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        if not self.authorised(request):
            return body, self.unauthorised(request)
        if self._hangs:
            self._hangs -= 1
            await self._release.wait()
            return body, web.json_response({"error": {"message": "released"}}, status=503)
        if self._failures:
            failure = self._failures.pop(0)
            return body, web.Response(
                status=failure.status,
                text=failure.body,
                content_type="application/json",
                headers=failure.headers,
            )
        if self._raw:
            content_type, text = self._raw.pop(0)
            return body, web.Response(status=200, text=text, content_type=content_type)
        return body, None

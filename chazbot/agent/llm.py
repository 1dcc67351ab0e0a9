"""The chat model: an OpenAI-compatible chat completions client, and what every model offers.

``ChatModel`` is the one interface the turn loop talks to. ``OpenAIChat`` speaks the OpenAI
``/chat/completions`` protocol over aiohttp to any compatible endpoint (OpenAI, llama.cpp's
server, vLLM, Ollama, ...); ``LocalChat`` (in ``local_llm``) runs a tiny model in-process.
``make_llm`` picks one from the config.

Every failure of the backend is one ``BackendError`` line that names the backend by its URL
(without credentials) and never contains the API key.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import time
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import aiohttp
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
)
from yarl import URL

from chazbot.config import LLMConfig
from chazbot.errors import BackendError

log = logging.getLogger(__name__)

MAX_RETRY_AFTER_S = 30.0
"""A server's Retry-After is honoured up to this many seconds."""
MAX_BACKOFF_S = 8.0
PING_TIMEOUT_S = 10.0
_DETAIL_CHARS = 200


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for. ``arguments`` is the model's raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatResult:
    """The model's answer: text, tool calls, or both; token counts when the backend says."""

    content: str | None
    tool_calls: list[ToolCall]
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@runtime_checkable
class ChatModel(Protocol):
    """A chat model. ``messages`` and ``tools`` are in the OpenAI chat format."""

    name: str

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
    ) -> ChatResult:
        """One completion; ``model`` overrides the configured model. Raises BackendError."""
        ...

    async def ping(self) -> None:
        """A cheap check that the backend answers; raises BackendError if not."""
        ...

    async def aclose(self) -> None:
        """Release connections; the model may not be used afterwards."""
        ...


def parse_chat_response(data: Any, source: str) -> ChatResult:
    """Validate a chat completions response body and turn it into a ChatResult.

    ``source`` names the backend in the error ("LLM backend at http://..."). Arguments the
    backend gives as an object rather than JSON text (some servers do) are re-encoded.
    """

    def bad(why: str) -> BackendError:
        return BackendError(f"{source} returned an unexpected response: {why}")

    if not isinstance(data, dict):
        raise bad("the body is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise bad("no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise bad("the first choice has no message")
    content = message.get("content")
    if isinstance(content, list):  # content parts: keep the text ones
        content = "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    if content is not None and not isinstance(content, str):
        raise bad("the message content is not text")

    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise bad("tool_calls is not a list")
    calls: list[ToolCall] = []
    for index, raw in enumerate(raw_calls):
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict):
            raise bad(f"tool call {index} has no function")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise bad(f"tool call {index} has no function name")
        arguments = function.get("arguments")
        if arguments is None:
            arguments = "{}"
        elif not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        call_id = raw.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = f"call_{index}"
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments))

    usage = data.get("usage")
    prompt_tokens = completion_tokens = None
    if isinstance(usage, dict):
        pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
        prompt_tokens = pt if isinstance(pt, int) and not isinstance(pt, bool) else None
        completion_tokens = ct if isinstance(ct, int) and not isinstance(ct, bool) else None
    return ChatResult(
        content=content,
        tool_calls=calls,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )


def public_url(api_base: str) -> str:
    """``api_base`` as it may be shown: no user, password, query or fragment."""
    try:
        url = URL(api_base)
        return str(url.with_user(None).with_query(None).with_fragment(None)).rstrip("/")
    except (ValueError, TypeError):
        return "(unparseable URL)"


class _Retryable(Exception):
    """A failure worth another attempt; ``message`` is the BackendError text if none is left."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


def _retry_after_s(value: str | None) -> float | None:
    """Retry-After as seconds: a number of seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


class OpenAIChat:
    """Any OpenAI-compatible chat completions endpoint, over one lazily opened aiohttp session.

    429, 5xx, connection errors and timeouts are retried ``cfg.max_retries`` times with
    exponential backoff from ``backoff_base_s`` (a server's Retry-After wins, capped at
    ``MAX_RETRY_AFTER_S``); everything else fails at once.
    """

    supports_tools = True

    def __init__(self, cfg: LLMConfig, *, backoff_base_s: float = 0.5) -> None:
        self.cfg = cfg
        self.name = cfg.model
        self._base = cfg.api_base.rstrip("/")
        self._shown = public_url(cfg.api_base)
        self._backoff_base_s = backoff_base_s
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        return f"OpenAIChat(api_base={self._shown!r}, model={self.cfg.model!r})"

    # -- plumbing ---------------------------------------------------------------------------

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"User-Agent": "chazbot", "Accept": "application/json"}
            if self.cfg.api_key:
                headers["Authorization"] = f"Bearer {self.cfg.api_key}"
            self._session = aiohttp.ClientSession(headers=headers)
        return self._session

    def _scrub(self, text: str) -> str:
        """One line of server text, short, with the API key (if it is echoed) blanked out."""
        text = " ".join(text.split())
        if self.cfg.api_key:
            text = text.replace(self.cfg.api_key, "***")
        if len(text) > _DETAIL_CHARS:
            text = text[:_DETAIL_CHARS] + "..."
        return text

    def _detail(self, body: str) -> str:
        """The server's error message from a body (``{"error": {"message": ...}}`` or text)."""
        try:
            data = json.loads(body)
        except ValueError:
            return self._scrub(body)
        if isinstance(data, dict):
            error = data.get("error", data.get("detail", data.get("message")))
            if isinstance(error, dict):
                error = error.get("message", error)
            if error is not None:
                return self._scrub(error if isinstance(error, str) else json.dumps(error))
        return self._scrub(body)

    def _status_error(self, status: int, body: str, model: str) -> BackendError:
        where = f"LLM backend at {self._shown}"
        detail = self._detail(body)
        suffix = f": {detail}" if detail else ""
        if status in (401, 403):
            if not self.cfg.api_key:
                return BackendError(f"{where} requires an API key (HTTP {status}); set llm.api_key")
            return BackendError(f"{where} rejected the API key (HTTP {status})")
        if status == 404:
            return BackendError(
                f"{where} answered 404 for model {model!r} (unknown model, or api_base lacks "
                f"the /v1 part?){suffix}"
            )
        return BackendError(f"{where} refused the request (HTTP {status}){suffix}")

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            return min(exc.retry_after, MAX_RETRY_AFTER_S)
        base: float = self._backoff_base_s * 2.0 ** (state.attempt_number - 1)
        return min(base, MAX_BACKOFF_S) + random.uniform(0, self._backoff_base_s / 2)

    @staticmethod
    def _log_retry(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        sleep = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning("LLM request failed (%s); retry %d in %.1f s", exc, state.attempt_number, sleep)

    async def _post_once(self, body: dict[str, Any], model: str) -> Any:
        where = f"LLM backend at {self._shown}"
        timeout = aiohttp.ClientTimeout(total=self.cfg.timeout_s)
        try:
            async with self._session_now().post(
                f"{self._base}/chat/completions", json=body, timeout=timeout
            ) as resp:
                text = await resp.text(errors="replace")
                if resp.status == 429:
                    raise _Retryable(
                        f"{where} is rate limiting (HTTP 429): {self._detail(text)}",
                        _retry_after_s(resp.headers.get("Retry-After")),
                    )
                if resp.status >= 500:
                    raise _Retryable(
                        f"{where} failed (HTTP {resp.status}): {self._detail(text)}",
                        _retry_after_s(resp.headers.get("Retry-After")),
                    )
                if resp.status >= 400:
                    raise self._status_error(resp.status, text, model)
        except TimeoutError as exc:
            raise _Retryable(f"{where} did not answer within {self.cfg.timeout_s:g} s") from exc
        except aiohttp.ClientError as exc:
            reason = self._scrub(str(exc) or type(exc).__name__)
            raise _Retryable(f"{where} is unreachable: {reason}") from exc
        try:
            return json.loads(text)
        except ValueError as exc:
            raise BackendError(f"{where} returned a body that is not JSON") from exc

    # -- ChatModel --------------------------------------------------------------------------

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
    ) -> ChatResult:
        """POST ``/chat/completions`` (retrying what is worth retrying) and parse the answer."""
        model = model or self.cfg.model
        body: dict[str, Any] = {"model": model, "messages": messages}
        if tools:
            body["tools"] = tools
        if self.cfg.max_tokens is not None:
            body["max_tokens"] = self.cfg.max_tokens
        if self.cfg.temperature is not None:
            body["temperature"] = self.cfg.temperature
        attempts = self.cfg.max_retries + 1
        retrying = AsyncRetrying(
            stop=stop_after_attempt(attempts),
            wait=self._wait,
            retry=retry_if_exception_type(_Retryable),
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            data: Any = await retrying(self._post_once, body, model)
        except _Retryable as exc:
            tries = f" (after {attempts} attempts)" if attempts > 1 else ""
            raise BackendError(f"{exc.message}{tries}") from exc
        return parse_chat_response(data, f"LLM backend at {self._shown}")

    async def ping(self) -> None:
        """GET ``/models``: any answer but 401/403/5xx means the backend is there.

        A 404 counts as reachable: some compatible servers have no ``/models``.
        """
        where = f"LLM backend at {self._shown}"
        timeout = aiohttp.ClientTimeout(total=min(self.cfg.timeout_s, PING_TIMEOUT_S))
        try:
            async with self._session_now().get(f"{self._base}/models", timeout=timeout) as resp:
                text = await resp.text(errors="replace")
                if resp.status in (401, 403):
                    raise self._status_error(resp.status, text, self.cfg.model)
                if resp.status >= 500:
                    raise BackendError(f"{where} failed (HTTP {resp.status}): {self._detail(text)}")
        except TimeoutError as exc:
            raise BackendError(f"{where} did not answer within {timeout.total:g} s") from exc
        except aiohttp.ClientError as exc:
            reason = self._scrub(str(exc) or type(exc).__name__)
            raise BackendError(f"{where} is unreachable: {reason}") from exc

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def make_llm(cfg: LLMConfig | None) -> ChatModel | None:
    """The chat model for a config.

    No ``llm`` section means the embedded local model if the ``local`` extra is installed,
    else None (the caller answers chat with a "no LLM configured" hint). ``backend: local``
    without the extra is a BackendError naming the extra to install.
    """
    from chazbot.agent import local_llm

    if cfg is None:
        if not local_llm.local_available():
            return None
        return local_llm.LocalChat(LLMConfig(backend="local"))
    if cfg.backend == "local":
        local_llm.require_local()
        return local_llm.LocalChat(cfg)
    return OpenAIChat(cfg)


__all__ = [
    "ChatModel",
    "ChatResult",
    "OpenAIChat",
    "ToolCall",
    "make_llm",
    "parse_chat_response",
    "public_url",
]

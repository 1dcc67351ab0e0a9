"""``OpenAIChat``: the chat model behind any OpenAI-compatible ``/chat/completions`` endpoint
(OpenAI, llama.cpp's server, vLLM, Ollama, ...).

HTTP, retries, Retry-After, key redaction and error wording are the shared
:class:`~chazbot.backends.openai_compat.OpenAICompatClient`'s; this module builds the request
body and parses the answer.
"""

from __future__ import annotations

from typing import Any

from chazbot.agent.chat_model import ChatResult, parse_chat_response
from chazbot.backends.openai_compat import DEFAULT_BACKOFF, OpenAICompatClient, public_url
from chazbot.backends.retry import Backoff, Sleep
from chazbot.config import LLMConfig


class OpenAIChat:
    """Any OpenAI-compatible chat completions endpoint, over one lazily opened session.

    429, 5xx, connection errors and timeouts are retried ``cfg.max_retries`` times with
    ``backoff``'s exponential backoff (a server's Retry-After wins, capped); everything else
    fails at once. ``sleep`` is for tests' fake clocks.
    """

    supports_tools = True
    composes = True

    def __init__(
        self, cfg: LLMConfig, *, backoff: Backoff = DEFAULT_BACKOFF, sleep: Sleep | None = None
    ) -> None:
        self.cfg = cfg
        self.name = cfg.model
        self.vision = cfg.vision  # the model takes image content parts (#39)
        self._http = OpenAICompatClient.for_endpoint(cfg, "LLM backend", "llm", backoff, sleep)

    def __repr__(self) -> str:
        return f"OpenAIChat({self._http.where!r}, model={self.cfg.model!r})"

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
        data = await self._http.post_json("/chat/completions", body, model=model)
        return parse_chat_response(data, self._http.where)

    def describe(self) -> str:
        return f"{self.name} at {public_url(self.cfg.api_base)}"

    def with_model(self, model: str, offered_only: bool) -> OpenAIChat:
        """This one: the endpoint takes an agent's model per request."""
        return self

    async def ping(self) -> None:
        """GET ``/models``: any answer but 401/403/5xx means the backend is there."""
        await self._http.ping("/models")

    async def models(self) -> list[str] | None:
        """The model ids ``/models`` lists, or None when the server has no list."""
        return await self._http.model_ids("/models")

    async def aclose(self) -> None:
        await self._http.aclose()


__all__ = ["OpenAIChat"]

"""What every chat model offers the turn loop: the ``ChatModel`` protocol and its results.

Both backends build on this module (``openai_chat``: any OpenAI-compatible
``/chat/completions`` endpoint; ``local_llm``: the embedded llama.cpp model) and ``llm.make_llm``
above them picks one from the config. Nothing here does I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from chazbot.errors import BackendError


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
    """A chat model. ``messages`` and ``tools`` are in the OpenAI chat format.

    What it can do is declared here, never probed: ``supports_tools`` (it calls the tools it
    is offered; the embedded models do not), ``vision`` (it takes image content parts, #39)."""

    name: str

    @property
    def supports_tools(self) -> bool: ...

    @property
    def vision(self) -> bool: ...

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

    def describe(self) -> str:
        """Which model and where, for the start line (``qwen2.5 at https://…``)."""
        ...

    def with_model(self, model: str, offered_only: bool) -> ChatModel | None:
        """The chat model that answers an agent whose own ``model`` is set (``/agent set``):
        this one when the backend takes the model per request (``complete(model=…)``), else
        a new one of that model (the caller keeps it). ``offered_only`` (a model set from
        chat): None when the operator does not offer it (nothing is fetched)."""
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


__all__ = ["ChatModel", "ChatResult", "ToolCall", "parse_chat_response"]

"""A chat model inside the test process (no server): it always says ``reply`` and keeps the
messages it was sent. ``tools`` is its ``supports_tools`` (False: as the embedded models).
For tests of what the turn does around the model; the OpenAI-compatible server is
``standin_llm``. It is a whole ``ChatModel``, so mypy checks the calls it is passed to."""

from __future__ import annotations

from typing import Any

from chazbot.agent.chat_model import ChatModel, ChatResult


class OneAnswer:
    def __init__(self, reply: str = "Biscuit.", tools: bool = False) -> None:
        self.name = "one-answer"
        self.reply, self.supports_tools, self.vision = reply, tools, False
        self.seen: list[list[dict[str, Any]]] = []

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
    ) -> ChatResult:
        self.seen.append(messages)
        return ChatResult(content=self.reply, tool_calls=[])

    async def ping(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def describe(self) -> str:
        return f"{self.name} (a test stand-in)"

    def with_model(self, model: str, offered_only: bool) -> ChatModel | None:
        return self


__all__ = ["OneAnswer"]

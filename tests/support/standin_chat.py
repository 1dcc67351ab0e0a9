"""Chat models inside the test process (no server), for tests of what the turn does around
the model; the OpenAI-compatible server is ``standin_llm``. Each is a whole ``ChatModel``, so
mypy checks the calls it is passed to.

``Scripted`` gives its ``answers`` in turn (a ``BackendError`` among them is raised), then
``reply`` for ever, and keeps the messages and the tools it was sent; ``tools``, ``vision``
and ``composes`` are what it declares it can do. ``OneAnswer`` always says ``reply`` (``tools``
False: as the embedded models)."""

from __future__ import annotations

from typing import Any

from chazbot.agent.chat_model import ChatModel, ChatResult
from chazbot.errors import BackendError


class Scripted:
    def __init__(
        self,
        *answers: ChatResult | BackendError,
        reply: str = "Done.",
        tools: bool = True,
        vision: bool = False,
        composes: bool = True,
    ) -> None:
        self.name = "scripted"
        self.reply, self.supports_tools, self.vision = reply, tools, vision
        self.composes = composes
        self.answers = list(answers)
        self.seen: list[list[dict[str, Any]]] = []
        self.offered: list[list[dict[str, Any]] | None] = []

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
    ) -> ChatResult:
        self.seen.append(list(messages))
        self.offered.append(tools)
        answer = self.answers.pop(0) if self.answers else ChatResult(self.reply, [])
        if isinstance(answer, BackendError):
            raise answer
        return answer

    async def ping(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def describe(self) -> str:
        return f"{self.name} (a test stand-in)"

    def with_model(self, model: str, offered_only: bool) -> ChatModel | None:
        return self


class OneAnswer(Scripted):
    def __init__(self, reply: str = "Biscuit.", tools: bool = False, composes: bool = True) -> None:
        super().__init__(reply=reply, tools=tools, composes=composes)
        self.name = "one-answer"


__all__ = ["OneAnswer", "Scripted"]

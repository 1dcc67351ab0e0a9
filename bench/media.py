"""What a hostile homeserver or speech server costs the bot (#47): peak Python memory
(tracemalloc) and time while it takes a 64 MB picture whose message says 1,234 bytes, a
picture that drips a byte every 0.1 s, and a 50 MB answer from the speech server; beside the
anchor, the same bodies read whole (what was done before). The servers run in a child
process, so only the bot's side is measured.

    PYTHONPATH=. .venv/bin/python bench/media.py
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
SERVERS = """
import asyncio
from aiohttp import web
from tests.transports.matrix.test_media_fetch import MediaRepo
from tests.support.standin_speech import StandinSpeech

async def main():
    repo = MediaRepo()
    runner = web.AppRunner(repo.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    speech = StandinSpeech()
    await speech.__aenter__()
    print(f"http://127.0.0.1:{runner.addresses[0][1]}", speech.url, flush=True)
    while True:
        if not speech._stream:
            speech.stream_answer(50 * 1024 * 1024)
        await asyncio.sleep(0.02)

asyncio.run(main())
"""


async def measured(what: Callable[[], Awaitable[str]]) -> dict[str, Any]:
    tracemalloc.start()
    started = time.monotonic()
    try:
        outcome = await what()
    except Exception as exc:  # the outcome is what is measured
        outcome = f"{type(exc).__name__}: {exc}"
    took = time.monotonic() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"seconds": round(took, 2), "peak_mib": round(peak / 2**20, 1), "outcome": outcome}


async def main() -> None:
    from nio import AsyncClient

    from chazbot.backends.speech import Transcriber
    from chazbot.config import Config, MediaConfig, SpeechConfig
    from chazbot.transports.matrix.media import Media

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    servers = subprocess.Popen(
        [sys.executable, "-c", SERVERS], stdout=subprocess.PIPE, text=True, env=env
    )
    assert servers.stdout is not None
    repo, speech_url = servers.stdout.readline().split()
    client = AsyncClient(repo, "@bot:localhost")
    client.access_token = "bench"
    cfg = Config(
        state_dir=Path(tempfile.mkdtemp()), media=MediaConfig(image_max_mb=8, fetch_timeout_s=3)
    )
    media = Media(client, cfg)
    speech = Transcriber(SpeechConfig(api_base=speech_url, api_key="k", max_retries=0))
    results: dict[str, dict[str, Any]] = {}
    try:

        def picture(media_id: str) -> dict[str, Any]:
            info = {"size": 1234, "mimetype": "image/png"}
            return {"url": f"mxc://example.org/{media_id}", "info": info}

        async def whole(url: str, method: str = "GET") -> str:
            async with aiohttp.ClientSession() as http, http.request(method, url) as resp:
                return f"{len(await resp.read())} bytes read"

        async def take(media_id: str) -> str:
            return str(await media.take("picture", picture(media_id), "", "$bench"))

        async def transcribe() -> str:
            return (await speech.transcribe(b"OggS", "v.ogg", "audio/ogg"))[:60]

        path = "/_matrix/client/v1/media/download/example.org/"
        results["64 MB picture, read whole (anchor)"] = await measured(
            lambda: whole(repo + path + "huge")
        )
        results["64 MB picture saying 1,234 bytes"] = await measured(lambda: take("huge"))
        results["a picture that drips (deadline 3 s)"] = await measured(lambda: take("drip"))
        results["50 MB speech answer, read whole (anchor)"] = await measured(
            lambda: whole(speech_url + "/audio/transcriptions", "POST")
        )
        results["50 MB speech answer"] = await measured(transcribe)
    finally:
        await speech.aclose()
        await media.aclose()
        await client.close()
        servers.kill()
    print(f"{'case':<42} {'seconds':>8} {'peak MiB':>9}  outcome")
    for name, row in results.items():
        print(f"{name:<42} {row['seconds']:>8} {row['peak_mib']:>9}  {row['outcome'][:70]}")
    print(json.dumps(results))


if __name__ == "__main__":
    asyncio.run(main())

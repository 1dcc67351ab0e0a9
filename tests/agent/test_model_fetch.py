"""A model by URL, and what is loaded from the models directory (issue 22, items 4 and 5).

Against loopback servers: one over https (a certificate made in the test, trusted through
``fetch_model``'s ``ssl_context``) and one over plain http. What the review found, each
refused now: a redirect to ``ftp://`` or from https to http followed; plain http accepted
with no hash; a server trickling a byte at a time still "downloading" long after; a
``.part`` file left by a killed download; a joined built-in edited in place reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from chazbot.agent import local_llm, local_models
from chazbot.config import LLMConfig, parse_config
from chazbot.errors import BackendError, ConfigError
from tests.support.paths import ROOT
from tests.support.tls import loopback_tls
from tests.support.waits import wait_until

GGUF = b"GGUF" + bytes(range(256)) * 400  # ~100 kB that starts like a GGUF
GGUF_SHA = hashlib.sha256(GGUF).hexdigest()


class Servers:
    """The same routes over https and over http; counts requests per path."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.https = ""
        self.http = ""
        self.ssl: Any = None
        self._runners: list[web.AppRunner] = []

    async def start(self, tmp_path: Path) -> None:
        tls = loopback_tls(tmp_path / "tls")
        self.ssl = tls.client
        app = web.Application()
        app.router.add_get("/{name}", self.handle)
        for context in (tls.server, None):
            runner = web.AppRunner(app, shutdown_timeout=0.5)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
            port = runner.addresses[0][1]
            url = f"{'https' if context else 'http'}://127.0.0.1:{port}"
            if context:
                self.https = url
            else:
                self.http = url
            self._runners.append(runner)

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        self.hits[name] = self.hits.get(name, 0) + 1
        if name == "model.gguf":
            return web.Response(body=GGUF, content_type="application/octet-stream")
        if name == "to-ftp.gguf":
            raise web.HTTPFound("ftp://127.0.0.1/model.gguf")
        if name == "to-http.gguf":
            raise web.HTTPFound(f"{self.http}/model.gguf")
        if name == "to-https.gguf":
            raise web.HTTPMovedPermanently(f"{self.https}/model.gguf")
        if name == "loop.gguf":
            raise web.HTTPFound("/loop.gguf")
        if name in ("trickle.gguf", "silent.gguf", "steady.gguf"):
            return await self._slow(request, name)
        raise web.HTTPNotFound()

    async def _slow(self, request: web.Request, name: str) -> web.StreamResponse:
        """trickle: a byte every 0.2 s; silent: nothing after the magic; steady: 64 kB every
        0.05 s (1.3 MB/s, never stalled) of a body too big to finish soon."""
        size = 1 << 30 if name == "steady.gguf" else 5_000_000
        response = web.StreamResponse(headers={"Content-Length": str(size)})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await response.write(b"GGUF")
            for _ in range(3000):
                transport = request.transport
                if transport is None or transport.is_closing():
                    break
                if name == "trickle.gguf":
                    await response.write(b"\0")
                    await asyncio.sleep(0.2)
                elif name == "steady.gguf":
                    await response.write(b"\0" * 65536)
                    await asyncio.sleep(0.05)
                else:
                    await asyncio.sleep(0.1)
        return response


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[Servers]:
    found = Servers()
    await found.start(tmp_path)
    yield found
    await found.stop()


async def fetch(servers: Servers, url: str, models: Path, **options: Any) -> Path:
    call = functools.partial(local_llm.fetch_model, ssl_context=servers.ssl, **options)
    return await asyncio.to_thread(call, url, models, 10_000_000)


def leftovers(models: Path) -> list[str]:
    if not models.exists():
        return []
    return sorted(p.name for p in models.iterdir() if p.name != local_llm.FETCH_LOCK)


# -- https only, redirects to https only, a sha256 for http --------------------------------


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("to-ftp.gguf", r"redirects to ftp://127\.0\.0\.1/model\.gguf, and only https"),
        ("to-http.gguf", r"redirects to http://127\.0\.0\.1:\d+/model\.gguf, and only https"),
        ("loop.gguf", r"more than 5 redirects"),
    ],
)
async def test_redirects_are_followed_to_https_only(
    servers: Servers, tmp_path: Path, name: str, error: str
) -> None:
    models = tmp_path / "models"
    with pytest.raises(BackendError, match=error) as caught:
        await fetch(servers, f"{servers.https}/{name}", models)
    assert "\n" not in str(caught.value)
    assert leftovers(models) == []
    assert servers.hits.get("model.gguf", 0) == 0, "the redirect was followed"


async def test_http_needs_a_sha256_and_gets_the_file_it_names(
    servers: Servers, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    plain = f"{servers.http}/model.gguf"
    with pytest.raises(BackendError, match=r"is plain http: use https, or pin the file with"):
        await fetch(servers, plain, models)
    with pytest.raises(BackendError, match="plain http"):
        local_llm.check_url(plain, None)
    assert servers.hits == {} and leftovers(models) == []
    # Pinned, plain http is fine, and a redirect from it to https is followed.
    got = await fetch(servers, f"{servers.http}/to-https.gguf", models, sha256=GGUF_SHA)
    assert got.read_bytes() == GGUF and servers.hits["model.gguf"] == 1
    # Another file than the pinned one: refused, nothing kept.
    with pytest.raises(BackendError, match=r"is not the file llm\.model_sha256 names"):
        await fetch(servers, plain, models, sha256="0" * 64)
    assert leftovers(models) == [got.name]
    # https with a pin: checked the same way.
    with pytest.raises(BackendError, match=r"is not the file llm\.model_sha256 names"):
        await fetch(servers, f"{servers.https}/model.gguf", models, sha256="1" * 64)


async def test_a_fetched_file_changed_on_disk_is_fetched_again_when_pinned(
    servers: Servers, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    url = f"{servers.https}/model.gguf"
    path = await fetch(servers, url, models, sha256=GGUF_SHA)
    with path.open("r+b") as handle:  # edited in place, same size
        handle.seek(100)
        handle.write(b"EVIL")
    again = await fetch(servers, url, models, sha256=GGUF_SHA)
    assert again == path and path.read_bytes() == GGUF
    assert servers.hits["model.gguf"] == 2


def test_model_sha256_in_the_config() -> None:
    digest = "AB" * 32
    cfg = LLMConfig(backend="local", model="http://models.example/m.gguf", model_sha256=digest)
    assert cfg.model_sha256 == digest.lower()
    with pytest.raises(ConfigError, match=r"llm\.model_sha256.*64 hex digits"):
        parse_config({"llm": {"backend": "local", "model_sha256": "abc"}})
    if local_llm.engine_available():
        source = local_llm.model_source(cfg.model, cfg.model_sha256)
        assert source.url == cfg.model and source.sha256 == digest.lower()
        with pytest.raises(BackendError, match="plain http"):
            local_llm.model_source("http://models.example/m.gguf")
        with pytest.raises(BackendError, match="not a usable URL"):
            local_llm.check_url("ftp://models.example/m.gguf", digest)
        with pytest.raises(BackendError, match="built-in models are pinned already"):
            local_llm.model_source("embedded", digest)


def test_a_gguf_path_with_a_sha256_is_checked_at_each_load(tmp_path: Path) -> None:
    if not local_llm.engine_available():
        pytest.skip("needs the local extra")
    path = tmp_path / "mine.gguf"
    path.write_bytes(GGUF)
    source = local_llm.model_source(str(path), GGUF_SHA)
    assert source.resolve(tmp_path / "models", 1 << 20) == path
    path.write_bytes(GGUF[:-1] + b"!")
    with pytest.raises(BackendError, match=r"mine\.gguf is not the file llm\.model_sha256 names"):
        source.resolve(tmp_path / "models", 1 << 20)


# -- deadlines --------------------------------------------------------------------------------


async def test_a_trickling_server_is_given_up_on_after_the_stall_deadline(
    servers: Servers, tmp_path: Path
) -> None:
    """A byte every 0.2 s never trips a per-read timeout; less than stall_bytes in stall_s
    does. (The review's server sent a byte every 2 s and was still "downloading" after 25 s.)"""
    models = tmp_path / "models"
    started = time.monotonic()
    with pytest.raises(BackendError, match=r"stalled \(less than 0\.065536 MB in 1\.5 s\)"):
        await fetch(
            servers, f"{servers.https}/trickle.gguf", models, stall_s=1.5, stall_bytes=65536
        )
    assert time.monotonic() - started < 10
    assert leftovers(models) == []


async def test_a_silent_server_is_given_up_on_after_the_stall_deadline(
    servers: Servers, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    with pytest.raises(BackendError, match="stalled"):
        await fetch(servers, f"{servers.https}/silent.gguf", models, stall_s=1.0)
    assert leftovers(models) == []


async def test_a_download_not_done_by_the_deadline_is_given_up(
    servers: Servers, tmp_path: Path
) -> None:
    """Never stalled (1.3 MB/s against 64 kB a second), but not done in 2 s."""
    models = tmp_path / "models"
    started = time.monotonic()
    with pytest.raises(BackendError, match=r"not done after 2 s"):
        await asyncio.to_thread(
            functools.partial(
                local_llm.fetch_model,
                ssl_context=servers.ssl,
                deadline_s=2.0,
                stall_s=1.0,
                stall_bytes=65536,
            ),
            f"{servers.https}/steady.gguf",
            models,
            1 << 31,
        )
    assert time.monotonic() - started < 10
    assert leftovers(models) == []


# -- .part files of a killed download ---------------------------------------------------------

_DOWNLOADER = """
import sys
from pathlib import Path
from chazbot.agent import local_llm, local_models
local_llm.fetch_model(sys.argv[1], Path(sys.argv[2]), 1 << 31, sha256="0" * 64)
"""


def _parts(models: Path) -> list[Path]:
    return sorted(models.glob(".*.part")) if models.exists() else []


async def test_a_part_file_of_a_killed_download_is_removed_at_start(
    servers: Servers, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    url = f"{servers.http}/trickle.gguf"  # http with a sha256: no certificate to pass on
    live = subprocess.Popen([sys.executable, "-c", _DOWNLOADER, url, str(models)], cwd=ROOT)
    try:
        await wait_until(lambda: _parts(models), what="the download's .part file")
        part = _parts(models)[0]
        # The download is alive: its .part stays (another process starting meanwhile).
        assert local_llm.remove_stale_parts(models) == 0 and part.exists()
        os.kill(live.pid, signal.SIGKILL)
        await asyncio.to_thread(live.wait, 30)
    finally:
        if live.poll() is None:
            live.kill()
            live.wait()
    assert part.exists(), "kill -9 leaves the .part file (nothing could clean up)"
    # The next start removes it: LocalChat does when it is made, a fetch before it writes.
    assert local_llm.remove_stale_parts(models) == 1
    assert _parts(models) == []
    part.write_bytes(b"GGUF left by a killed join")
    got = await fetch(servers, f"{servers.https}/model.gguf", models)
    assert leftovers(models) == [got.name]


# -- built-ins checked at each load -----------------------------------------------------------


def _fake_builtin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> local_llm.Builtin:
    chunks = [GGUF[:1000], GGUF[1000:50_000], GGUF[50_000:]]
    for i, chunk in enumerate(chunks, start=1):
        package = tmp_path / "site" / f"supplyparts{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / "p.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    parts = tuple((f"supplyparts{i}", "data/p.bin") for i in range(1, 4))
    return local_llm.Builtin("supply", "Supply", parts, sha256=GGUF_SHA)


def test_a_joined_builtin_edited_in_place_is_joined_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builtin = _fake_builtin(tmp_path, monkeypatch)
    models = tmp_path / "models"
    joined = builtin.path(models)
    assert joined.read_bytes() == GGUF
    with joined.open("r+b") as handle:  # the review's edit: same name, same size
        handle.seek(2000)
        handle.write(b"FORGED")
    assert builtin.path(models) == joined and joined.read_bytes() == GGUF
    assert leftovers(models) == [joined.name]


def test_a_single_file_builtin_that_changed_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "supplysingle"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "m.gguf").write_bytes(GGUF)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    builtin = local_llm.Builtin("single", "Single", (("supplysingle", "m.gguf"),), GGUF_SHA)
    assert builtin.path(tmp_path) == package / "m.gguf"
    (package / "m.gguf").write_bytes(GGUF + b"more")
    with pytest.raises(BackendError, match=r"^the built-in model single is damaged .*supplysingle"):
        builtin.path(tmp_path)


def test_every_builtin_is_pinned_and_the_installed_ones_match() -> None:
    """Each built-in names its sha256; the installed files have it (checked as a load does)."""
    for builtin in local_llm.BUILTINS.values():
        assert builtin.sha256 is not None and len(builtin.sha256) == 64
        if builtin.installed() and len(builtin.parts) == 1:
            directory = local_models._package_dir(builtin.parts[0][0])
            assert directory is not None
            data = (directory / builtin.parts[0][1]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == builtin.sha256

"""Model files on disk and by URL, for the embedded chat model (``local_llm``): written
through a ``.part`` file under a shared lock and renamed when complete, checked (a GGUF, its
sha256), fetched from an https URL (plain http only with a sha256) with redirects only to
https, a size bound, an overall deadline and a stall deadline, a progress bar on a terminal
and a log line every 10 % else; ``.part`` files left by a killed process are removed when the
next one starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import re
import secrets
import ssl
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp

from chazbot.backends import public_url
from chazbot.errors import BackendError

log = logging.getLogger("chazbot.agent.local_llm")

_GGUF_MAGIC = b"GGUF"
_DOWNLOAD_CHUNK = 1 << 20
DOWNLOAD_DEADLINE_S = 4 * 3600.0
"""The longest a model download may take, all of it (16 GB at 1.1 MB/s)."""
DOWNLOAD_STALL_S = 60.0
"""A download that brings less than ``DOWNLOAD_STALL_BYTES`` in this long is given up: a
server trickling a byte at a time never trips a per-read timeout."""
DOWNLOAD_STALL_BYTES = 1 << 20
_MAX_REDIRECTS = 5
FETCH_LOCK = ".fetch.lock"
"""In a models directory: held shared while a ``.part`` is written, exclusive to remove them."""


def check_url(url: str, sha256: str | None) -> None:
    """A model URL must be https, or plain http pinned by a sha256 (anyone on the way could
    change what plain http brings); a BackendError (one line) else."""
    shown = public_url(url)
    parsed = urllib.parse.urlsplit(url)
    scheme = parsed.scheme.lower()
    if scheme not in ("http", "https") or not parsed.hostname:
        raise BackendError(f"llm.model is not a usable URL: {shown}")
    if scheme == "http" and sha256 is None:
        raise BackendError(
            f"llm.model {shown} is plain http: use https, or pin the file with llm.model_sha256"
        )


def _partial_path(target: Path) -> Path:
    """Where ``target`` is written before it is renamed into place, complete."""
    return target.parent / f".{target.name}.{secrets.token_hex(4)}.part"


def _create(path: Path) -> Any:
    """A new file, owner-only, open for writing (binary); fails if it exists."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")


@contextlib.contextmanager
def _writing(models_dir: Path) -> Iterator[None]:
    """Held while a ``.part`` file in ``models_dir`` is written: a shared lock on its
    ``.fetch.lock``, taken after removing the ``.part`` files no live writer holds it for."""
    fd = os.open(models_dir / FETCH_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        _remove_unheld_parts(fd, models_dir)
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def remove_stale_parts(models_dir: Path) -> int:
    """Remove the ``.part`` files of downloads and joins that were killed (whose process no
    longer holds the lock); how many. Called at start; one a live process writes stays."""
    if not models_dir.is_dir():
        return 0
    try:
        fd = os.open(models_dir / FETCH_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        log.warning("could not check %s for unfinished downloads: %s", models_dir, exc)
        return 0
    try:
        return _remove_unheld_parts(fd, models_dir)
    finally:
        os.close(fd)


def _remove_unheld_parts(fd: int, models_dir: Path) -> int:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # a download or join is under way (here or in another process)
    removed = 0
    for part in models_dir.glob(".*.part"):
        with contextlib.suppress(FileNotFoundError):
            part.unlink()
            removed += 1
    if removed:
        log.info("removed %d unfinished download(s) from %s", removed, models_dir)
    return removed


def _file_sha256(path: Path, shown: str) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while block := handle.read(_DOWNLOAD_CHUNK):
                digest.update(block)
    except OSError as exc:
        raise BackendError(f"cannot read the model file {shown}: {exc.strerror or exc}") from exc
    return digest.hexdigest()


def _check_gguf(path: Path, shown: str) -> None:
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise BackendError(f"cannot read the model file {shown}: {exc.strerror or exc}") from exc
    if magic != _GGUF_MAGIC:
        raise BackendError(f"{shown} is not a GGUF file")


def _url_file_name(url: str) -> str:
    """A file name for a URL: its last path segment (made safe) after a hash of the whole URL."""
    tail = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
    tail = re.sub(r"[^A-Za-z0-9._-]+", "_", tail).strip("._")[:100] or "model"
    if not tail.lower().endswith(".gguf"):
        tail += ".gguf"
    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:12]
    return f"{digest}-{tail}"


def progress_printer(name: str) -> Callable[[int, int | None], None]:
    """A progress bar on a terminal (stderr), else a log line every 10 %."""
    tty = sys.stderr.isatty()
    shown = {"step": -1, "at": 0.0}

    def report(done: int, total: int | None) -> None:
        mb = done / 1e6
        if tty:
            now = time.monotonic()
            if now - shown["at"] < 0.2 and (total is None or done < total):
                return
            shown["at"] = now
            if total:
                filled = int(30 * done / total)
                bar = "#" * filled + "-" * (30 - filled)
                line = f"\rfetching {name} [{bar}] {mb:.0f}/{total / 1e6:.0f} MB"
            else:
                line = f"\rfetching {name}: {mb:.0f} MB"
            end = "\n" if total is not None and done >= total else ""
            sys.stderr.write(line + end)
            sys.stderr.flush()
            return
        step = int(10 * done / total) if total else int(mb // 100)
        if step > shown["step"]:
            shown["step"] = step
            if total:
                log.info("fetching %s: %d%% of %.0f MB", name, step * 10, total / 1e6)
            else:
                log.info("fetching %s: %.0f MB", name, mb)

    return report


def fetch_model(
    url: str,
    models_dir: Path,
    max_bytes: int,
    progress: Callable[[int, int | None], None] | None = None,
    *,
    sha256: str | None = None,
    deadline_s: float = DOWNLOAD_DEADLINE_S,
    stall_s: float = DOWNLOAD_STALL_S,
    stall_bytes: int = DOWNLOAD_STALL_BYTES,
    ssl_context: ssl.SSLContext | None = None,
) -> Path:
    """The GGUF at ``url``, fetched once into ``models_dir`` (blocking: runs its own event loop).

    https only, or http with ``sha256``; a redirect is followed only to https (at most five).
    At most ``max_bytes`` are read (a larger Content-Length fails before reading), within
    ``deadline_s`` in all, and it fails when less than ``stall_bytes`` came in ``stall_s``.
    The body goes to a ``.part`` file, renamed into place only when complete, a GGUF and of
    ``sha256`` (when given), so an interrupted fetch leaves nothing half-written; a file
    fetched before is checked against ``sha256`` again (and fetched again if it differs).
    ``ssl_context``: whom to trust (default: the system's CAs). Errors are one-line
    BackendErrors.
    """
    shown = public_url(url)
    check_url(url, sha256)
    target = models_dir / _url_file_name(url)
    if target.is_file():
        if sha256 is None or _file_sha256(target, shown) == sha256:
            return target
        log.warning("%s is not the file llm.model_sha256 names: fetching it again", target)
    try:
        models_dir.mkdir(parents=True, exist_ok=True)
        partial = _partial_path(target)
        with _writing(models_dir):
            try:
                download = _Download(url, partial, max_bytes, progress, stall_s, stall_bytes)
                digest = asyncio.run(download.run(deadline_s, ssl_context))
                if sha256 is not None and digest != sha256:
                    raise BackendError(
                        f"{shown} is not the file llm.model_sha256 names (it has {digest})"
                    )
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
    except OSError as exc:
        raise BackendError(f"could not fetch {shown}: {exc.strerror or exc}") from exc
    log.info("fetched %s into %s", shown, target)
    return target


class _Download:
    """One model download (see ``fetch_model``), on an event loop of its own."""

    def __init__(
        self,
        url: str,
        partial: Path,
        max_bytes: int,
        progress: Callable[[int, int | None], None] | None,
        stall_s: float,
        stall_bytes: int,
    ) -> None:
        self.url = url
        self.shown = public_url(url)
        self.partial = partial
        self.max_bytes = max_bytes
        self.progress = progress
        self.stall_s = stall_s
        self.stall_bytes = stall_bytes

    async def run(self, deadline_s: float, ssl_context: ssl.SSLContext | None) -> str:
        """Fetch into ``partial``; the body's sha256."""
        timeout = aiohttp.ClientTimeout(sock_connect=self.stall_s, sock_read=self.stall_s)
        headers = {"User-Agent": "chazbot"}
        try:
            async with asyncio.timeout(deadline_s) as deadline:
                async with aiohttp.ClientSession(
                    timeout=timeout, headers=headers, trust_env=True
                ) as session:
                    response = await self._open(session, ssl_context)
                    async with response:
                        return await self._save(response)
        except TimeoutError as exc:
            if deadline.expired():
                raise BackendError(
                    f"could not fetch {self.shown}: not done after {deadline_s:g} s"
                ) from exc
            raise self._stalled() from exc
        except aiohttp.ClientPayloadError as exc:
            raise BackendError(f"could not fetch {self.shown}: the download was cut short") from exc
        except (aiohttp.ClientError, ValueError) as exc:
            raise BackendError(
                f"could not fetch {self.shown}: {exc or type(exc).__name__}"
            ) from exc

    def _stalled(self) -> BackendError:
        return BackendError(
            f"could not fetch {self.shown}: stalled (less than "
            f"{self.stall_bytes / 1e6:g} MB in {self.stall_s:g} s)"
        )

    async def _open(
        self, session: aiohttp.ClientSession, ssl_context: ssl.SSLContext | None
    ) -> aiohttp.ClientResponse:
        """The response to GET, after redirects to https only."""
        url = self.url
        for _ in range(_MAX_REDIRECTS + 1):
            response = await session.get(
                url, allow_redirects=False, ssl=ssl_context if ssl_context is not None else True
            )
            if response.status not in (301, 302, 303, 307, 308):
                if response.status != 200:
                    response.release()
                    raise BackendError(
                        f"could not fetch {self.shown}: HTTP {response.status} {response.reason}"
                    )
                return response
            location = response.headers.get("Location", "")
            response.release()
            url = urllib.parse.urljoin(url, location)
            if urllib.parse.urlsplit(url).scheme.lower() != "https":
                raise BackendError(
                    f"could not fetch {self.shown}: it redirects to {public_url(url) or '?'}, "
                    "and only https is followed"
                )
        raise BackendError(f"could not fetch {self.shown}: more than {_MAX_REDIRECTS} redirects")

    async def _save(self, response: aiohttp.ClientResponse) -> str:
        shown, max_bytes = self.shown, self.max_bytes
        limit_mb = max_bytes // 1_000_000
        total = response.content_length
        if total is not None and total > max_bytes:
            raise BackendError(
                f"{shown} is {total / 1e6:.0f} MB, more than llm.download_max_mb ({limit_mb})"
            )
        loop = asyncio.get_running_loop()
        digest = hashlib.sha256()
        done = 0
        window_at, window_bytes = loop.time(), 0  # progress since the last stall check
        with _create(self.partial) as out:
            while block := await response.content.read(_DOWNLOAD_CHUNK):
                if done == 0 and not block.startswith(_GGUF_MAGIC[: len(block)]):
                    raise BackendError(f"{shown} is not a GGUF file")
                done += len(block)
                if done > max_bytes:
                    raise BackendError(
                        f"{shown} is larger than llm.download_max_mb ({limit_mb} MB)"
                    )
                digest.update(block)
                out.write(block)
                window_bytes += len(block)
                if window_bytes >= self.stall_bytes:
                    window_at, window_bytes = loop.time(), 0
                elif loop.time() - window_at > self.stall_s:
                    raise self._stalled()
                if self.progress is not None:
                    self.progress(done, total)
        if total is not None and done != total:
            raise BackendError(f"could not fetch {shown}: it ended after {done} of {total} bytes")
        if done < len(_GGUF_MAGIC):
            raise BackendError(f"{shown} is not a GGUF file")
        return digest.hexdigest()

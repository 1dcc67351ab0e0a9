"""What strangers' bad bytes make the listeners log, bounded: aiohttp's server logger as one
line through a rate-limited ``note`` (``OneLineLogger``), and asyncio's failed accepts once a
minute (``quiet_failed_accepts``)."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any


class OneLineLogger(logging.Logger):
    """aiohttp's server logger for a listener: what a stranger's bad bytes provoke there (a
    malformed request line, a connection lost mid-way) is one line, no traceback, through
    the listener's rate-limited ``note``. Errors that are not of the ``only`` types (a bug in
    a handler) are logged as usual, with their traceback."""

    def __init__(
        self,
        name: str,
        note: Callable[..., None],
        only: tuple[type[BaseException], ...] = (BaseException,),
    ) -> None:
        super().__init__(name)
        self.note = note
        self.only = only

    def _log(  # type: ignore[override]
        self,
        level: int,
        msg: object,
        args: Any,
        exc_info: Any = None,
        extra: Any = None,
        stack_info: bool = False,
        stacklevel: int = 1,
    ) -> None:
        if not exc_info and level < logging.WARNING:
            super()._log(level, msg, args, None, extra, stack_info, stacklevel)
            return
        exc = exc_info[1] if isinstance(exc_info, tuple) else exc_info
        if not isinstance(exc, BaseException):
            exc = sys.exc_info()[1]
        if exc is not None and not isinstance(exc, self.only):
            super()._log(level, msg, args, exc_info, extra, stack_info, stacklevel)
            return
        try:
            text = str(msg) % args if args else str(msg)
        except (TypeError, ValueError):
            text = str(msg)
        if exc is not None:
            text += f": {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        self.note("%s", text)


class _AcceptNotes(logging.Filter):
    """asyncio logs every failed accept (EMFILE: out of descriptors); one line a minute."""

    def __init__(self) -> None:
        super().__init__()
        self.since = 0.0
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if "socket.accept() out of system resource" not in str(record.msg):
            return True
        now = time.monotonic()
        if now - self.since < 60.0:
            self.dropped += 1
            return False
        if self.dropped:
            record.msg = f"{record.msg} ({self.dropped} more in the last minute)"
        self.since, self.dropped = now, 0
        return True


_ACCEPT_NOTES = _AcceptNotes()


def quiet_failed_accepts() -> None:
    """Let asyncio log a failed accept once a minute at most (idempotent)."""
    logger = logging.getLogger("asyncio")
    if _ACCEPT_NOTES not in logger.filters:
        logger.addFilter(_ACCEPT_NOTES)


__all__ = ["OneLineLogger", "quiet_failed_accepts"]

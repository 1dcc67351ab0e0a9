"""One retry policy for every call to an outside service, built on tenacity.

A call raises :class:`Retryable` for a failure worth another attempt (a 429, a 5xx, a
connection error, a timeout), optionally with the server's wish of how long to wait; anything
else ends the call at once. The wait is the server's wish when it gave one (capped), else an
exponential backoff with jitter. ``sleep`` is injectable, so tests run on a fake clock.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from chazbot.errors import BackendError

Sleep = Callable[[float], Awaitable[None]]


class Retryable(BackendError):
    """A failure worth another attempt; ``retry_after`` is the server's wish in seconds.

    It never leaves the client that raised it: when no attempt is left, the client turns it
    into a plain :class:`~chazbot.errors.BackendError` that says how many attempts were made.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


@dataclass(frozen=True)
class Backoff:
    """How often and how long to wait: ``attempts`` in all (1 means no retry), the first
    backoff ``first_s`` doubling up to ``max_s`` plus up to ``first_s`` of jitter, and a
    server's Retry-After honoured up to ``retry_after_max_s``."""

    attempts: int
    first_s: float = 0.5
    max_s: float = 8.0
    retry_after_max_s: float = 30.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (from 1)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.retry_after_max_s)
        exponent = min(attempt - 1, 30)
        base = min(self.first_s * 2.0**exponent, self.max_s)
        return base + random.uniform(0, self.first_s)


def retrying(
    policy: Backoff,
    what: str,
    log: logging.Logger,
    *,
    sleep: Sleep | None = None,
    retry_on: tuple[type[BaseException], ...] = (Retryable,),
) -> AsyncRetrying:
    """A tenacity ``AsyncRetrying`` for ``policy``: ``await retrying(...)(fn, *args)``.

    The last failure is re-raised as is; each retry is logged as one warning naming ``what``.
    """

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        return policy.delay(state.attempt_number, getattr(exc, "retry_after", None))

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        pause = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning(
            "%s failed (%s); retry %d of %d in %.1f s",
            what,
            exc,
            state.attempt_number,
            policy.attempts - 1,
            pause,
        )

    return AsyncRetrying(
        stop=stop_after_attempt(max(policy.attempts, 1)),
        wait=wait,
        retry=retry_if_exception_type(retry_on),
        before_sleep=before_sleep,
        sleep=sleep or asyncio.sleep,
        reraise=True,
    )


__all__ = ["Backoff", "Retryable", "Sleep", "retrying"]

"""Waiting in tests: one helper that waits on a condition, and a fake clock for retries.

No test synchronises with a fixed sleep: it waits for the condition it needs, with a generous
deadline that only matters when something is broken. Retry waits are recorded by
``FakeSleep`` instead of slept.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

DEFAULT_TIMEOUT_S = 30.0


async def wait_until(
    check: Callable[[], Any],
    timeout: float = DEFAULT_TIMEOUT_S,
    what: str = "condition",
    interval: float = 0.02,
) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy, and return that.

    Fails with an AssertionError naming ``what`` after ``timeout`` seconds. ``interval`` only
    paces the polling: the answer comes as soon as the condition holds.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(interval)


def wait_until_sync(
    check: Callable[[], Any],
    timeout: float = DEFAULT_TIMEOUT_S,
    what: str = "condition",
    interval: float = 0.05,
    alive: Callable[[], None] | None = None,
) -> Any:
    """``wait_until`` for code without an event loop (a subprocess started by a test).

    ``alive`` is called before each try and raises when what is awaited cannot come any more
    (the process it waits on has exited), so a dead service fails at once with its reason.
    """
    deadline = time.monotonic() + timeout
    while True:
        if alive is not None:
            alive()
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


class FakeSleep:
    """An ``asyncio.sleep`` stand-in for retry policies: records each wait, sleeps none."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(0)


__all__ = ["DEFAULT_TIMEOUT_S", "FakeSleep", "wait_until", "wait_until_sync"]

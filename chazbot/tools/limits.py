"""Rate limits of tool calls (SPEC §12): per tool across rooms and per room across tools,
each a sliding minute. The clock is passed in (tests give a fake one)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from chazbot.errors import InputError

WINDOW_S = 60.0
MAX_KEYS = 10_000
"""Rooms and tools remembered at most (a key idle for a window is dropped first)."""


@dataclass
class RateLimits:
    per_tool: int
    per_room: int
    clock: Callable[[], float] = time.monotonic
    _seen: dict[tuple[str, str], deque[float]] = field(default_factory=dict)

    def _window(self, key: tuple[str, str], now: float) -> deque[float]:
        stamps = self._seen.get(key)
        if stamps is None:
            if len(self._seen) >= MAX_KEYS:
                self._prune(now)
            stamps = self._seen[key] = deque()
        while stamps and now - stamps[0] >= WINDOW_S:
            stamps.popleft()
        return stamps

    def _prune(self, now: float) -> None:
        for key in [k for k, s in self._seen.items() if not s or now - s[-1] >= WINDOW_S]:
            del self._seen[key]

    def take(self, tool: str, room: str) -> None:
        """Count one call of ``tool`` in ``room``, or InputError (nothing counted) past a
        limit."""
        now = self.clock()
        by_tool = self._window(("tool", tool), now)
        by_room = self._window(("room", room), now)
        if len(by_tool) >= self.per_tool:
            raise InputError(
                f"{tool} was called {self.per_tool} times in the last minute, its limit; "
                "try again later"
            )
        if len(by_room) >= self.per_room:
            raise InputError(
                f"this room made {self.per_room} tool calls in the last minute, its limit; "
                "try again later"
            )
        by_tool.append(now)
        by_room.append(now)


__all__ = ["RateLimits"]

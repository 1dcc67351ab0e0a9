"""Requests to the homeserver that change something: sends, joins, typing notices.

Every one goes through the shared retry policy (:mod:`chazbot.backends.retry`, the one the
LLM and embedding clients use): connection trouble and server errors are retried with backoff
(a homeserver's ``retry_after_ms`` wins), errors that another attempt cannot fix end at once.
A message is sent with a stable transaction id, so a retried send is deduplicated by the
homeserver.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from nio import ErrorResponse, RoomSendResponse
from nio.exceptions import LocalProtocolError, OlmTrustError

from chazbot.backends.retry import Backoff, Retryable, Sleep, retrying
from chazbot.config import MatrixConfig
from chazbot.errors import BackendError
from chazbot.transports.matrix.client import TRANSIENT, error_text, one_line, retry_after_s

log = logging.getLogger(__name__)

T = TypeVar("T")

SEND_BACKOFF = Backoff(attempts=8, first_s=0.5, max_s=15.0, retry_after_max_s=30.0)
"""Sends, joins and declines: about a minute and a half in all, riding out a restart."""
STARTUP_BACKOFF = Backoff(attempts=5, first_s=1.0, max_s=8.0)
"""Logging in: a homeserver that stays unreachable fails the start in about 15 s."""
PERMANENT_ERRORS = frozenset(
    {"M_FORBIDDEN", "M_TOO_LARGE", "M_BAD_JSON", "M_NOT_JSON", "M_INVALID_PARAM", "M_UNKNOWN_TOKEN"}
)
TYPING_REFRESH_S = 12.0
"""A turn still running after this long sends its typing notice again."""
TYPING_TIMEOUT_S = 15.0
"""How long the homeserver shows one notice: a little longer than the refresh, so a long turn
shows no gap, and short, since nothing stops it after the reply."""


class Sender:
    """The homeserver requests of one bot; ``sleep`` is for tests' fake clocks."""

    def __init__(self, client: Any, cfg: MatrixConfig, *, sleep: Sleep | None = None) -> None:
        self.client = client
        self.cfg = cfg
        self._sleep = sleep

    async def send(self, room_id: str, content: dict[str, Any], txn: str) -> str:
        """Send one message (retried with the same transaction id: never duplicated)."""

        async def request() -> Any:
            return await self.client.room_send(
                room_id,
                "m.room.message",
                content,
                tx_id=txn,
                ignore_unverified_devices=self.cfg.trust_unverified_devices,
            )

        response = await self.call(
            f"sending to {room_id}", request, ok=lambda r: isinstance(r, RoomSendResponse)
        )
        return str(response.event_id)

    async def call(
        self,
        what: str,
        request: Callable[[], Awaitable[T]],
        *,
        ok: Callable[[Any], bool] = lambda r: not isinstance(r, ErrorResponse),
    ) -> T:
        """A homeserver request, retried by the shared policy; ``what`` names it in logs."""

        async def attempt() -> T:
            try:
                response = await request()
            except OlmTrustError as exc:
                raise BackendError(f"matrix: {what}: unverified devices ({exc})") from exc
            except (*TRANSIENT, LocalProtocolError) as exc:  # LocalProtocolError: not synced yet
                raise Retryable(one_line(exc)) from exc
            if ok(response):
                return response
            if getattr(response, "status_code", None) in PERMANENT_ERRORS:
                raise BackendError(f"matrix: {what} failed: {error_text(response)}")
            raise Retryable(error_text(response), retry_after_s(response))

        policy = retrying(SEND_BACKOFF, f"matrix: {what}", log, sleep=self._sleep)
        try:
            return await policy(attempt)
        except Retryable as exc:
            raise BackendError(
                f"matrix: {what} failed {SEND_BACKOFF.attempts} times: {exc.message}"
            ) from exc

    async def startup(self, what: str, step: Callable[[], Awaitable[None]]) -> None:
        """Run a startup step, retrying while the homeserver cannot be reached."""

        async def attempt() -> None:
            try:
                await step()
            except TRANSIENT as exc:
                raise Retryable(one_line(exc)) from exc

        policy = retrying(STARTUP_BACKOFF, f"matrix: {what}", log, sleep=self._sleep)
        try:
            await policy(attempt)
        except Retryable as exc:
            raise BackendError(f"matrix: {what} failed: {exc.message}") from exc

    @contextlib.asynccontextmanager
    async def typing(self, room_id: str) -> AsyncIterator[None]:
        """A typing notice while the agent works: one request a turn (best effort, sent
        beside the turn, not before it), renewed only for a turn longer than
        ``TYPING_REFRESH_S``. No second request stops it: the reply follows at once, and the
        notice's own ``TYPING_TIMEOUT_S`` ends it in clients that keep showing it (Synapse
        does not end a typing notice when its user sends a message)."""

        async def keep_typing() -> None:
            while True:
                await self._typing_notice(room_id)
                await asyncio.sleep(TYPING_REFRESH_S)

        task = asyncio.create_task(keep_typing())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _typing_notice(self, room_id: str) -> None:
        try:
            async with asyncio.timeout(5):
                await self.client.room_typing(
                    room_id, typing_state=True, timeout=int(TYPING_TIMEOUT_S * 1000)
                )
        except TRANSIENT as exc:
            log.debug("matrix: typing notice failed: %s", one_line(exc))


__all__ = ["PERMANENT_ERRORS", "SEND_BACKOFF", "STARTUP_BACKOFF", "Sender"]

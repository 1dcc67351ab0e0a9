"""The sync loop and its supervisor.

One long-poll sync at a time; each response's invites go to ``on_invite``, its new events
become jobs (none on the very first start, when history is not answered, nor in a room just
joined from before the invite), the state is committed with a pending job per event
(``state``), then the jobs are queued; after the first sync, the jobs the last run left
pending are queued before them. A limited
timeline is paged back to the previous sync position, so a burst never drops a command. The
bot's own events are filtered out of the sync: they never wake the long poll.

When the loop dies it is restarted with exponential backoff, each restart logged; ``healthy``
is false until a sync succeeds again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from nio import (
    ErrorResponse,
    MessageDirection,
    RoomMemberEvent,
    RoomMessagesResponse,
    SyncResponse,
)
from nio.exceptions import LocalProtocolError

from chazbot.errors import BackendError, ChazError
from chazbot.transports.matrix.client import TRANSIENT, error_text, one_line, retry_after_s
from chazbot.transports.matrix.revisions import revision_job
from chazbot.transports.matrix.routing import Job, Router
from chazbot.transports.matrix.state import MatrixState

log = logging.getLogger(__name__)

TIMELINE_LIMIT = 100
SYNC_TIMEOUT_MS = 30_000
BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 30.0
PAGE_BACK_MAX_PAGES = 20


class SyncFailed(BackendError):
    """The homeserver answered a sync with an error (maybe asking us to wait)."""

    retry_after_s: float = 0.0


class SyncLoop:
    """Syncs for one bot until cancelled; ``run`` is the supervised loop."""

    def __init__(
        self,
        client: Any,
        router: Router,
        state: MatrixState,
        *,
        on_invite: Callable[[str, str, bool], None],
        on_job: Callable[[Job], None],
        relogin: Callable[[], Awaitable[None]] | None,
        timeline_limit: int = TIMELINE_LIMIT,
        sync_timeout_ms: int = SYNC_TIMEOUT_MS,
    ) -> None:
        self.client = client
        self.router = router
        self.state = state
        self.user_id = router.cfg.user_id
        self._on_invite = on_invite
        self._on_job = on_job
        self._relogin = relogin
        self.timeline_limit = timeline_limit
        self.sync_timeout_ms = sync_timeout_ms
        self.last_sync_ok: float | None = None
        """Wall-clock time of the last successful sync (for /healthz)."""
        self.restarts = 0
        self.failing = False  # the loop died and has not synced since
        self.first_sync_done = asyncio.Event()

    @property
    def healthy(self) -> bool:
        """True while syncs succeed (the last one within two long-poll periods and a margin)."""
        if self.last_sync_ok is None or self.failing:
            return False
        return time.time() - self.last_sync_ok < 2 * self.sync_timeout_ms / 1000 + 30

    async def run(self) -> None:
        """Run the sync loop; when it dies, log it and start it again with backoff."""
        delay = BACKOFF_START_S
        while True:
            synced_before = self.last_sync_ok
            try:
                # Until one sync worked, ask for the full state: nio keeps no room state on disk.
                await self._sync_forever(full_state=synced_before is None)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.last_sync_ok != synced_before:
                    delay = BACKOFF_START_S  # it ran fine for a while: start the backoff over
                self.restarts += 1
                self.failing = True
                wait = max(delay, getattr(exc, "retry_after_s", 0.0))
                if isinstance(exc, (ChazError, *TRANSIENT)):
                    log.warning(
                        "matrix: sync loop stopped (%s); restart %d in %.1f s",
                        one_line(exc),
                        self.restarts,
                        wait,
                    )
                else:
                    log.error(
                        "matrix: sync loop crashed; restart %d in %.1f s",
                        self.restarts,
                        wait,
                        exc_info=True,
                    )
                await asyncio.sleep(wait)
                delay = min(delay * 2, BACKOFF_MAX_S)

    def _filter(self) -> dict[str, Any]:
        return {
            "room": {
                # Our own events never wake the long poll: each reply would cost a sync.
                "timeline": {"limit": self.timeline_limit, "not_senders": [self.user_id]},
                "state": {"lazy_load_members": False},
                "ephemeral": {"not_types": ["*"]},
            },
            "presence": {"not_types": ["*"]},
        }

    async def _sync_forever(self, full_state: bool) -> None:
        sync_filter = self._filter()
        first = True
        while True:
            since = self.state.since
            timeout = 0 if first else self.sync_timeout_ms
            try:
                async with asyncio.timeout(self.sync_timeout_ms / 1000 + 60):
                    response = await self.client.sync(
                        timeout=timeout,
                        sync_filter=sync_filter,
                        since=since,
                        full_state=True if (first and full_state) else None,
                    )
            except TimeoutError as exc:
                raise BackendError("matrix sync timed out") from exc
            if not isinstance(response, SyncResponse):
                await self._failed(response)
            jobs = await self._jobs(response, since)
            queued = await self.state.commit(
                response.next_batch,
                jobs,
                [job.room_id for job in jobs if job.kind == "undecryptable"],
            )
            # Jobs a crash or a stop left undone go first, now that the rooms are known.
            for pending in [*self.state.take_replay(), *queued]:
                self._on_job(pending.job)
            await self.e2e_housekeeping()
            self.last_sync_ok = time.time()
            self.failing = False
            if not self.first_sync_done.is_set():
                self.first_sync_done.set()
                log.info(
                    "matrix: first sync done (%d rooms, %s)",
                    len(self.client.rooms),
                    "resumed" if since else "fresh start, history not answered",
                )
            first = False

    async def _failed(self, response: Any) -> None:
        if getattr(response, "status_code", None) == "M_UNKNOWN_TOKEN" and self._relogin:
            await self._relogin()
        error = SyncFailed(f"matrix sync failed: {error_text(response)}")
        error.retry_after_s = retry_after_s(response) or 0.0
        raise error

    async def e2e_housekeeping(self) -> None:
        """What nio's sync_forever does between syncs: keys up, keys queried and claimed."""
        client = self.client
        if client.olm is None:
            return
        steps: list[tuple[bool, Callable[[], Awaitable[Any]]]] = [
            (client.should_upload_keys, client.keys_upload),
            (client.should_query_keys, client.keys_query),
            (
                client.should_claim_keys,
                lambda: client.keys_claim(client.get_users_for_key_claiming()),
            ),
            (True, client.send_to_device_messages),
        ]
        for needed, step in steps:
            if not needed:
                continue
            try:
                result = await step()
            except LocalProtocolError as exc:  # another task did it first
                log.debug("matrix: e2e step skipped: %s", exc)
                continue
            if isinstance(result, ErrorResponse):
                log.warning("matrix: e2e request failed: %s", error_text(result))

    async def _jobs(self, response: Any, since: str | None) -> list[Job]:
        """Hand invites on; the jobs this sync brings (none on the very first start)."""
        for room_id, info in response.rooms.invite.items():
            inviter = self.router.inviter(info.invite_state)
            if inviter is not None:
                self._on_invite(room_id, inviter, self.router.direct(info.invite_state))
        if since is None:
            return []  # the very first start: history is not answered
        jobs: list[Job] = []
        for room_id, info in response.rooms.join.items():
            room = self.client.rooms.get(room_id)
            if room is None:
                continue
            events = await self._room_events(room_id, info.timeline, since)
            for i, event in enumerate(events):
                job = self.router.job(
                    room, event, self.state.handled, self.state.undecryptable_noticed
                ) or revision_job(self.router, room, event, self.state.handled)
                if job is not None:
                    job.heard_by = self.heard_then(room, events[i + 1 :])
                    jobs.append(job)
        return jobs

    def heard_then(self, room: Any, after: list[Any]) -> list[str]:
        """Who was in ``room`` when an event was sent (SPEC §5c: its rows' audience), the bot
        aside: everyone in it now (nio holds this sync's state), but for those whose join or
        invite comes after the event in this timeline. A later sync's newcomers are told
        apart when the job runs (whoever is not in this list came later)."""
        came = {
            e.state_key
            for e in after
            if isinstance(e, RoomMemberEvent) and e.membership in ("join", "invite")
        }
        return sorted(u for u in room.users if u != self.user_id and u not in came)

    async def _room_events(self, room_id: str, timeline: Any, since: str) -> list[Any]:
        """The timeline's new events, paged back to ``since`` when it is limited.

        A room just joined comes with its history: only what was said after our invite counts.
        (Our own events are filtered out of the sync, so the invite, sent by the inviter, marks
        the spot; when a limited timeline starts after it, all of it is newer anyway.)
        """
        events = list(timeline.events)
        if timeline.limited and timeline.prev_batch and self._own_invite(events) is None:
            older = await self._page_back(room_id, timeline.prev_batch, since)
            log.info("matrix: %s: limited timeline, paged back %d events", room_id, len(older))
            events = older + events
        invited_at = self._own_invite(events)
        return events if invited_at is None else events[invited_at + 1 :]

    def _own_invite(self, events: list[Any]) -> int | None:
        found = None
        for i, event in enumerate(events):
            if (
                isinstance(event, RoomMemberEvent)
                and event.state_key == self.user_id
                and event.membership == "invite"
            ):
                found = i
        return found

    async def _page_back(self, room_id: str, start: str, stop: str) -> list[Any]:
        collected: list[Any] = []
        token = start
        for _ in range(PAGE_BACK_MAX_PAGES):
            response = await self.client.room_messages(
                room_id, start=token, end=stop, direction=MessageDirection.back, limit=100
            )
            if not isinstance(response, RoomMessagesResponse):
                log.warning("matrix: %s: paging back failed: %s", room_id, error_text(response))
                break
            known = False
            for event in response.chunk:
                if getattr(event, "event_id", None) in self.state.handled:
                    known = True
                    break
                collected.append(event)
            if known or not response.chunk or not response.end or response.end == token:
                break
            token = response.end
        collected.reverse()
        return collected


__all__ = ["SYNC_TIMEOUT_MS", "TIMELINE_LIMIT", "SyncFailed", "SyncLoop"]

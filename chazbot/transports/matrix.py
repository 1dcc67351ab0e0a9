"""The Matrix transport: chazbot as a matrix-nio bot.

Each joined room is one session (``matrix:<room_id>``). One supervised sync loop reads the
homeserver; every message worth answering becomes a job on its room's queue, so rooms are
served concurrently and each room in order. What to answer and how a reply looks is decided
by the pure rules in ``matrix_rules``; this module is the I/O around them.

Never twice, never old: after each sync, the sync token and the ids of the events it brought
to handle are committed to the peer-local tables in one statement, before their jobs start (a
crash loses at most the jobs running at that moment and never repeats one); replies are sent
with a transaction id derived from the answered event, so a retried send is deduplicated by
the homeserver. A limited timeline is paged back to the previous sync position, so a burst
never drops a command. On the very first start (no sync token yet) history is not answered,
nor, in a room just joined, what was said before the invite. The bot's own events are
filtered out of the sync: they never wake the long poll, and are never answered.

Resilience: nio retries 429s (``retry_after_ms`` capped) and connection errors a bounded
number of times; the sync loop is supervised and restarted with exponential backoff, each
restart logged; sends and joins are retried with backoff, riding out a homeserver restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import aiohttp
from nio import (
    AsyncClient,
    AsyncClientConfig,
    ErrorResponse,
    InviteMemberEvent,
    JoinResponse,
    LoginResponse,
    MegolmEvent,
    MessageDirection,
    ProfileGetDisplayNameResponse,
    RoomMemberEvent,
    RoomMessagesResponse,
    RoomMessageText,
    RoomSendResponse,
    SyncResponse,
    WhoamiResponse,
)
from nio.crypto import ENCRYPTION_ENABLED
from nio.exceptions import LocalProtocolError, OlmTrustError

from chazbot import metrics
from chazbot.commands import TREE
from chazbot.config import MatrixConfig
from chazbot.errors import BackendError, ChazError
from chazbot.peer import Peer
from chazbot.transports.matrix_rules import (
    UNDECRYPTABLE_NOTICE,
    Me,
    Request,
    is_edit,
    matches_any,
    notice_contents,
    route,
    session_name,
    text_contents,
    transaction_id,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

TIMELINE_LIMIT = 100
SYNC_TIMEOUT_MS = 30_000
MAX_RETRY_AFTER_MS = 30_000
"""A 429's ``retry_after_ms`` is honoured up to this; Synapse may ask for minutes."""
MAX_LIMIT_EXCEEDED = 5
MAX_TIMEOUTS = 2
REQUEST_TIMEOUT_S = 30.0
BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 30.0
SEND_ATTEMPTS = 8
PAGE_BACK_MAX_PAGES = 20
HANDLED_KEEP = 5000
STOP_GRACE_S = 10.0
TYPING_REFRESH_S = 20.0
PERMANENT_SEND_ERRORS = frozenset(
    {"M_FORBIDDEN", "M_TOO_LARGE", "M_BAD_JSON", "M_NOT_JSON", "M_INVALID_PARAM", "M_UNKNOWN_TOKEN"}
)
TRANSIENT = (aiohttp.ClientError, TimeoutError, ConnectionError)
"""Connection trouble: worth another try after a pause."""

_KV_HANDLED = "matrix:handled:"


class _Client(AsyncClient):  # type: ignore[misc]  # nio ships no type information
    """nio's client with a cap on ``retry_after_ms``: a 429 waits, but never for minutes."""

    async def create_matrix_response(self, *args: Any, **kwargs: Any) -> Any:
        response = await super().create_matrix_response(*args, **kwargs)
        retry = getattr(response, "retry_after_ms", None)
        if isinstance(retry, int | float) and retry > MAX_RETRY_AFTER_MS:
            response.retry_after_ms = MAX_RETRY_AFTER_MS
        return response


class _SyncFailed(BackendError):
    """The homeserver answered a sync with an error (maybe asking us to wait)."""

    retry_after_s: float = 0.0


@dataclass
class _Job:
    room_id: str
    event_id: str
    sender: str
    kind: Literal["command", "chat", "undecryptable"]
    text: str = ""
    content: dict[str, Any] = field(default_factory=dict)
    is_admin: bool = False


def _error_text(response: Any) -> str:
    code = getattr(response, "status_code", None) or "error"
    message = getattr(response, "message", None) or type(response).__name__
    return f"{code}: {message}"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class MatrixBot:
    """The bot: ``await start()`` logs in and starts syncing; ``await stop()`` ends it."""

    def __init__(
        self,
        peer: Peer,
        cfg: MatrixConfig,
        *,
        timeline_limit: int = TIMELINE_LIMIT,
        sync_timeout_ms: int = SYNC_TIMEOUT_MS,
    ) -> None:
        self.peer = peer
        self.cfg = cfg
        self.timeline_limit = timeline_limit
        self.sync_timeout_ms = sync_timeout_ms
        self.last_sync_ok: float | None = None
        """Wall-clock time of the last successful sync (for /healthz)."""
        self.sync_restarts = 0
        self._sync_failing = False  # the sync loop died and has not synced since
        self.client: Any = None
        self._since: str | None = None
        self._handled: OrderedDict[str, None] = OrderedDict()
        self._handled_writes = 0
        self._persisted_token: str | None = None
        self._undecryptable_noticed: set[str] = set()
        self._queues: dict[str, asyncio.Queue[_Job]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._supervisor: asyncio.Task[None] | None = None
        self._display_name: str | None = None
        self._command_words = frozenset(c.path[0] for c in TREE.commands)
        self._first_sync_done = asyncio.Event()

    # ---- public state ------------------------------------------------------------------

    @property
    def user_id(self) -> str:
        return self.cfg.user_id

    @property
    def device_id(self) -> str | None:
        return self.client.device_id if self.client is not None else None

    @property
    def healthy(self) -> bool:
        """True while syncs succeed (the last one within two long-poll periods and a margin)."""
        if self.last_sync_ok is None or self._sync_failing:
            return False
        return time.time() - self.last_sync_ok < 2 * self.sync_timeout_ms / 1000 + 30

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Wait for the first successful sync (tests and the service use it)."""
        async with asyncio.timeout(timeout):
            await self._first_sync_done.wait()

    # ---- life --------------------------------------------------------------------------

    async def start(self) -> None:
        nio_log = logging.getLogger("nio")
        if nio_log.level == logging.NOTSET and log.getEffectiveLevel() > logging.DEBUG:
            nio_log.setLevel(logging.WARNING)  # nio says INFO for every event it handles
        store = Path(self.peer.state_dir) / "matrix-store"
        store.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(store, 0o700)
        encryption = self.cfg.encryption and ENCRYPTION_ENABLED
        if self.cfg.encryption and not ENCRYPTION_ENABLED:
            log.warning(
                "matrix: encryption is on but the e2e extra is not installed;"
                " encrypted rooms will not work"
            )
        config = AsyncClientConfig(
            max_limit_exceeded=MAX_LIMIT_EXCEEDED,
            max_timeouts=MAX_TIMEOUTS,
            request_timeout=REQUEST_TIMEOUT_S,
            encryption_enabled=encryption,
            store_sync_tokens=False,
            pickle_key=await self._pickle_key() if encryption else "DEFAULT_KEY",
        )
        self.client = _Client(
            self.cfg.homeserver_url, self.cfg.user_id, store_path=str(store), config=config
        )
        try:
            await self._retrying("log in", self._login)
            await self._load_state()
            await self._load_display_name()
            await self._e2e_housekeeping()
        except BaseException:
            await self.client.close()
            raise
        self._supervisor = asyncio.create_task(self._supervise(), name="matrix-sync")

    async def stop(self) -> None:
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        workers = [w for w in self._workers.values() if not w.done()]
        if workers:
            _, pending = await asyncio.wait(workers, timeout=STOP_GRACE_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self.client is not None:
            await self.client.close()
        log.info("matrix: stopped")

    # ---- credentials and persisted state -----------------------------------------------

    async def _credential(self, name: str) -> str | None:
        rows = await self.peer.ledger.local("SELECT value FROM credentials WHERE name = ?", (name,))
        return str(rows[0][0]) if rows else None

    async def _set_credential(self, name: str, value: str) -> None:
        await self.peer.ledger.local(
            "INSERT OR REPLACE INTO credentials (name, value) VALUES (?, ?)", (name, value)
        )

    async def _kv(self, key: str) -> str | None:
        rows = await self.peer.ledger.local("SELECT value FROM local_kv WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    async def _pickle_key(self) -> str:
        """The key the e2e store is encrypted with: random, kept in the credentials table."""
        name = f"matrix:{self.cfg.user_id}:pickle_key"
        key = await self._credential(name)
        if key is None:
            key = secrets.token_urlsafe(32)
            await self._set_credential(name, key)
        return key

    async def _login(self) -> None:
        """Reuse the saved device and token; else log in with the configured token or password."""
        client, cfg = self.client, self.cfg
        cred_name = f"matrix:{cfg.user_id}"
        saved_raw = await self._credential(cred_name)
        saved: dict[str, str] = json.loads(saved_raw) if saved_raw else {}
        saved_device, saved_token = saved.get("device_id"), saved.get("access_token")
        how = ""
        if cfg.access_token:
            device = saved_device if saved_token == cfg.access_token else None
            if device is None:
                client.access_token = cfg.access_token
                device = await self._whoami()
            client.restore_login(cfg.user_id, device, cfg.access_token)
            how = "access token"
        elif saved_device and saved_token:
            client.restore_login(cfg.user_id, saved_device, saved_token)
            try:
                await self._whoami()
                how = "saved session"
            except BackendError as exc:
                if cfg.password is None:
                    raise
                log.info("matrix: saved session no longer valid (%s); logging in again", exc)
                await self._password_login(saved_device)
                how = "password, same device"
        elif cfg.password:
            await self._password_login(saved_device)
            how = "password"
        else:
            raise BackendError(f"matrix: no password or access token for {cfg.user_id}")
        if client.device_id != saved_device or client.access_token != saved_token:
            record = {"device_id": client.device_id, "access_token": client.access_token}
            await self._set_credential(cred_name, json.dumps(record))
        reused = "reused" if client.device_id == saved_device else "new"
        log.info(
            "matrix: logged in as %s (%s, device %s, %s)",
            cfg.user_id,
            how,
            client.device_id,
            reused,
        )

    async def _password_login(self, device_id: str | None) -> None:
        self.client.device_id = device_id or ""
        response = await self.client.login(
            password=self.cfg.password, device_name=self.cfg.device_name
        )
        if not isinstance(response, LoginResponse):
            raise BackendError(
                f"matrix login as {self.cfg.user_id} failed: {_error_text(response)}"
            )

    async def _whoami(self) -> str:
        response = await self.client.whoami()
        if not isinstance(response, WhoamiResponse):
            raise BackendError(f"matrix: the access token was refused: {_error_text(response)}")
        if response.user_id != self.cfg.user_id:
            raise BackendError(
                f"matrix: the access token is for {response.user_id}, not {self.cfg.user_id}"
            )
        if not response.device_id:
            raise BackendError("matrix: the homeserver did not say which device the token is for")
        return str(response.device_id)

    async def _load_state(self) -> None:
        self._since = await self._kv(f"matrix:{self.cfg.user_id}:next_batch")
        rows = await self.peer.ledger.local(
            "SELECT key FROM local_kv WHERE key LIKE ? ORDER BY value DESC LIMIT ?",
            (_KV_HANDLED + "%", HANDLED_KEEP),
        )
        for (key,) in reversed(rows):
            self._handled[str(key)[len(_KV_HANDLED) :]] = None
        rows = await self.peer.ledger.local(
            "SELECT key FROM local_kv WHERE key LIKE ?", ("matrix:undecryptable:%",)
        )
        self._undecryptable_noticed = {str(k).split(":", 2)[2] for (k,) in rows}

    async def _load_display_name(self) -> None:
        try:
            response = await self.client.get_displayname()
        except TRANSIENT as exc:
            log.debug("matrix: no display name: %s", _one_line(exc))
            return
        if isinstance(response, ProfileGetDisplayNameResponse) and response.displayname:
            self._display_name = str(response.displayname)

    async def _persist(self, next_batch: str, jobs: list[_Job]) -> None:
        """One statement, one commit: the new sync token, the handled events (before their
        jobs start) and the rooms told about an undecryptable message."""
        if not jobs and next_batch == self._persisted_token:
            return
        base = time.time_ns()
        rows = [(_KV_HANDLED + job.event_id, f"{base + i:020d}") for i, job in enumerate(jobs)]
        rows += [
            (f"matrix:undecryptable:{j.room_id}", "1") for j in jobs if j.kind == "undecryptable"
        ]
        rows.append((f"matrix:{self.cfg.user_id}:next_batch", next_batch))  # last: after all
        for start in range(0, len(rows), 400):
            chunk = rows[start : start + 400]
            sql = "INSERT OR REPLACE INTO local_kv (key, value) VALUES " + ",".join(
                ["(?, ?)"] * len(chunk)
            )
            await self.peer.ledger.local(sql, tuple(v for row in chunk for v in row))
        self._persisted_token = next_batch
        for job in jobs:
            self._handled[job.event_id] = None
        while len(self._handled) > HANDLED_KEEP:
            self._handled.popitem(last=False)
        self._handled_writes += len(jobs)
        if self._handled_writes >= 1000:
            self._handled_writes = 0
            await self.peer.ledger.local(
                "DELETE FROM local_kv WHERE key LIKE ? AND value < (SELECT value FROM local_kv"
                " WHERE key LIKE ? ORDER BY value DESC LIMIT 1 OFFSET ?)",
                (_KV_HANDLED + "%", _KV_HANDLED + "%", HANDLED_KEEP - 1),
            )

    # ---- the sync loop -----------------------------------------------------------------

    async def _supervise(self) -> None:
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
                self.sync_restarts += 1
                self._sync_failing = True
                wait = max(delay, getattr(exc, "retry_after_s", 0.0))
                if isinstance(exc, (ChazError, *TRANSIENT)):
                    log.warning(
                        "matrix: sync loop stopped (%s); restart %d in %.1f s",
                        _one_line(exc),
                        self.sync_restarts,
                        wait,
                    )
                else:
                    log.error(
                        "matrix: sync loop crashed; restart %d in %.1f s",
                        self.sync_restarts,
                        wait,
                        exc_info=True,
                    )
                await asyncio.sleep(wait)
                delay = min(delay * 2, BACKOFF_MAX_S)

    def _sync_filter(self) -> dict[str, Any]:
        return {
            "room": {
                # Our own events never wake the long poll: each reply would cost a sync.
                "timeline": {"limit": self.timeline_limit, "not_senders": [self.cfg.user_id]},
                "state": {"lazy_load_members": False},
                "ephemeral": {"not_types": ["*"]},
            },
            "presence": {"not_types": ["*"]},
        }

    async def _sync_forever(self, full_state: bool) -> None:
        sync_filter = self._sync_filter()
        first = True
        while True:
            since = self._since
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
                await self._sync_failed(response)
            jobs = await self._jobs(response, since)
            await self._persist(response.next_batch, jobs)
            self._since = response.next_batch
            for job in jobs:
                metrics.MATRIX_EVENTS.labels(outcome=job.kind).inc()
                self._enqueue(job)
            await self._e2e_housekeeping()
            self.last_sync_ok = time.time()
            self._sync_failing = False
            if not self._first_sync_done.is_set():
                self._first_sync_done.set()
                log.info(
                    "matrix: first sync done (%d rooms, %s)",
                    len(self.client.rooms),
                    "resumed" if since else "fresh start, history not answered",
                )
            first = False

    async def _sync_failed(self, response: Any) -> None:
        code = getattr(response, "status_code", None)
        if code == "M_UNKNOWN_TOKEN" and self.cfg.password:
            log.warning("matrix: the access token was revoked; logging in again")
            await self._password_login(self.client.device_id)
            await self._set_credential(
                f"matrix:{self.cfg.user_id}",
                json.dumps(
                    {"device_id": self.client.device_id, "access_token": self.client.access_token}
                ),
            )
        error = _SyncFailed(f"matrix sync failed: {_error_text(response)}")
        retry_ms = getattr(response, "retry_after_ms", None)
        if isinstance(retry_ms, int | float):
            error.retry_after_s = min(retry_ms, MAX_RETRY_AFTER_MS) / 1000
        raise error

    async def _e2e_housekeeping(self) -> None:
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
                log.warning("matrix: e2e request failed: %s", _error_text(result))

    async def _jobs(self, response: Any, since: str | None) -> list[_Job]:
        """Join or decline invites; the jobs this sync brings (none on the very first start)."""
        for room_id, info in response.rooms.invite.items():
            self._on_invite(room_id, info.invite_state)
        if since is None:
            return []  # the very first start: history is not answered
        jobs: list[_Job] = []
        for room_id, info in response.rooms.join.items():
            room = self.client.rooms.get(room_id)
            if room is None:
                continue
            for event in await self._room_events(room_id, info.timeline, since):
                job = self._job(room, event)
                if job is not None:
                    jobs.append(job)
        return jobs

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
                and event.state_key == self.cfg.user_id
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
                log.warning("matrix: %s: paging back failed: %s", room_id, _error_text(response))
                break
            known = False
            for event in response.chunk:
                if getattr(event, "event_id", None) in self._handled:
                    known = True
                    break
                collected.append(event)
            if known or not response.chunk or not response.end or response.end == token:
                break
            token = response.end
        collected.reverse()
        return collected

    # ---- deciding what to answer -------------------------------------------------------

    def _on_invite(self, room_id: str, invite_state: list[Any]) -> None:
        inviter = next(
            (
                e.sender
                for e in invite_state
                if isinstance(e, InviteMemberEvent)
                and e.state_key == self.cfg.user_id
                and e.membership == "invite"
            ),
            None,
        )
        if inviter is None:
            return
        if self._allowed(inviter):
            log.info("matrix: invited to %s by %s; joining", room_id, inviter)
            self._spawn(self._join(room_id))
        else:
            log.info("matrix: invite to %s from %s (not allowed); declining", room_id, inviter)
            self._spawn(self._call("decline an invite", lambda: self.client.room_leave(room_id)))

    async def _join(self, room_id: str) -> None:
        response = await self._call("join a room", lambda: self.client.join(room_id))
        if isinstance(response, JoinResponse):
            log.info("matrix: joined %s", room_id)

    def _allowed(self, sender: str) -> bool:
        return matches_any(sender, self.cfg.allow_list) or matches_any(sender, self.cfg.admins)

    def _me(self, room: Any) -> Me:
        names = [self._display_name, room.user_name(self.cfg.user_id)]
        return Me(self.cfg.user_id, tuple(n for n in names if n))

    def _job(self, room: Any, event: Any) -> _Job | None:
        sender = getattr(event, "sender", None)
        event_id = getattr(event, "event_id", None)
        if not isinstance(sender, str) or not isinstance(event_id, str):
            return None
        if sender == self.cfg.user_id or event_id in self._handled:
            return None
        if isinstance(event, MegolmEvent):
            log.warning(
                "matrix: cannot decrypt %s from %s in %s (session %s)",
                event_id,
                sender,
                room.room_id,
                getattr(event, "session_id", "?"),
            )
            if room.room_id in self._undecryptable_noticed or not self._allowed(sender):
                return None
            self._undecryptable_noticed.add(room.room_id)
            return _Job(room.room_id, event_id, sender, "undecryptable", content={})
        if not isinstance(event, RoomMessageText):
            return None  # notices (from bots), emotes, media, state: never answered
        content = event.source.get("content", {})
        if not isinstance(content, dict) or is_edit(content):
            return None
        if not self._allowed(sender):
            log.debug("matrix: ignoring %s from %s (not on the allow list)", event_id, sender)
            metrics.MATRIX_EVENTS.labels(outcome="not_allowed").inc()
            return None
        request: Request | None = route(
            content,
            me=self._me(room),
            prefix=self.cfg.command_prefix,
            is_dm=room.member_count == 2,
            command_words=self._command_words,
        )
        if request is None:
            return None
        return _Job(
            room.room_id,
            event_id,
            sender,
            request.kind,
            request.text,
            content,
            is_admin=matches_any(sender, self.cfg.admins),
        )

    # ---- running jobs, one queue per room ----------------------------------------------

    def _enqueue(self, job: _Job) -> None:
        queue = self._queues.setdefault(job.room_id, asyncio.Queue())
        queue.put_nowait(job)
        worker = self._workers.get(job.room_id)
        if worker is None or worker.done():
            self._workers[job.room_id] = asyncio.create_task(
                self._work(job.room_id, queue), name=f"matrix-room-{job.room_id}"
            )

    async def _work(self, room_id: str, queue: asyncio.Queue[_Job]) -> None:
        while True:
            try:
                job = queue.get_nowait()
            except asyncio.QueueEmpty:
                self._workers.pop(room_id, None)
                return
            try:
                await self._run(job)
            except asyncio.CancelledError:
                raise
            except ChazError as exc:
                metrics.MATRIX_EVENTS.labels(outcome="failed").inc()
                log.error("matrix: answering %s in %s failed: %s", job.event_id, room_id, exc)
            except Exception:
                metrics.MATRIX_EVENTS.labels(outcome="failed").inc()
                log.exception("matrix: answering %s in %s failed", job.event_id, room_id)

    async def _run(self, job: _Job) -> None:
        if job.kind == "undecryptable":
            contents = notice_contents(UNDECRYPTABLE_NOTICE, job.event_id, {}, job.sender)
            await self._reply(job, contents)
        elif job.kind == "command":
            text, ok = await self._answer(job)
            await self._reply(job, notice_contents(text, job.event_id, job.content, job.sender))
        else:
            async with self._typing(job.room_id):
                text, ok = await self._answer(job)
                build = text_contents if ok else notice_contents
                await self._reply(job, build(text, job.event_id, job.content, job.sender))

    async def _answer(self, job: _Job) -> tuple[str, bool]:
        """The text that answers a command or an agent turn, and whether it is a success."""
        session = session_name(job.room_id)
        try:
            if job.kind == "command":
                reply = await self.peer.command(
                    job.text,
                    session=session,
                    sender=job.sender,
                    is_admin=job.is_admin,
                    prefix=f"{self.cfg.command_prefix} ",
                )
                return reply.text, reply.ok
            result = await self.peer.chat(job.text, session=session, sender=job.sender)
            return result.text, result.ok
        except ChazError as exc:
            return str(exc), False
        except Exception:
            log.exception("matrix: answering %s failed", job.event_id)
            return "Something went wrong on my side; the details are in the bot's log.", False

    async def _reply(self, job: _Job, contents: list[dict[str, Any]]) -> None:
        for part, content in enumerate(contents):
            await self._send(job.room_id, content, transaction_id(job.event_id, part))

    async def _send(self, room_id: str, content: dict[str, Any], txn: str) -> str:
        """Send one message; retried with the same transaction id, so never duplicated."""
        error = ""
        for attempt in range(SEND_ATTEMPTS):
            try:
                response = await self.client.room_send(
                    room_id,
                    "m.room.message",
                    content,
                    tx_id=txn,
                    ignore_unverified_devices=self.cfg.trust_unverified_devices,
                )
            except OlmTrustError as exc:
                raise BackendError(
                    f"matrix: not sending to {room_id}: unverified devices ({exc})"
                ) from exc
            except (
                *TRANSIENT,
                LocalProtocolError,
            ) as exc:  # LocalProtocolError: room not synced yet
                error = _one_line(exc)
            else:
                if isinstance(response, RoomSendResponse):
                    return str(response.event_id)
                error = _error_text(response)
                if getattr(response, "status_code", None) in PERMANENT_SEND_ERRORS:
                    raise BackendError(f"matrix: sending to {room_id} failed: {error}")
            wait = min(0.5 * 2**attempt, 15.0)
            log.warning(
                "matrix: sending to %s failed (%s); retry %d in %.1f s",
                room_id,
                error,
                attempt + 1,
                wait,
            )
            await asyncio.sleep(wait)
        raise BackendError(f"matrix: sending to {room_id} failed {SEND_ATTEMPTS} times: {error}")

    @contextlib.asynccontextmanager
    async def _typing(self, room_id: str) -> AsyncIterator[None]:
        """A typing notice while the agent works (refreshed; best effort)."""

        async def keep_typing() -> None:
            while True:
                await self._typing_notice(room_id, True)
                await asyncio.sleep(TYPING_REFRESH_S)

        task = asyncio.create_task(keep_typing())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await self._typing_notice(room_id, False)

    async def _typing_notice(self, room_id: str, on: bool) -> None:
        try:
            async with asyncio.timeout(5):
                await self.client.room_typing(
                    room_id, typing_state=on, timeout=int(TYPING_REFRESH_S * 1000) + 10_000
                )
        except TRANSIENT as exc:
            log.debug("matrix: typing notice failed: %s", _one_line(exc))

    # ---- helpers -----------------------------------------------------------------------

    def _spawn(self, coro: Awaitable[Any]) -> None:
        async def run() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("matrix: %s", _one_line(exc))

        task = asyncio.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _call(self, what: str, request: Callable[[], Awaitable[T]]) -> T:
        """A homeserver request, retried with backoff on connection trouble and server errors."""
        error = ""
        for attempt in range(SEND_ATTEMPTS):
            try:
                response = await request()
            except TRANSIENT as exc:
                error = _one_line(exc)
            else:
                if not isinstance(response, ErrorResponse):
                    return response
                error = _error_text(response)
                if getattr(response, "status_code", None) in PERMANENT_SEND_ERRORS:
                    break
            wait = min(0.5 * 2**attempt, 15.0)
            log.warning("matrix: could not %s (%s); retry in %.1f s", what, error, wait)
            await asyncio.sleep(wait)
        raise BackendError(f"matrix: could not {what}: {error}")

    async def _retrying(self, what: str, step: Callable[[], Awaitable[None]]) -> None:
        """Run a startup step, retrying while the homeserver cannot be reached."""
        for attempt in range(5):
            try:
                await step()
                return
            except TRANSIENT as exc:
                if attempt == 4:
                    raise BackendError(f"matrix: could not {what}: {_one_line(exc)}") from exc
                wait = min(2.0**attempt, 8.0)
                log.warning(
                    "matrix: could not %s (%s); retry in %.0f s", what, _one_line(exc), wait
                )
                await asyncio.sleep(wait)


__all__ = ["MatrixBot"]

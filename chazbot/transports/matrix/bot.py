"""``MatrixBot``: the parts of the Matrix transport wired together for one account.

``client`` (the nio client), ``login`` (credentials and logging in), ``state`` (what survives
a restart), ``sync`` (the supervised sync loop), ``routing`` (events to jobs, one queue per
room) and ``sending`` (sends and joins with the shared retry policy). This module turns a job
into a command or an agent turn, and the answer into messages; nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nio import AsyncClientConfig, JoinedMembersResponse, JoinResponse
from nio.crypto import ENCRYPTION_ENABLED

from chazbot.commands import TREE
from chazbot.config import MatrixConfig
from chazbot.errors import ChazError
from chazbot.memory.audience import Audience, room_audience, unknown_room
from chazbot.reminders.runner import ReminderRunner
from chazbot.reminders.store import Reminders
from chazbot.transports.matrix import login
from chazbot.transports.matrix.client import (
    MAX_LIMIT_EXCEEDED,
    MAX_TIMEOUTS,
    REQUEST_TIMEOUT_S,
    NioClient,
    one_line,
)
from chazbot.transports.matrix.routing import Job, RoomQueues, Router
from chazbot.transports.matrix.sending import Sender
from chazbot.transports.matrix.state import MatrixState
from chazbot.transports.matrix.sync import SYNC_TIMEOUT_MS, TIMELINE_LIMIT, SyncLoop
from chazbot.transports.matrix_rules import (
    BOUNDED_JOIN_RULES,
    ROOM_CHANGED_NOTICE,
    SESSION_PREFIX,
    UNDECRYPTABLE_NOTICE,
    matches_any,
    notice_contents,
    session_name,
    text_contents,
    transaction_id,
)

if TYPE_CHECKING:
    from chazbot.peer import Peer

log = logging.getLogger("chazbot.transports.matrix")
SOMETHING_WENT_WRONG = "Something went wrong on my side; the details are in the bot's log."


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
        self.client: Any = None
        self.credentials = login.Credentials(peer.ledger, cfg.user_id)
        self.state = MatrixState(peer.ledger, cfg.user_id)
        self.router = Router(cfg, (c.path[0] for c in TREE.commands), lambda: peer.people.globs)
        self.queues = RoomQueues(self._run)
        self.sender: Sender | None = None
        self.sync: SyncLoop | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._supervisor: asyncio.Task[None] | None = None
        self.reminders = ReminderRunner(self._reminder_stores, self._deliver_reminder)

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
        return self.sync is not None and self.sync.healthy

    @property
    def last_sync_ok(self) -> float | None:
        return self.sync.last_sync_ok if self.sync is not None else None

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Wait for the first successful sync (tests and the service use it)."""
        assert self.sync is not None, "start() first"
        async with asyncio.timeout(timeout):
            await self.sync.first_sync_done.wait()

    # ---- life --------------------------------------------------------------------------

    async def start(self) -> None:
        nio_log = logging.getLogger("nio")
        if nio_log.level == logging.NOTSET and log.getEffectiveLevel() > logging.DEBUG:
            nio_log.setLevel(logging.WARNING)  # nio says INFO for every event it handles
        store = Path(self.peer.state_dir) / "matrix-store"
        store.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(store, 0o700)
        encryption = self.cfg.use_encryption and ENCRYPTION_ENABLED
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
            pickle_key=await self.credentials.pickle_key() if encryption else "DEFAULT_KEY",
        )
        client = self.client = NioClient(
            self.cfg.homeserver_url, self.cfg.user_id, store_path=str(store), config=config
        )
        self.sender = Sender(client, self.cfg)

        async def relogin() -> None:
            await login.relogin(client, self.cfg, self.credentials)

        self.sync = SyncLoop(
            client,
            self.router,
            self.state,
            on_invite=self._on_invite,
            on_job=self.queues.put,
            relogin=relogin if self.cfg.password else None,
            timeline_limit=self.timeline_limit,
            sync_timeout_ms=self.sync_timeout_ms,
        )
        try:
            await self.sender.startup(
                "logging in", lambda: login.login(client, self.cfg, self.credentials)
            )
            await self.state.load()
            self.router.display_name = await login.display_name(client)
            await self.sync.e2e_housekeeping()
        except BaseException:
            await client.close()
            raise
        self._supervisor = asyncio.create_task(self.sync.run(), name="matrix-sync")
        self.reminders.start()

    async def stop(self) -> None:
        await self.reminders.stop()
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        await self.queues.stop()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self.client is not None:
            await self.client.close()
        log.info("matrix: stopped")

    def room_name(self, session: str) -> str | None:
        """The name people see for a session's room ("#family", "Alice and Bob"), if the bot
        is in it."""
        room = self.client.rooms.get(session.removeprefix(SESSION_PREFIX)) if self.client else None
        return None if room is None else str(room.display_name)

    # ---- reminders (#37) ----------------------------------------------------------------

    def _reminder_stores(self) -> list[Reminders]:
        return [Reminders(self.peer.ledger, a.db, a.key) for a in self.peer.agents.values()]

    async def _deliver_reminder(self, session: str, text: str, txn: str) -> bool:
        """Send a due reminder into the room it was set in, only there (False: not a
        Matrix room of this bot now, or not synced yet; it stays due)."""
        if self.sender is None or self.sync is None or not self.sync.first_sync_done.is_set():
            return False
        if not session.startswith(SESSION_PREFIX):
            return False
        room_id = session.removeprefix(SESSION_PREFIX)
        if self.client is None or room_id not in self.client.rooms:
            return False
        await self.sender.send(room_id, {"msgtype": "m.text", "body": text}, txn)
        return True

    # ---- invites -----------------------------------------------------------------------

    def _on_invite(self, room_id: str, inviter: str) -> None:
        assert self.sender is not None
        sender = self.sender
        if self.router.allowed(inviter):
            log.info("matrix: invited to %s by %s; joining", room_id, inviter)
            self._spawn(self._join(room_id))
        else:
            log.info("matrix: invite to %s from %s (not allowed); declining", room_id, inviter)
            self._spawn(
                sender.call(
                    f"declining the invite to {room_id}", lambda: sender.client.room_leave(room_id)
                )
            )

    async def _join(self, room_id: str) -> None:
        assert self.sender is not None
        sender = self.sender
        response = await sender.call(f"joining {room_id}", lambda: sender.client.join(room_id))
        if isinstance(response, JoinResponse):
            log.info("matrix: joined %s", room_id)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        async def run() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("matrix: %s", one_line(exc))

        task = asyncio.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ---- answering a job ---------------------------------------------------------------

    async def _run(self, job: Job) -> None:
        assert self.sender is not None
        if job.kind == "undecryptable":
            contents = notice_contents(UNDECRYPTABLE_NOTICE, job.event_id, {}, job.sender)
            await self._reply(job, contents)
        elif job.kind == "not_allowed_notice":
            await self._reply(job, notice_contents(job.text, job.event_id, job.content, job.sender))
        elif job.kind == "command":
            text, _, heard, markdown = await self._answer(job)
            checked = await self._still_heard(job, heard, text)
            contents = notice_contents(
                checked,
                job.event_id,
                job.content,
                job.sender,
                markdown=markdown and checked is text,
            )
            await self._reply(job, contents)
        else:
            async with self.sender.typing(job.room_id):
                text, ok, heard, _ = await self._answer(job)
                checked = await self._still_heard(job, heard, text)
                build = text_contents if ok and checked is text else notice_contents
                await self._reply(job, build(checked, job.event_id, job.content, job.sender))

    async def _still_heard(self, job: Job, heard: Audience | None, text: str) -> str:
        """``text`` when the people who will read it are those it was prepared for (or
        fewer), else a notice to ask again: readers are decided when a reply is sent."""
        if heard is None or heard.covers(await self.audience(job.room_id)):
            return text
        log.info("matrix: %s changed while answering %s; reply withheld", job.room_id, job.event_id)
        return ROOM_CHANGED_NOTICE

    # ---- who is in a room (SPEC §5c) ----------------------------------------------------

    def _people(self, room: Any) -> tuple[frozenset[str], frozenset[str]]:
        """(everyone in ``room`` now, invited included; those who joined), the bot aside."""
        me = self.cfg.user_id
        present = frozenset(u for u in room.users if u != me)
        joined = frozenset(u for u, user in room.users.items() if u != me and not user.invited)
        return present, joined

    def members_of(self, session: str) -> frozenset[str] | None:
        """The people in another room now (for rows of rooms too big to list their
        audience); None when the bot is not in it."""
        room = self.client.rooms.get(session.removeprefix(SESSION_PREFIX))
        return None if room is None else self._people(room)[0]

    async def audience(self, room_id: str) -> Audience:
        """Who reads what the bot says in ``room_id`` now. When nio's member list is short of
        the room's summary, the homeserver's joined members are asked for; a room it cannot
        tell about, an empty one, a public one and one with ``world_readable`` history get an
        audience that sees only the room's own rows (SPEC §5c: fail closed)."""
        session = session_name(room_id)
        room = self.client.rooms.get(room_id) if self.client is not None else None
        if room is None:
            return unknown_room(session)
        present, joined = self._people(room)
        if room.member_count > len(room.users):
            if self.sender is None:
                return unknown_room(session)
            sender = self.sender
            answer = await sender.call(
                f"listing the members of {room_id}", lambda: sender.client.joined_members(room_id)
            )
            if not isinstance(answer, JoinedMembersResponse):
                return unknown_room(session)
            found = frozenset(m.user_id for m in answer.members if m.user_id != self.user_id)
            present, joined = present | found, joined | found
        return room_audience(
            session,
            present,
            lambda user: matches_any(user, self.cfg.admins),
            self.members_of,
            joined,
            public=room.join_rule not in BOUNDED_JOIN_RULES,
            history=room.history_visibility,
        )

    async def _answer(self, job: Job) -> tuple[str, bool, Audience | None, bool]:
        """The text that answers a command or an agent turn, whether it is a success, the
        audience it was prepared for, and whether the text is Markdown to send with an HTML
        body (a command's ``help``)."""
        session = session_name(job.room_id)
        audience: Audience | None = None
        try:
            audience = await self.audience(job.room_id)
            if job.kind == "command":
                reply = await self.peer.command(
                    job.text,
                    session=session,
                    sender=job.sender,
                    is_admin=job.is_admin,
                    prefix=f"{self.cfg.command_prefix} ",
                    audience=audience,
                )
                return reply.text, reply.ok, audience, reply.markdown
            result = await self.peer.chat(
                job.text,
                session=session,
                sender=job.sender,
                audience=audience,
                prefix=f"{self.cfg.command_prefix} ",
            )
            return result.text, result.ok, audience, False
        except ChazError as exc:
            return str(exc), False, audience, False
        except Exception:
            log.exception("matrix: answering %s failed", job.event_id)
            return SOMETHING_WENT_WRONG, False, audience, False

    async def _reply(self, job: Job, contents: list[dict[str, Any]]) -> None:
        assert self.sender is not None
        for part, content in enumerate(contents):
            await self.sender.send(job.room_id, content, transaction_id(job.event_id, part))


__all__ = ["MatrixBot"]

"""``MatrixBot``: the parts of the Matrix transport wired together for one account.

``client`` (the nio client), ``login`` (credentials and logging in), ``state`` (what survives
a restart), ``sync`` (the supervised sync loop), ``routing`` (events to jobs, one queue per
room) and ``sending`` (sends and joins with the shared retry policy). This module turns a job
into a command or an agent turn, and the answer into messages; nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nio import (
    AsyncClientConfig,
    JoinedMembersResponse,
    MessageDirection,
    RoomMessagesResponse,
)
from nio.crypto import ENCRYPTION_ENABLED

from chazbot.commands import TREE
from chazbot.config import MatrixConfig
from chazbot.errors import ChazError
from chazbot.memory.audience import Audience, room_audience, unknown_room
from chazbot.transports.matrix import approving, login
from chazbot.transports.matrix.client import (
    MAX_LIMIT_EXCEEDED,
    MAX_TIMEOUTS,
    REQUEST_TIMEOUT_S,
    NioClient,
    one_line,
)
from chazbot.transports.matrix.invites import act_on_invite
from chazbot.transports.matrix.media import Heard, Media, heard_line
from chazbot.transports.matrix.readers import as_heard
from chazbot.transports.matrix.reminding import reminder_runner
from chazbot.transports.matrix.revisions import may_redact
from chazbot.transports.matrix.routing import Job, RoomQueues, Router
from chazbot.transports.matrix.rules import (
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
from chazbot.transports.matrix.sending import Sender
from chazbot.transports.matrix.state import MAX_STARTS, MatrixState
from chazbot.transports.matrix.sync import SYNC_TIMEOUT_MS, TIMELINE_LIMIT, SyncLoop

if TYPE_CHECKING:
    from chazbot.peer import Peer

log = logging.getLogger("chazbot.transports.matrix")
SOMETHING_WENT_WRONG = "Something went wrong on my side; the details are in the bot's log."

ANSWERED_PAGES = 10
REVISIONS = ("redaction", "edit")
"""Jobs never answered; run again after a crash, they find what they did already done."""
"""How far back (pages of 100 events) a replayed job looks for a reply sent before a crash."""


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
        self.reminders = reminder_runner(peer, self._delivery_parts, self.audience)
        self.media: Media | None = None

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
        self.media = Media(client, self.peer.config)

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
        approving.MatrixApprovals.attach(self.peer.tools, self)  # tools asked in rooms (✅/❌)
        self._supervisor = asyncio.create_task(self.sync.run(), name="matrix-sync")
        self.reminders.start()

    async def stop(self) -> None:
        await self.reminders.stop()
        if self.media is not None:
            await self.media.aclose()
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

    # ---- invites -----------------------------------------------------------------------

    def _on_invite(self, room_id: str, inviter: str, direct: bool) -> None:
        assert self.sender is not None
        answer = self.router.answer_invite(room_id, inviter, direct)
        if answer == "join":
            log.info("matrix: invited to %s by %s; joining", room_id, inviter)
        elif answer == "greet":
            log.info(
                "matrix: DM invite to %s from %s (not allowed); telling them once, then leaving",
                room_id,
                inviter,
            )
        else:
            log.info("matrix: invite to %s from %s (not allowed); declining", room_id, inviter)
        self._spawn(act_on_invite(self.sender, answer, room_id, self.cfg.admins))

    def _delivery_parts(self) -> tuple[Sender | None, Any, bool]:
        synced = self.sync is not None and self.sync.first_sync_done.is_set()
        return self.sender, self.client, synced

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
        """Answer one job. It leaves the pending table only when it is done (SPEC §8): a
        crash or a stop that cuts it short leaves it to the next start, which answers it
        unless the room already holds a reply to it. A message redacted before its turn
        came is not answered."""
        starts = await self.state.started(job)
        try:
            if starts >= MAX_STARTS:
                log.error(
                    "matrix: %s in %s was started %d times without finishing; dropped",
                    job.event_id,
                    job.room_id,
                    starts,
                )
            elif await self._withdrawn(job):
                log.info("matrix: %s was redacted before its turn; not answered", job.event_id)
            elif starts and job.kind not in REVISIONS and await self._answered(job):
                log.info("matrix: %s was answered before the restart; not again", job.event_id)
            else:
                await self._handle(job)
        except asyncio.CancelledError:
            raise  # cut short by a stop: still pending, the next start answers it
        except BaseException:
            await self.state.done(job)  # failed for good (logged by the queue)
            raise
        await self.state.done(job)

    async def _may_redact(self, room_id: str, user_id: str) -> bool:
        """Whether ``user_id`` may redact others' messages in the room, by its state as the
        homeserver has it now (``revisions.may_redact``); False when it cannot be read."""
        assert self.sender is not None
        sender = self.sender
        try:
            answer = await sender.call(
                f"reading the state of {room_id}", lambda: sender.client.room_get_state(room_id)
            )
        except ChazError as exc:
            log.warning("matrix: %s", exc)
            return False
        events = getattr(answer, "events", None)
        return isinstance(events, list) and may_redact(events, user_id)

    async def _withdrawn(self, job: Job) -> bool:
        """Whether ``job``'s message was redacted (by its sender, or someone who may) before
        its turn came."""
        by = self.state.redacted.get(job.event_id, set())
        if not by or job.kind not in ("command", "chat"):
            return False
        if job.sender in by:
            return True
        return any([await self._may_redact(job.room_id, who) for who in sorted(by)])

    async def _revision(self, job: Job) -> None:
        """A redaction or an edit (``revisions``): never answered."""
        session = session_name(job.room_id)
        try:
            if job.kind == "redaction":
                await self.peer.unsay(
                    session,
                    str(job.content.get("redacts", "")),
                    job.sender,
                    await self._may_redact(job.room_id, job.sender),
                    await self.audience(job.room_id),
                )
            else:
                heard = await as_heard(self.sender, job, await self.audience(job.room_id))
                await self.peer.resay(
                    session, str(job.content.get("replaces", "")), job.text, job.sender, heard
                )
        except ChazError as exc:
            log.warning("matrix: %s of %s: %s", job.kind, job.event_id, exc)

    async def _answered(self, job: Job) -> bool:
        """Whether the room holds a message of the bot's replying to ``job``'s event (its
        relation is in the clear, encrypted or not): newest first, back to the event."""
        assert self.sender is not None
        client = self.sender.client

        async def page_at(start: str) -> Any:
            return await client.room_messages(
                job.room_id, start=start, direction=MessageDirection.back, limit=100
            )

        token = self.state.since or ""
        for _ in range(ANSWERED_PAGES):
            try:
                page = await self.sender.call(
                    f"looking for a reply in {job.room_id}", functools.partial(page_at, token)
                )
            except ChazError as exc:  # answer it: a reply re-sent has the same transaction id
                log.warning("matrix: %s", exc)
                return False
            if not isinstance(page, RoomMessagesResponse):
                return False
            for event in page.chunk:
                if getattr(event, "event_id", None) == job.event_id:
                    return False
                source = getattr(event, "source", {}) or {}
                if source.get("sender") == self.user_id and replies_to(source) == job.event_id:
                    return True
            if not page.chunk or not page.end or page.end == token:
                return False
            token = page.end
        return False

    async def _handle(self, job: Job) -> None:
        assert self.sender is not None
        if job.kind in ("command", "chat", "edit", "voice", "picture") and not self.router.allowed(
            job.sender
        ):
            log.info(
                "matrix: %s from %s is no longer allowed; not answered", job.event_id, job.sender
            )
            return
        job.is_admin = matches_any(job.sender, self.cfg.admins)  # as configured now
        if job.kind in REVISIONS:
            await self._revision(job)
        elif job.kind == "undecryptable":
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
                media = None
                if self.media is not None:  # media, or a typed yes to a forget heard (#47)
                    media = await self.media.of(job)
                text, ok, heard, _ = await self._answer(job, media)
                checked = await self._still_heard(job, heard, text)
                build = text_contents if ok and checked is text else notice_contents
                made = (checked, job.event_id, job.content, job.sender)  # Markdown: off the loop
                await self._reply(job, await asyncio.to_thread(build, *made))

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
        """Who has joined another room now (for rows of rooms too big to list their
        audience: under shared history a joined member reads all of it, an invited one
        nothing yet); None when the bot is not in it."""
        room = self.client.rooms.get(session.removeprefix(SESSION_PREFIX))
        return None if room is None else self._people(room)[1]

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
            most=self.cfg.audience_list_max,
        )

    async def _answer(
        self, job: Job, media: Heard | str | None = None
    ) -> tuple[str, bool, Audience | None, bool]:
        """The text that answers a command or an agent turn, whether it is a success, the
        audience it was prepared for, and whether the text is Markdown to send with an HTML
        body (a command's ``help``)."""
        session = session_name(job.room_id)
        audience: Audience | None = None
        try:
            audience = await as_heard(self.sender, job, await self.audience(job.room_id))
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
            if isinstance(media, str):
                return media, False, audience, False
            result = await self.peer.chat(
                media.text if media is not None else job.text,
                session=session,
                sender=job.sender,
                audience=audience,
                prefix=f"{self.cfg.command_prefix} ",
                message_id=job.event_id,
                pictures=media.pictures if media is not None else (),
                spoken=job.kind == "voice",
            )
            text = heard_line(media, result.text) if media is not None else result.text
            return text, result.ok, audience, False
        except ChazError as exc:
            return str(exc), False, audience, False
        except Exception:
            log.exception("matrix: answering %s failed", job.event_id)
            return SOMETHING_WENT_WRONG, False, audience, False

    async def _reply(self, job: Job, contents: list[dict[str, Any]]) -> None:
        assert self.sender is not None
        for part, content in enumerate(contents):
            await self.sender.send(job.room_id, content, transaction_id(job.event_id, part))


def replies_to(source: dict[str, Any]) -> str | None:
    """The event a message replies to (``m.in_reply_to``), or None."""
    content = source.get("content")
    rel = content.get("m.relates_to") if isinstance(content, dict) else None
    reply = rel.get("m.in_reply_to") if isinstance(rel, dict) else None
    target = reply.get("event_id") if isinstance(reply, dict) else None
    return target if isinstance(target, str) else None


__all__ = ["MatrixBot"]

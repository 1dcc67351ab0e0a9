"""Which events become jobs, and one queue per room to run them.

The decisions are ``rules``' pure functions; this module applies them to nio's events
and rooms: who is allowed, which invites to take, what to answer. Each room has its own
queue and worker task, so rooms are served concurrently and each room in order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from nio import (
    InviteMemberEvent,
    MegolmEvent,
    ReactionEvent,
    RoomEncryptedAudio,
    RoomEncryptedImage,
    RoomMessageAudio,
    RoomMessageImage,
    RoomMessageText,
)

from chazbot import metrics
from chazbot.commands.tools_cmds import ANSWER_WORDS
from chazbot.config import MatrixConfig
from chazbot.errors import ChazError
from chazbot.transports.matrix.rules import (
    Me,
    NoticeGate,
    Request,
    is_edit,
    matches_any,
    media_route,
    not_allowed_notice,
    route,
)

log = logging.getLogger(__name__)
MEDIA_EVENTS = (RoomMessageAudio, RoomEncryptedAudio, RoomMessageImage, RoomEncryptedImage)
"""Voice messages and pictures, plain or in encrypted rooms (#39)."""

STOP_GRACE_S = 10.0
YES = frozenset({"✅", "✔", "👍", "☑"})
NO = frozenset({"❌", "✖", "👎", "🚫"})
"""Reactions that answer a tool call waiting for a yes (variation selectors dropped)."""


InviteAnswer = Literal["join", "greet", "decline"]


@dataclass
class Job:
    """One event to answer."""

    room_id: str
    event_id: str
    sender: str
    kind: Literal[
        "command",
        "chat",
        "undecryptable",
        "not_allowed_notice",
        "redaction",
        "edit",
        "voice",
        "picture",
    ]
    text: str = ""
    content: dict[str, Any] = field(default_factory=dict)
    is_admin: bool = False
    heard_by: list[str] | None = None
    """Who was in the room when the event was sent, the bot aside (``heard_then``); None: not
    known (a job stored before this was kept)."""


class Router:
    """Turns events into jobs for one bot account (allow-list, admins, mentions, prefix).

    ``people``: the globs allowed from chat now (``!chaz people allow``), read at every
    event so a change applies at once. Someone not allowed who addresses the bot gets one
    ``not_allowed_notice`` job as ``notices`` permits: once per room a day, bounded
    overall. Someone not allowed who invites the bot to a DM gets the same notice there
    (the bot joins, says it, leaves: ``answer_invite``) as ``invites`` permits: once per
    inviter a day, bounded overall, so strangers cannot make it join rooms without end."""

    def __init__(
        self,
        cfg: MatrixConfig,
        command_words: Iterable[str],
        people: Callable[[], Iterable[str]] = tuple,
        notices: NoticeGate | None = None,
        clock: Callable[[], float] = time.monotonic,
        invites: NoticeGate | None = None,
    ) -> None:
        self.cfg = cfg
        self.command_words = frozenset(command_words)
        self.display_name: str | None = None
        self.people = people
        self.notices = notices or NoticeGate()
        self.invites = invites or NoticeGate()  # keyed by inviter, not by room
        self.clock = clock
        self.is_prompt: Callable[[str], bool] = lambda _: False
        """Whether an event id is a tool call's prompt still waiting (set by the bot)."""

    def allowed(self, sender: str) -> bool:
        return (
            matches_any(sender, self.cfg.allow_list)
            or matches_any(sender, self.cfg.admins)
            or matches_any(sender, tuple(self.people()))
        )

    def inviter(self, invite_state: list[Any]) -> str | None:
        """Who invited the bot, from a room's invite state."""
        return next(
            (
                e.sender
                for e in invite_state
                if isinstance(e, InviteMemberEvent)
                and e.state_key == self.cfg.user_id
                and e.membership == "invite"
            ),
            None,
        )

    def direct(self, invite_state: list[Any]) -> bool:
        """Whether the invite is to a DM (``is_direct`` on the bot's own invite)."""
        return any(
            isinstance(e, InviteMemberEvent)
            and e.state_key == self.cfg.user_id
            and e.membership == "invite"
            and isinstance(e.content, dict)
            and e.content.get("is_direct") is True
            for e in invite_state
        )

    def answer_invite(self, room_id: str, inviter: str, direct: bool) -> InviteAnswer:
        """``join`` an allowed person's invite; ``greet`` a stranger's DM (join, send the
        not-allowed notice, leave) once per inviter a day and within both gates' overall
        bursts; ``decline`` the rest (a stranger's group, or a DM past the gates)."""
        if self.allowed(inviter):
            return "join"
        now = self.clock()
        # the inviter's gate first: one stranger's repeated invites never reach the burst
        # shared with the notices to messages; the room's, so a message of theirs in the DM
        # is never told again
        if direct and self.invites.allow(inviter, now) and self.notices.allow(room_id, now):
            return "greet"
        return "decline"

    def me(self, room: Any) -> Me:
        names = [self.display_name, room.user_name(self.cfg.user_id)]
        return Me(self.cfg.user_id, tuple(n for n in names if n))

    def job(self, room: Any, event: Any, handled: Container[str], noticed: set[str]) -> Job | None:
        """The job ``event`` asks for, or None. ``handled``: event ids answered already;
        ``noticed``: rooms told about an undecryptable message (updated here)."""
        sender = getattr(event, "sender", None)
        event_id = getattr(event, "event_id", None)
        if not isinstance(sender, str) or not isinstance(event_id, str):
            return None
        if sender == self.cfg.user_id or event_id in handled:
            return None
        if isinstance(event, ReactionEvent):
            return self._answer(room.room_id, event_id, sender, event)
        if isinstance(event, MegolmEvent):
            log.warning(
                "matrix: cannot decrypt %s from %s in %s (session %s)",
                event_id,
                sender,
                room.room_id,
                getattr(event, "session_id", "?"),
            )
            if room.room_id in noticed or not self.allowed(sender):
                return None
            noticed.add(room.room_id)
            return Job(room.room_id, event_id, sender, "undecryptable", content={})
        media = isinstance(event, MEDIA_EVENTS)
        if not isinstance(event, RoomMessageText) and not media:
            return None  # notices (from bots), emotes, files, state: never answered
        content = event.source.get("content", {})
        if not isinstance(content, dict) or is_edit(content):
            return None
        request: Request | None
        if media:
            request = media_route(
                content,
                me=self.me(room),
                prefix=self.cfg.command_prefix,
                is_dm=room.member_count == 2,
            )
        else:
            request = route(
                content,
                me=self.me(room),
                prefix=self.cfg.command_prefix,
                is_dm=room.member_count == 2,
                command_words=self.command_words,
            )
        if not self.allowed(sender):
            metrics.MATRIX_EVENTS.labels(outcome="not_allowed").inc()
            if request is None:  # chatter in a group, not for the bot
                log.debug("matrix: ignoring %s from %s (not allowed)", event_id, sender)
                return None
            return self._not_allowed(room.room_id, event_id, sender, content)
        if request is None:
            return None
        return Job(
            room.room_id,
            event_id,
            sender,
            request.kind,
            request.text,
            content,
            is_admin=matches_any(sender, self.cfg.admins),
        )

    def _answer(self, room_id: str, event_id: str, sender: str, event: Any) -> Job | None:
        """A ✅/❌ reaction to a waiting tool call's prompt, as the command ``approve <the
        prompt's event id>`` or ``deny …`` (who may answer is the command's to decide)."""
        key = str(event.key).replace("\ufe0f", "").strip()
        verb = "approve" if key in YES else "deny" if key in NO else None
        target = event.reacts_to
        if verb is None or not isinstance(target, str) or not self.is_prompt(target):
            return None
        if not self.allowed(sender):
            return None
        return Job(room_id, event_id, sender, "command", f"{verb} {target}", {})

    def _not_allowed(
        self, room_id: str, event_id: str, sender: str, content: dict[str, Any]
    ) -> Job | None:
        """A notice job for someone not allowed who addressed the bot, if the gate lets it."""
        gate = self.notices
        if not gate.allow(room_id, self.clock()):
            log.debug(
                "matrix: not answering %s from %s in %s (not allowed; told already)",
                event_id,
                sender,
                room_id,
            )
            return None
        log.info(
            "matrix: not answering %s in %s (not allowed); told them once (notice %d,"
            " %d messages from people not allowed so far)",
            sender,
            room_id,
            gate.told,
            gate.ignored,
        )
        text = not_allowed_notice(self.cfg.admins)
        return Job(room_id, event_id, sender, "not_allowed_notice", text, content)


def answers_now(job: Job) -> bool:
    """Whether ``job`` answers a tool call waiting for a yes: the turn that waits holds its
    room's queue, so the answer runs beside it."""
    words = job.text.split(maxsplit=1)
    return job.kind == "command" and bool(words) and words[0].lower() in ANSWER_WORDS


class RoomQueues:
    """One queue and one worker task per room; ``run`` handles a job. A job ``beside`` says
    so runs at once, beside its room's queue (``answers_now``)."""

    def __init__(
        self,
        run: Callable[[Job], Awaitable[None]],
        beside: Callable[[Job], bool] = answers_now,
    ) -> None:
        self._run = run
        self._beside = beside
        self._queues: dict[str, asyncio.Queue[Job]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._aside: set[asyncio.Task[None]] = set()

    def put(self, job: Job) -> None:
        metrics.MATRIX_EVENTS.labels(outcome=job.kind).inc()
        if self._beside(job):
            task = asyncio.create_task(self._one(job), name=f"matrix-answer-{job.event_id}")
            self._aside.add(task)
            task.add_done_callback(self._aside.discard)
            return
        queue = self._queues.setdefault(job.room_id, asyncio.Queue())
        queue.put_nowait(job)
        worker = self._workers.get(job.room_id)
        if worker is None or worker.done():
            self._workers[job.room_id] = asyncio.create_task(
                self._work(job.room_id, queue), name=f"matrix-room-{job.room_id}"
            )

    async def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Let running jobs finish for up to ``grace_s``; cancel the rest."""
        workers = [w for w in [*self._workers.values(), *self._aside] if not w.done()]
        if not workers:
            return
        _, pending = await asyncio.wait(workers, timeout=grace_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _work(self, room_id: str, queue: asyncio.Queue[Job]) -> None:
        while True:
            try:
                job = queue.get_nowait()
            except asyncio.QueueEmpty:
                self._workers.pop(room_id, None)
                return
            await self._one(job)

    async def _one(self, job: Job) -> None:
        try:
            await self._run(job)
        except asyncio.CancelledError:
            raise
        except ChazError as exc:
            metrics.MATRIX_EVENTS.labels(outcome="failed").inc()
            log.error("matrix: answering %s in %s failed: %s", job.event_id, job.room_id, exc)
        except Exception:
            metrics.MATRIX_EVENTS.labels(outcome="failed").inc()
            log.exception("matrix: answering %s in %s failed", job.event_id, job.room_id)


__all__ = ["STOP_GRACE_S", "InviteAnswer", "Job", "RoomQueues", "Router", "answers_now"]

"""Tool approvals in Matrix (SPEC §12): the ``RoomLink`` the toolbox asks through, and the
reactions that answer a prompt.

A call that needs a yes posts one ``m.notice`` naming the tool and its arguments; a ✅ or ❌
reaction to it (from someone allowed to talk to the bot) becomes the command ``approve <the
prompt's event id>`` or ``deny …``, which the command layer checks like a typed one (only the
person who started the turn, or an admin). Both kinds of answer run beside the room's queue:
the turn they answer holds that queue while it waits (``answers_now``)."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Container
from typing import Any

from nio import ReactionEvent

from chazbot.commands.tools_cmds import ANSWER_WORDS
from chazbot.memory.audience import Audience
from chazbot.tools import Request
from chazbot.transports.matrix.routing import Job, Router
from chazbot.transports.matrix.sending import Sender
from chazbot.transports.matrix_rules import SESSION_PREFIX

YES = frozenset({"✅", "✔️", "✔", "👍", "☑️"})
NO = frozenset({"❌", "✖️", "✖", "👎", "🚫"})


def _bare(key: str) -> str:
    return key.replace("\ufe0f", "").strip()


YES_BARE = frozenset(_bare(k) for k in YES)
NO_BARE = frozenset(_bare(k) for k in NO)


def reaction_job(
    router: Router, room: Any, event: Any, handled: Container[str], is_prompt: Callable[[str], bool]
) -> Job | None:
    """The ``approve``/``deny`` job a ✅/❌ reaction to a waiting prompt asks for, or None."""
    if not isinstance(event, ReactionEvent):
        return None
    sender, event_id = event.sender, event.event_id
    if sender == router.cfg.user_id or event_id in handled or not router.allowed(sender):
        return None
    key = _bare(str(event.key))
    verb = "approve" if key in YES_BARE else "deny" if key in NO_BARE else None
    if verb is None or not isinstance(event.reacts_to, str) or not is_prompt(event.reacts_to):
        return None
    return Job(room.room_id, event_id, sender, "command", f"{verb} {event.reacts_to}", {})


def answers_now(job: Job) -> bool:
    """Whether ``job`` answers a waiting tool call (run beside the room's queue)."""
    words = job.text.split(maxsplit=1)
    return job.kind == "command" and bool(words) and words[0].lower() in ANSWER_WORDS


class MatrixApprovals:
    """The toolbox's ``RoomLink`` for Matrix sessions: prompts and notices in the room, and
    who reads it now (``audience``)."""

    def __init__(
        self,
        sender: Callable[[], Sender | None],
        audience: Callable[[str], Awaitable[Audience]],
        prefix: str,
    ) -> None:
        self._sender = sender
        self._audience = audience
        self.prefix = prefix

    async def _notice(self, session: str, text: str) -> str | None:
        sender = self._sender()
        if sender is None:
            return None
        room_id = session.removeprefix(SESSION_PREFIX)
        content = {"msgtype": "m.notice", "body": text}
        return await sender.send(room_id, content, f"chazbot-tools-{secrets.token_hex(8)}")

    async def prompt(self, request: Request) -> str | bool | None:
        return await self._notice(request.session, request.text(self.prefix))

    async def tell(self, session: str, text: str) -> None:
        await self._notice(session, text)

    async def readers(self, session: str) -> Audience | None:
        return await self._audience(session.removeprefix(SESSION_PREFIX))


__all__ = ["MatrixApprovals", "answers_now", "reaction_job"]

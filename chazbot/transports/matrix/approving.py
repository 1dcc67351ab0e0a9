"""Tool approvals in Matrix (SPEC §12): the ``RoomLink`` the toolbox asks through.

A call that needs a yes posts one ``m.notice`` naming the tool and its arguments; a ✅ or ❌
reaction to it, or ``approve``/``deny``, answers it (``routing`` turns both into commands that
run beside the room's queue, which the waiting turn holds; the command layer checks who may
answer). The bot's access token joins the secrets no tool result may show. Once the bot has
stopped, a prompt cannot be sent: the call is denied (``Approvals.ask``)."""

from __future__ import annotations

import secrets
from typing import Any, Protocol

from chazbot.config import MatrixConfig
from chazbot.memory.audience import Audience
from chazbot.tools import Request, ToolBox
from chazbot.transports.matrix.routing import Router
from chazbot.transports.matrix.rules import SESSION_PREFIX
from chazbot.transports.matrix.sending import Sender


class BotParts(Protocol):
    """What approvals use of the bot: its sender, config and who reads a room now."""

    sender: Sender | None
    cfg: MatrixConfig
    client: Any
    router: Router

    async def audience(self, room_id: str) -> Audience: ...


class MatrixApprovals:
    """The toolbox's ``RoomLink`` for Matrix sessions: prompts and notices in the room, and
    who reads it now."""

    def __init__(self, bot: BotParts) -> None:
        self.bot = bot
        self.prefix = f"{bot.cfg.command_prefix} "

    @classmethod
    def attach(cls, tools: ToolBox, bot: BotParts) -> None:
        """Ask through ``bot`` in every Matrix session, answered by reactions to the prompt
        too (``Router.is_prompt``); its access token is a secret."""
        tools.secrets.add(getattr(bot.client, "access_token", None))
        tools.approvals.attach(SESSION_PREFIX, cls(bot))
        bot.router.is_prompt = tools.approvals.is_prompt

    async def _notice(self, session: str, text: str) -> str | None:
        sender = self.bot.sender
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
        return await self.bot.audience(session.removeprefix(SESSION_PREFIX))


__all__ = ["BotParts", "MatrixApprovals"]

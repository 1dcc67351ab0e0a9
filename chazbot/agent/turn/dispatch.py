"""The one place a turn's tool calls go through: ``TurnTools.dispatch``.

``TurnTools`` holds what the turn offers the model (``offered``: the schemas of the agent's
``allowed_tools`` that exist) and how a call is carried out: the reminder tools act for the
sender in this room (#37), the memory tools within the room's audience. Every call the model
makes passes ``dispatch``, and nothing else runs a tool: a tool's policy (its arguments checked
against the schema, approval, the owner it acts for, its bounds) belongs there, before the
runner is chosen. A tool's errors go back to the model, never to the user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chazbot.agent.chat_model import ToolCall
from chazbot.agent.turn.context import TurnContext
from chazbot.memory.tools import TOOLS, run_tool
from chazbot.reminders.tools import TOOLS as REMINDER_TOOLS
from chazbot.reminders.tools import Asking, run_reminder_tool

KNOWN_TOOLS = frozenset(TOOLS) | frozenset(REMINDER_TOOLS)
"""Every tool a turn may offer: the only names a metric label may carry."""


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool call gave: ``ok`` and the text the model reads (its error when not ok)."""

    ok: bool
    output: str


def tool_label(name: str) -> str:
    """The metric label of a tool call: its name when the turn offers such a tool, else
    ``unknown`` (the name comes from the model, and a prompt injection could send endless
    made-up names, each a new time series)."""
    return name if name in KNOWN_TOOLS else "unknown"


class TurnTools:
    """The tools of one turn (see the module docstring)."""

    def __init__(self, ctx: TurnContext) -> None:
        self.ctx = ctx
        self.allowed = ctx.agent.config.allowed_tools
        heard = ctx.readers
        self.asking = Asking(
            ctx.reminders,
            ctx.session.name,
            ctx.sender,
            heard is None or heard.full,  # the operator's turn; a room's model never acts as admin
            ctx.default_zone,
            heard,
            ctx.memory.hearing.origin,
            ctx.clock,
        )

    def offered(self) -> list[dict[str, Any]] | None:
        """The schemas of the tools the agent may call (None: no tools)."""
        names = [t for t in self.allowed if t in TOOLS or t in REMINDER_TOOLS]
        return [(TOOLS.get(t) or REMINDER_TOOLS[t]).schema() for t in names] or None

    async def dispatch(self, call: ToolCall) -> ToolOutcome:
        """Carry out one tool call of the model (a name it was not offered is refused by
        the runner, as an error the model reads)."""
        if call.name in REMINDER_TOOLS:
            ok, output = await run_reminder_tool(
                self.asking, self.allowed, call.name, call.arguments
            )
        else:
            ok, output = await run_tool(self.ctx.memory, self.allowed, call.name, call.arguments)
        return ToolOutcome(ok, output)


__all__ = ["KNOWN_TOOLS", "ToolOutcome", "TurnTools", "tool_label"]

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
from chazbot.tools import Caller
from chazbot.tools.builtins import BUILTIN_NAMES

KNOWN_TOOLS = frozenset(TOOLS) | frozenset(REMINDER_TOOLS) | frozenset(BUILTIN_NAMES)
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


UNDOING_TOOLS = frozenset({"forget", "cancel_schedule"})
"""Tools that take something away: never offered in a turn whose message was only heard in a
voice note (``TurnContext.spoken``); the person says it again in writing, or answers the
voice path's question with a typed yes."""


class TurnTools:
    """The tools of one turn (see the module docstring)."""

    def __init__(self, ctx: TurnContext) -> None:
        self.ctx = ctx
        allowed = ctx.agent.config.allowed_tools
        self.allowed = [t for t in allowed if not (ctx.spoken and t in UNDOING_TOOLS)]
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
        self.caller = Caller(  # the built-ins and MCP tools (#46): for this person, here
            ctx.agent.name,
            ctx.agent.db,
            ctx.agent.key,
            tuple(self.allowed),
            ctx.session.name,
            ctx.sender,
            heard,
        )
        box = ctx.tools if ctx.can.tools else None
        self.more = box.offered(self.caller) if box is not None else []

    def offered(self) -> list[dict[str, Any]] | None:
        """The schemas of the tools the agent may call (None: no tools): memory and reminder
        tools, then the toolbox's that the agent may use here now."""
        names = [t for t in self.allowed if t in TOOLS or t in REMINDER_TOOLS]
        own = [(TOOLS.get(t) or REMINDER_TOOLS[t]).schema() for t in names]
        return own + self.more or None

    @property
    def outside(self) -> bool:
        """Whether tools whose results come from outside (the web, MCP servers) are offered:
        then the system prompt says their results are data (``tools.DATA_RULE``)."""
        return bool(self.more)

    async def dispatch(self, call: ToolCall) -> ToolOutcome:
        """Carry out one tool call of the model (a name it was not offered is refused by
        the runner, as an error the model reads)."""
        box = self.ctx.tools
        if call.name in REMINDER_TOOLS:
            ok, output = await run_reminder_tool(
                self.asking, self.allowed, call.name, call.arguments
            )
        elif box is not None and box.handles(call.name):  # schema, owner, approval, bounds
            ok, output = await box.call(self.caller, call.name, call.arguments)
        else:
            ok, output = await run_tool(self.ctx.memory, self.allowed, call.name, call.arguments)
        return ToolOutcome(ok, output)


__all__ = ["KNOWN_TOOLS", "UNDOING_TOOLS", "ToolOutcome", "TurnTools", "tool_label"]

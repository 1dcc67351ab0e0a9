"""Tools beyond memory and reminders (SPEC §12): the built-ins (``get_time``, ``calculate``,
``web_fetch``, ``web_search``), MCP servers from config.yaml, and the one gate every call
passes (``toolbox``): allowed, owner, schema, limits, approval, deadline, bounded result."""

from __future__ import annotations

from chazbot.tools.approvals import Approvals, Decision, Request, RoomLink
from chazbot.tools.journal import CallRecord, Journal
from chazbot.tools.results import DATA_RULE
from chazbot.tools.toolbox import Caller, ToolBox, ToolLine

__all__ = [
    "DATA_RULE",
    "Approvals",
    "CallRecord",
    "Caller",
    "Decision",
    "Journal",
    "Request",
    "RoomLink",
    "ToolBox",
    "ToolLine",
]

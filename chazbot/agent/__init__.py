"""Agents: the LLM client (and the embedded local model), sessions, auto-recall, one turn."""

from __future__ import annotations

from chazbot.agent.llm import ChatModel, ChatResult, ToolCall, make_llm
from chazbot.agent.recall import RecallSettings, format_block, recall_query
from chazbot.agent.session import Session
from chazbot.agent.turn import TurnResult, run_turn

__all__ = [
    "ChatModel",
    "ChatResult",
    "RecallSettings",
    "Session",
    "ToolCall",
    "TurnResult",
    "format_block",
    "make_llm",
    "recall_query",
    "run_turn",
]

"""One turn of one agent: requests in words → recall and prompt → the model and its tools →
the answer check (``run.take_turn``; each stage its own module, one ``TurnContext``)."""

from chazbot.agent.turn.context import Incoming, ModelCan, TurnContext
from chazbot.agent.turn.dispatch import KNOWN_TOOLS, TurnTools, tool_label
from chazbot.agent.turn.prompt import auto_recall, now_line
from chazbot.agent.turn.result import TurnResult
from chazbot.agent.turn.run import NO_LLM, run_turn, take_turn

__all__ = [
    "KNOWN_TOOLS",
    "NO_LLM",
    "Incoming",
    "ModelCan",
    "TurnContext",
    "TurnResult",
    "TurnTools",
    "auto_recall",
    "now_line",
    "run_turn",
    "take_turn",
    "tool_label",
]

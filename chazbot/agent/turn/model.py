"""Stage 3 of a turn: the model and its tools.

The model is asked with the prompt and the tools offered (``TurnTools``); each tool call it
makes goes through ``TurnTools.dispatch`` and its output back to the model, until it answers
in text or ``max_iterations`` runs out. What ``recall`` gave is kept as shown to the model
(for the answer check). A failing backend ends the turn with one line.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from chazbot.agent.chat_model import ChatModel
from chazbot.agent.grounding import evidence
from chazbot.agent.turn.context import TurnContext
from chazbot.agent.turn.dispatch import TurnTools
from chazbot.agent.turn.prompt import Prompt
from chazbot.errors import BackendError
from chazbot.tools import DATA_RULE

log = logging.getLogger("chazbot.agent.turn")


@dataclass
class Answered:
    """What the model said: ``reply`` (None: the backend failed, ``failure`` says how), the
    tool calls made ``(tool, ok)``, the seconds the model took, and every text the model was
    shown of memory (``told``: the recalled rows and the ``recall`` tools' outputs)."""

    reply: str | None = None
    failure: str = ""
    tool_calls: list[tuple[str, bool]] = field(default_factory=list)
    llm_seconds: float = 0.0
    told: list[str] = field(default_factory=list)


async def ask_model(ctx: TurnContext, llm: ChatModel, prompt: Prompt) -> Answered:
    """Run the model over ``prompt`` with the agent's tools (see the module docstring)."""
    tools = TurnTools(ctx)
    offered = tools.offered()
    messages = list(prompt.messages)
    if tools.outside and messages and messages[0].get("role") == "system":
        messages[0] = {**messages[0], "content": f"{messages[0]['content']}\n\n{DATA_RULE}"}
    answered = Answered(told=[evidence(r) for r in prompt.shown])
    steps = ctx.agent.config.max_iterations
    for _ in range(steps):
        started = time.perf_counter()
        try:
            answer = await llm.complete(messages, offered, model=ctx.agent.config.model)
        except BackendError as exc:
            answered.llm_seconds += time.perf_counter() - started
            answered.failure = f"The language model failed: {exc}"
            return answered
        answered.llm_seconds += time.perf_counter() - started
        if not answer.tool_calls:
            answered.reply = answer.content or ""
            return answered
        messages.append(
            {
                "role": "assistant",
                "content": answer.content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in answer.tool_calls
                ],
            }
        )
        for call in answer.tool_calls:
            outcome = await tools.dispatch(call)
            answered.tool_calls.append((call.name, outcome.ok))
            if call.name == "recall" and outcome.ok:
                answered.told.append(outcome.output)
            shown = "ok" if outcome.ok else outcome.output
            log.info("tool %s by %s: %s", call.name, ctx.agent.name, shown)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": outcome.output})
    answered.reply = f"I stopped after {steps} steps without a final answer."
    return answered


__all__ = ["Answered", "ask_model"]

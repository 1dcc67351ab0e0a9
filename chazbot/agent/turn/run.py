"""One turn of one agent, as a pipeline of four stages over one ``TurnContext``:

1. ``quick.answer_in_words``: requests in words, answered without the model;
2. ``prompt.recall_and_prompt``: the conversation, auto-recall and the system prompt;
3. ``model.ask_model``: the model and its tools (each call through ``TurnTools.dispatch``);
4. ``check.check_answer``: the answer check before the reply is sent.

A stage that answers ends the turn; the reply is kept in the session's history.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from chazbot.agent.recall import DEFAULT_TUNING, RecallTuning
from chazbot.agent.turn.check import check_answer
from chazbot.agent.turn.context import Incoming, TurnContext, utc_now
from chazbot.agent.turn.model import ask_model
from chazbot.agent.turn.prompt import recall_and_prompt
from chazbot.agent.turn.quick import answer_in_words
from chazbot.agent.turn.result import TurnResult

if TYPE_CHECKING:
    from chazbot.agent.capture import Mode
    from chazbot.agent.chat_model import ChatModel
    from chazbot.agent.host import AgentHandle, TurnHost
    from chazbot.agent.pictures import Picture
    from chazbot.agent.session import Session
    from chazbot.memory.scope import MemoryScope

NO_LLM = (
    "No LLM is configured: set llm: in config.yaml or install chazbot[local]. "
    "Commands still work (try help)."
)


async def take_turn(ctx: TurnContext, said: Incoming) -> TurnResult:
    """Answer one message (see the module docstring); tool errors go back to the model,
    never to the user."""
    await ctx.session.add_message("user", said.text, ctx.sender)
    quick = await answer_in_words(ctx, said)
    if quick is not None:
        return quick
    if ctx.llm is None:
        return TurnResult(NO_LLM, ok=False)
    prompt = await recall_and_prompt(ctx, said)
    if isinstance(prompt, TurnResult):
        return prompt
    answered = await ask_model(ctx, ctx.llm, prompt)
    result = TurnResult(
        answered.failure,
        tool_calls=answered.tool_calls,
        recalled=prompt.hits,
        llm_seconds=answered.llm_seconds,
    )
    if answered.reply is None:
        result.ok = False
        return result
    checked = await check_answer(ctx, said, answered.reply, answered.told, prompt.shown)
    await ctx.say(checked.reply)
    result.text, result.withheld = checked.reply, checked.withheld
    return result


async def run_turn(
    peer: TurnHost,
    agent: AgentHandle,
    session: Session,
    text: str,
    sender: str,
    llm: ChatModel | None,
    memory: MemoryScope | None = None,
    timezone: str = "UTC",
    pictures: Sequence[Picture] = (),
    acknowledge: bool = False,
    tuning: RecallTuning = DEFAULT_TUNING,
    clock: Callable[[], datetime] = utc_now,
) -> TurnResult:
    """``take_turn`` with its context opened here (``TurnContext.open``), for callers that
    hold the pieces: ``memory`` the agent's memory as heard in this session (default its own
    view), ``timezone`` the zone of a sender with none of their own, ``acknowledge`` capture
    keeps what is told here, ``tuning`` how auto-recall builds its queries (benches pass
    theirs), ``clock`` now (tests inject theirs)."""
    capture: Mode = "messages" if acknowledge else "off"
    ctx = await TurnContext.open(
        peer, agent, session, sender, llm, memory, timezone, capture, tuning, clock
    )
    return await take_turn(ctx, Incoming(text, pictures))


__all__ = ["NO_LLM", "run_turn", "take_turn"]

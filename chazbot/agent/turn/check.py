"""Stage 4 of a turn: the answer check, before the reply is sent.

An empty reply says so; a model that cannot see says it could not look at the pictures (#39);
and a reply to a question about a person (the asker, someone it names, or a follow-up of such a
question, read with it: ``answering.question_to_check``, #45) must stand on what the model was
shown of memory (``grounding.grounded``, #36), else it is withheld and the person is told, in
their language, what memory does hold (``asked.unsupported``).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace

from chazbot.agent import asked
from chazbot.agent.answering import chosen_row, names, question_to_check
from chazbot.agent.grounding import evidence, grounded, stands_on
from chazbot.agent.pictures import CANNOT_SEE
from chazbot.agent.turn.context import Incoming, TurnContext
from chazbot.agent.turn.quick import WORDS_MAX_CHARS
from chazbot.memory.rows import MemoryRow

log = logging.getLogger("chazbot.agent.turn")

EVIDENCE_LINE_CHARS = 2_000
"""What the answer check reads of each line the model was shown: a row of 16 KiB built to be
slow ("my son is my son …") took 16 s to check; cutting only ever makes the check stricter."""


@dataclass(frozen=True)
class Checked:
    """The reply to send, and the model's reply it replaced (None: it stands)."""

    reply: str
    withheld: str | None = None


async def check_answer(
    ctx: TurnContext, said: Incoming, reply: str, told: list[str], shown: list[MemoryRow]
) -> Checked:
    """The reply as it may be sent (see the module docstring). ``told``: every text the model
    was shown of memory; ``shown``: the recalled rows (what the person is told instead)."""
    text = said.text
    reply = reply.strip() or "(no reply)"
    if said.pictures and not ctx.can.vision:
        reply = f"{CANNOT_SEE} {reply}" if text.strip() else CANNOT_SEE
    question = await question_to_check(text[-WORDS_MAX_CHARS:], ctx.session, ctx.sender, ctx.memory)
    if question is None or await _grounded(question, reply, told):
        return Checked(reply)
    if await stands_on_chosen(text[-WORDS_MAX_CHARS:], question, reply, ctx, shown):
        return Checked(reply)  # the row chosen by meaning says it (#45)
    log.info("turn agent=%s: a reply about the person stood on nothing shown", ctx.agent.name)
    # an answer about the person needs a row about it (#36), in the person's language
    bounded = [replace(r, value=r.value[:EVIDENCE_LINE_CHARS]) for r in shown]
    instead = await asyncio.to_thread(
        asked.unsupported, question[-WORDS_MAX_CHARS:], bounded, ctx.memory, ctx.sender
    )
    return Checked(instead, withheld=reply)


async def stands_on_chosen(
    text: str, question: str, reply: str, ctx: TurnContext, shown: list[MemoryRow]
) -> bool:
    """Whether ``reply`` stands on the row the embedded model would answer ``text`` from
    (``answering.chosen_row``: chosen by subject and meaning, across languages), when the
    model was shown it: a right answer whose row shares no word with the question's
    predicate ("Was unterrichtet mein Mann?" beside "My husband Raj teaches chemistry")."""
    found = await chosen_row(text, ctx.memory, ctx.sender, ctx.session)
    row = found[1] if found is not None else None
    if row is None or not any(r.ident == row.ident for r in shown):
        return False
    line = evidence(row)[:EVIDENCE_LINE_CHARS]
    return await asyncio.to_thread(stands_on, question, reply, [line])


async def _grounded(question: str, reply: str, told: list[str]) -> bool:
    """``grounding.grounded`` off the event loop, each line it reads bounded
    (``EVIDENCE_LINE_CHARS``; of a long question its end, where the question is)."""
    cut = ["\n".join(line[:EVIDENCE_LINE_CHARS] for line in t.splitlines()) for t in told]
    asked = question[-WORDS_MAX_CHARS:]
    return await asyncio.to_thread(grounded, asked, reply, cut, names(asked))


__all__ = ["EVIDENCE_LINE_CHARS", "Checked", "check_answer"]

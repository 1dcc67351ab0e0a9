"""Stage 1 of a turn: requests in words, answered without the model.

"remind me …" sets a reminder (in the languages of ``reminders.when``), a request the word
rules know (forget, remember, undo, "what do you know about me", …; ``words.intent``) is
carried out by ``forgetting.answer`` (a forget, its undo and the choice from its list) or
``asked.answer`` (the rest), and where capture keeps what is told, a message that tells
one fact is acknowledged ("Noted: …"). For a model that does not compose (``composes``), a
question about a person is answered from one row (``answering``, #45). None: the message goes
on to the model.
"""

from __future__ import annotations

import asyncio

from chazbot.agent import asked, forgetting
from chazbot.agent.answering import answer_about_person
from chazbot.agent.forgetting import FORGET_KINDS
from chazbot.agent.turn.context import Incoming, TurnContext
from chazbot.agent.turn.result import TurnResult
from chazbot.agent.words import asks, intent
from chazbot.errors import InputError
from chazbot.reminders.setting import set_reminder
from chazbot.reminders.when import asks_for_reminder, off_loop
from chazbot.reminders.zones import says_where, set_zone_from_words, zone_in_words

WORDS_MAX_CHARS = 2_000
"""A message longer than this is no request in words (forget, remember, undo…): it goes to the
model. The word rules read every clause of a message, and on tens of KB of punctuation they took
seconds (a 60 KB message of dots held the event loop 3.3 s); they run off the loop as well."""


async def answer_in_words(ctx: TurnContext, said: Incoming) -> TurnResult | None:
    """The answer to a request in words (kept in the history), or None (see the module)."""
    text = said.text
    hearing = ctx.memory.hearing
    saying = says_where(text) and not asks(text)  # most turns: no hop to the reading thread
    moved = await off_loop(zone_in_words, text) if saying else None
    zone_said = ""  # "I live in Lisbon": the person's zone, set first, confirmed with the rest
    rest = text
    if moved is not None:
        zone_said = await set_zone_from_words(
            ctx.reminders, ctx.sender, moved, hearing.prefix, ctx.clock()
        )
        rest = moved.without(text)
    if asks_for_reminder(rest) is not None:
        reminder: str | None
        try:
            reminder = await set_reminder(
                ctx.reminders,
                rest,
                ctx.session.name,
                ctx.sender,
                ctx.default_zone,
                False,
                origin=hearing.origin,
                prefix=hearing.prefix,
            )
        except InputError as exc:
            reminder = None if asks(text) else f"{exc} (nothing was set)"
        if reminder is not None:
            reminder = "\n".join(filter(None, (zone_said, reminder)))
            await ctx.say(reminder)
            return TurnResult(reminder, answered_in_words=True)
    found = await asyncio.to_thread(intent, text) if len(text) <= WORDS_MAX_CHARS else None
    if found is not None:
        tools = frozenset(ctx.agent.config.allowed_tools) if ctx.can.tools else frozenset()
        if found.kind in FORGET_KINDS:  # forgets by words and by meaning (#45)
            words = await forgetting.answer(found, ctx.memory, ctx.sender, ctx.session)
        else:
            words = await asked.answer(
                found, ctx.memory, ctx.agent.name, ctx.sender, tools, ctx.session
            )
        if words is not None:
            words = "\n".join(filter(None, (words, zone_said)))
            await ctx.say(words)
            return TurnResult(words, answered_in_words=True)
    noted = None
    if ctx.acknowledge and not said.pictures:
        noted = asked.acknowledgement(text, (ctx.agent.name,))
    if noted is not None or zone_said:  # capture still keeps what was told, zone or not
        noted = "\n".join(filter(None, (noted, zone_said)))
        await ctx.say(noted)
        return TurnResult(noted)
    if ctx.llm is not None and not ctx.can.composes and len(text) <= WORDS_MAX_CHARS:
        # a model that does not compose answers about people from one row (#45)
        one = await answer_about_person(text, ctx.memory, ctx.sender, ctx.session)
        if one is not None:
            await ctx.say(one)
            return TurnResult(one)
    return None


__all__ = ["WORDS_MAX_CHARS", "answer_in_words"]

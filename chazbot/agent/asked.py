"""Answers a turn gives without asking the model: what ``words.intent`` finds (#17).

- the intro ("what can you do?", "help"): what the bot remembers, how to see and forget it,
  how to address it in a group, the ``help`` pointer;
- "what do you know about me?": the person's own rows this room may see;
- "remember that …" (models without tools): one row said by the person.

A forget, its undo and the choice from its list are ``forgetting``'s (``turn.quick`` sends
them there).

And the honest answer of a model without tools, asked about the person with nothing
recalled: that it does not know yet, never an invented fact (the embedded 0.5B model answered
"What is my cat's name?" with the dog's name).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from chazbot.agent.answering import fits, read_question
from chazbot.agent.capture import Said, message_row, speaker_name
from chazbot.agent.concepts import ATTRIBUTE_WORDS
from chazbot.agent.forgetting import alone, whose_rows
from chazbot.agent.grounding import evidence, supports
from chazbot.agent.lexicon import reply
from chazbot.agent.words import Intent, as_said_to_them, language, told
from chazbot.memory.rows import MemoryRow, said_text
from chazbot.memory.tokenize import auto_recall_query, tokenize

if TYPE_CHECKING:
    from chazbot.agent.session import Session
    from chazbot.memory.scope import MemoryScope

ABOUT_SHOWN = 10
DONT_KNOW = reply("en", "dont_know")
"""The English "I don't know" (``dont_know`` answers in the language asked in)."""


def dont_know(question: str) -> str:
    """ "I don't know" in the language of ``question`` (``words.language``: the one guess of
    the language, as the acknowledgement makes it), English when none is told apart."""
    return reply(language(question), "dont_know")


def unsupported(question: str, shown: Sequence[MemoryRow], memory: MemoryScope, sender: str) -> str:
    """The reply when the model's answer about the person stood on nothing it was shown
    (``grounding.grounded``): when exactly one shown row *the person said* answers the
    question (``grounding.supports``: its subject and predicate), their own words from it,
    turned to them ("You told me: your father works as a carpenter."), in the language asked
    in; otherwise "I don't know". A small model often paraphrases the right row into words
    the row does not have ("His job is to make furniture."): the row itself is what they
    said. Another person's row is never quoted as theirs."""
    speaker = whose_rows(memory, sender)
    whom = read_question(question)  # "What does Ben do?" is not answered by the asker's job
    said = {
        said_text(r.value).strip()
        for r in shown
        if (r.origin.speaker == speaker if r.origin is not None else speaker is None)
        and supports(evidence(r), question)
        and fits(evidence(r), whom)
    }
    if len(said) != 1:
        return dont_know(question)
    (text,) = said
    words = as_said_to_them(text.rstrip(" .!"), language(text))
    if words.startswith(("Your ", "You ")):
        words = words[0].lower() + words[1:]
    return reply(language(question), "you_said", what=words)


def false_friend(row: MemoryRow, question: str) -> bool:
    """Whether ``row`` shares words with ``question`` only through attribute words: "What is
    my cat's name?" and "My sister's name is Ada" share "name", and a small model asked the
    first with the second beside it answered "Ada". Rows that share no word at all came from
    the vector ranker and stand or fall by its floor; a row that answers the question
    (``grounding.supports``) is kept whatever words it shares."""
    asked_words = set(auto_recall_query([question], 10))
    shared = asked_words & set(tokenize(f"{row.key} {row.value}"))
    if not shared or not shared <= ATTRIBUTE_WORDS:
        return False
    # a row the answer check would stand on is no false friend: "I live in Utrecht" for
    # "Which city do I live in?" shares only "live", and is the answer
    return not supports(evidence(row), question)


def intro(agent: str, prefix: str, lang: str = "en") -> str:
    """What the bot is and how to use it, in ``lang`` (``lexicon.REPLIES``, "intro")."""
    return reply(lang, "intro", agent=agent, prefix=prefix, bare=prefix.strip())


async def about_me(memory: MemoryScope, sender: str, lang: str = "en") -> str:
    """The person's own rows this room may see, newest first, in ``lang``."""
    view = await memory.engine.view(memory.db)
    everywhere = alone(memory, sender)
    rows = view.rows_by(whose_rows(memory, sender), None if everywhere else memory.hearing.audience)
    if not rows:
        return reply(lang, "told_nothing" if everywhere else "told_nothing_here")
    lines = [f"- {said_text(r.value)}" for r in rows[:ABOUT_SHOWN]]
    if len(rows) > ABOUT_SHOWN:
        head = reply(lang, "told_newest", shown=ABOUT_SHOWN, total=len(rows))
    else:
        head = reply(lang, "told")
    return head + "\n" + "\n".join(lines)


async def remember_words(
    memory: MemoryScope, sender: str, what: str, session_db: str, lang: str = "en"
) -> str:
    """Keep ``what`` as a row the person said (as message capture shapes one)."""
    when = datetime.now(UTC)
    source = hashlib.sha256(f"{session_db}:{when.timestamp()}:{what}".encode()).hexdigest()[:8]
    said = Said(speaker_name(sender), when, what, None, source)
    key, value, tags = message_row(said)
    await memory.remember(key, value, tags)
    return reply(lang, "remembered", what=as_said_to_them(what.rstrip(".!"), lang))


NOTED = "Noted: {fact}."
"""The acknowledgement of a told fact (#40) in English: the fact in the listener's words,
nothing added; in the person's language it is ``lexicon.REPLIES[lang]["remembered"]``."""


def acknowledgement(text: str, names: tuple[str, ...] = ()) -> str | None:
    """ "Noted: your cat is called Miso." for a message that tells a fact to keep, for every
    model (a small one elaborated: "Miso is a domesticated cat from the United States"), in
    the language it was told in ("Notiert: dein Hund heißt Rex."), or None when the message
    is anything else (the model answers it)."""
    fact = told(text, names)
    return None if fact is None else reply(language(text), "remembered", what=fact)


async def answer(
    found: Intent,
    memory: MemoryScope,
    agent: str,
    sender: str,
    tools: frozenset[str],
    session: Session,
) -> str | None:
    """The reply to ``found`` (an intro, "what do you know about me", a remember) without the
    model, or None when the model should answer or ``found`` is a forget (``forgetting.answer``):
    ``tools`` are the tools the model may call (a remember in words is the model's when it has
    that tool; otherwise, whatever the model, it is answered here).
    Commands it names are written as where ``memory`` is heard (``hearing.prefix``)."""
    if found.kind == "intro":
        return intro(agent, memory.hearing.prefix, found.lang)
    if found.kind == "about_me":
        return await about_me(memory, sender, found.lang)
    if found.kind != "remember" or "remember" in tools:
        return None  # a forget is ``forgetting.answer``'s; a model given the remember tool
    return await remember_words(memory, sender, found.what, session.db, found.lang)


__all__ = [
    "DONT_KNOW",
    "NOTED",
    "about_me",
    "acknowledgement",
    "answer",
    "dont_know",
    "false_friend",
    "intro",
    "remember_words",
    "unsupported",
]

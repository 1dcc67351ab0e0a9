"""A forget in words, carried out (#45): the person's own rows that the words name, by words
and by meaning, across languages.

- All of the person's rows that the room may see are the candidates (never anyone else's).
- Rows that share the words (BM25, as ``/memory forget-mine`` finds them) are taken together
  ("forget my sister" takes both sister rows) when the row nearest by meaning is one of them
  and leads every other row by the margin; a shared word alone ("elke" of "wat ik elke
  ochtend doe" and "Ik neem elke dag de trein") is not enough.
- Otherwise the rows are ranked by meaning (``forget_meaning.ranked``): one that leads the next
  by ``MeaningTuning.margin`` is forgotten alone; else the near ones are listed, numbered, and
  the person is asked which, in their language (``undo.offer``; a number answers). "Nothing
  kept" is said only when the person has no row at all here.
- Every forget goes to the person's undo stack (``UndoSlots``): each of the last
  ``UNDO_MINUTES`` can be taken back, one "undo" each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from chazbot.agent import asked
from chazbot.agent.answering import choose_row, fits, read_question
from chazbot.agent.forget_meaning import DEFAULT_MEANING_TUNING, MeaningTuning, ranked
from chazbot.agent.grounding import evidence
from chazbot.agent.lexicon import reply
from chazbot.agent.undo import UndoSlots
from chazbot.agent.words import Intent
from chazbot.memory.rows import MemoryRow, said_text
from chazbot.memory.tokenize import auto_recall_query

if TYPE_CHECKING:
    from chazbot.agent.session import Session
    from chazbot.memory.audience import Audience
    from chazbot.memory.scope import MemoryScope
    from chazbot.memory.view import MemoryView

FORGET_KINDS = frozenset({"forget", "forget_last", "choose", "undo"})
"""The intents this module answers (``words.intent``)."""
IS_IT: dict[str, str] = {
    "en": "Do you mean this? Answer 1 to forget it.\n{rows}",
    "de": "Meinst du das? Antworte mit 1, um es zu vergessen.\n{rows}",
    "fr": "C'est bien ceci ? Réponds 1 pour l'oublier.\n{rows}",
    "es": "¿Te refieres a esto? Responde 1 para olvidarlo.\n{rows}",
    "nl": "Bedoel je dit? Antwoord 1 om het te vergeten.\n{rows}",
}
"""The question when one row only is near enough to be meant, but not clearly (a list of
one: "Which one do you mean?" read oddly), in the person's language."""
CHOSEN_BONUS = 0.02
"""Added to the score of the row a question of the forget's words would be answered from
(``answering.choose_row``: its subject, its kind, the five languages' words)."""


def _speaker(memory: MemoryScope, sender: str) -> str | None:
    return sender if memory.hearing.origin is not None else None


def _alone(memory: MemoryScope, sender: str) -> bool:
    audience = memory.hearing.audience
    return audience is None or audience.full or audience.only(sender)


async def forget_words(
    memory: MemoryScope,
    sender: str,
    what: str,
    undo: UndoSlots | None = None,
    lang: str = "en",
    tuning: MeaningTuning = DEFAULT_MEANING_TUNING,
) -> str:
    """Hide the person's own rows that ``what`` names ("" for all of them); see the module."""
    speaker = _speaker(memory, sender)
    view = await memory.engine.view(memory.db)
    audience = None if _alone(memory, sender) else memory.hearing.audience
    theirs = view.rows_by(speaker, audience)
    if not what:
        return await asked._forget(memory, sender, theirs, undo, lang)
    if not theirs:
        return reply(lang, "none", what=what)
    rows = asked.keyed(theirs, what)  # "forget 5", "the key 5": a key named
    if rows:
        return await asked._forget(memory, sender, rows, undo, lang, what)
    by_words = _by_words(view, theirs, what, audience)
    meant = await _by_meaning(memory, theirs, by_words, what, speaker, tuning)
    best, top = meant[0]
    gap = top - meant[1][1] if len(meant) > 1 else top
    if by_words and best in by_words:
        other = next((score for row, score in meant if row not in by_words), None)
        if other is None or top - other >= tuning.margin:  # "forget my sister": both rows
            return await asked._forget(memory, sender, by_words, undo, lang, what)
    if not by_words and top >= tuning.alone and gap >= tuning.margin and _whose(best, what):
        return await asked._forget(memory, sender, [best], undo, lang, what)
    floor = max(tuning.floor, top - tuning.window)
    listed = [row for row, score in meant if score >= floor][: tuning.listed]
    listed += [row for row in by_words if row not in listed][: max(0, tuning.listed - len(listed))]
    if not listed:
        return reply(lang, "none", what=what)
    if undo is not None:
        undo.offer(sender, memory.db, listed, lang)
    if len(listed) == 1:
        return IS_IT.get(lang, IS_IT["en"]).format(rows=f"1. {said_text(listed[0].value)}")
    return asked.which_one(listed, lang)


def _whose(row: MemoryRow, what: str) -> bool:
    """Whether ``row`` is about whom ``what`` names, when it names someone ("wo mein Vater
    wohnt": the father's row, not the person's own)."""
    q = read_question(what)
    if not q.subject and not q.names:
        return True
    return fits(evidence(row), replace(q, about_asker=False))


def _by_words(
    view: MemoryView, theirs: Sequence[MemoryRow], what: str, audience: Audience | None
) -> list[MemoryRow]:
    """The person's rows that share a word of ``what`` that names something and are about
    whom it names, the best by BM25 and those near it (``asked.FORGET_RATIO``)."""
    words = [w for w in auto_recall_query([what], 10) if w not in asked.PLAIN_WORDS]
    words = [w for w in words if w not in asked.ATTRIBUTE_WORDS] or words
    if not words:
        return []
    mine = {r.ident for r in theirs}
    found = view.search(" ".join(words), (), asked.FORGET_CANDIDATES, None, audience)
    named = read_question(what)  # whose: "où j'habite" is not "ma mère habite"
    hits = [
        r
        for r in found
        if r.bm25 is not None
        and r.row.ident in mine
        and asked.says_any(r.row, words)
        and fits(evidence(r.row), named)
    ]
    best = max((r.score for r in hits), default=0.0)
    return [r.row for r in hits if r.score >= asked.FORGET_RATIO * best]


async def _by_meaning(
    memory: MemoryScope,
    theirs: Sequence[MemoryRow],
    by_words: Sequence[MemoryRow],
    what: str,
    speaker: str | None,
    tuning: MeaningTuning,
) -> list[tuple[MemoryRow, float]]:
    """The person's rows best first for ``what`` (``forget_meaning.ranked``), the row a
    question of these words would be answered from a little ahead."""
    engine = memory.engine
    rows = list(theirs)
    if len(rows) > tuning.max_rows:  # the nearest by stored vector, and those of the words
        vector = await engine.query_vector(what)
        view = await engine.view(memory.db)
        found = view.search(what, (), tuning.max_rows * 3, vector, None, None, engine.ranking)
        mine = {r.ident: r for r in rows}
        near = [mine[r.row.ident] for r in found if r.row.ident in mine][: tuning.max_rows]
        rows = near + [r for r in by_words if r not in near]
        rows = rows or list(theirs[: tuning.max_rows])
    scored = await ranked(engine.embedder, rows, what, tuning)
    chosen = await choose_row(memory, read_question(what), asker=speaker, only_asker=True)
    if chosen is not None:
        scored = [(r, s + (CHOSEN_BONUS if r.ident == chosen.ident else 0.0)) for r, s in scored]
        scored.sort(key=lambda rs: rs[1], reverse=True)
    return scored


async def answer(
    found: Intent, memory: MemoryScope, sender: str, tools: frozenset[str], session: Session
) -> str | None:
    """The reply to a forget, "forget what I just said", a number answering a list, or
    "undo"; None when ``found`` is none of them, or a forget that the model does by calling
    its ``forget`` tool (``tools``)."""
    if found.kind == "undo":
        return await asked.undo_forget(memory, sender, session.undo, found.lang)
    if found.kind == "forget_last":
        return await asked.forget_last(memory, sender, session, session.undo, found.lang)
    if found.kind == "choose":
        return await asked.choose_forget(memory, sender, found.what, session.undo, found.lang)
    if found.kind != "forget" or "forget" in tools:
        return None
    return await forget_words(memory, sender, found.what, session.undo, found.lang)


__all__ = ["CHOSEN_BONUS", "FORGET_KINDS", "IS_IT", "answer", "forget_words"]

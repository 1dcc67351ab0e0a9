"""A forget in words, carried out (#45): the person's own rows that the words name, by words
and by meaning, across languages; "forget what I just said", the choice from a list, "undo".

- All of the person's rows that the room may see are the candidates (never anyone else's).
- Rows that share the words (BM25, as ``/memory forget-mine`` finds them) are taken together
  ("forget my sister" takes both sister rows) when the row nearest by meaning is one of them
  and leads every other row by the margin; a shared word alone ("elke" of "wat ik elke
  ochtend doe" and "Ik neem elke dag de trein") is not enough.
- Otherwise the rows are ranked by meaning (``forget_meaning.ranked``): one that leads the next
  by ``MeaningTuning.margin`` is forgotten alone; else the near ones are listed, numbered, and
  the person is asked which, in their language (``undo.offer``; a number answers,
  ``choose_forget``). "Nothing kept" is said only when the person has no row at all here.
- "Forget what I just said" (``forget_last``): the rows captured from their previous message.
- Every forget goes to the person's undo stack (``UndoSlots``): each of the last
  ``UNDO_MINUTES`` can be taken back, one "undo" each (``undo_forget``, ``restore_rows``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from chazbot.agent.answering import choose_row, fits, read_question
from chazbot.agent.concepts import ATTRIBUTE_WORDS
from chazbot.agent.forget_meaning import (
    DEFAULT_MEANING_TUNING,
    MeaningTuning,
    Scored,
    of_someone,
    ranked,
    row_words,
)
from chazbot.agent.grounding import FUNCTION, POSSESSIVES, QUESTION, evidence
from chazbot.agent.lexicon import reply
from chazbot.agent.undo import UNDO_MINUTES, UndoSlots
from chazbot.agent.words import Intent
from chazbot.memory.rows import MemoryRow, said_text
from chazbot.memory.tokenize import auto_recall_query, document_text, tokenize

if TYPE_CHECKING:
    from chazbot.agent.session import Session
    from chazbot.memory.audience import Audience
    from chazbot.memory.scope import MemoryScope
    from chazbot.memory.view import MemoryView

FORGET_KINDS = frozenset({"forget", "forget_last", "choose", "undo"})
"""The intents this module answers (``words.intent``)."""
PLAIN_WORDS = FUNCTION | QUESTION | POSSESSIVES
"""Words that name nothing to forget, in the five languages ("wo *ich* geboren *bin*": "ich"
found every row told in German)."""
FORGET_RATIO = 0.8
"""Rows scoring at least this share of the best match are forgotten with it: "forget my
sister" takes both sister rows; "forget my manager's name" not the sister's name row."""
FORGET_CANDIDATES = 20
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
_CHOICE = re.compile(r"^\W*(\d{1,2})\W*$")


def whose_rows(memory: MemoryScope, sender: str) -> str | None:
    """Whose rows are the person's: their MXID, or the operator's (None) in the terminal."""
    return sender if memory.hearing.origin is not None else None


def alone(memory: MemoryScope, sender: str) -> bool:
    """Whether the room is the person's alone (or unfiltered): all their rows may be shown."""
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
    speaker = whose_rows(memory, sender)
    view = await memory.engine.view(memory.db)
    audience = None if alone(memory, sender) else memory.hearing.audience
    theirs = view.rows_by(speaker, audience)
    if not what:
        return await _forget(memory, sender, theirs, undo, lang)
    if not theirs:
        return reply(lang, "none", what=what)
    rows = keyed(theirs, what)  # "forget 5", "the key 5": a key named
    if rows:
        return await _forget(memory, sender, rows, undo, lang, what)
    by_words = _by_words(view, theirs, what, audience)
    meant = await _by_meaning(memory, theirs, by_words, what, speaker, tuning)
    best, top, _ = meant[0]
    gap = top - meant[1].score if len(meant) > 1 else top
    if by_words and best in by_words:
        other = next((m.score for m in meant if m.row not in by_words), None)
        if other is None or top - other >= tuning.margin:  # "forget my sister": both rows
            return await _forget(memory, sender, by_words, undo, lang, what)
    clear = top >= tuning.alone and gap >= tuning.lead
    if not by_words and clear and _whose(best, what) and not _someone_elses(best, what):
        return await _forget(memory, sender, [best], undo, lang, what)
    floor = max(tuning.floor, top - tuning.window)
    listed = [m.row for m in meant if m.score >= floor][: tuning.listed]
    if len(listed) < tuning.at_least:  # several could be meant: ask which, not "is it this?"
        listed = [m.row for m in meant if m.score >= tuning.floor][: tuning.at_least]
    listed += [row for row in by_words if row not in listed][: max(0, tuning.listed - len(listed))]
    if not listed:
        return reply(lang, "none", what=what)
    if undo is not None:
        undo.offer(sender, memory.db, listed, lang)
    if len(listed) == 1:
        return IS_IT.get(lang, IS_IT["en"]).format(rows=f"1. {said_text(listed[0].value)}")
    return which_one(listed, lang)


def _whose(row: MemoryRow, what: str) -> bool:
    """Whether ``row`` is about whom ``what`` names, when it names someone ("wo mein Vater
    wohnt": the father's row, not the person's own)."""
    q = read_question(what)
    if not q.subject and not q.names:
        return True
    return fits(evidence(row), replace(q, about_asker=False))


def _someone_elses(row: MemoryRow, what: str) -> bool:
    """Whether ``row`` tells of someone of the person's while ``what`` names no one ("what
    I do for work" and "My colleague Tim works as a cook"): never forgotten without asking."""
    q = read_question(what)
    return not q.subject and not q.names and of_someone(row_words(row))


def _by_words(
    view: MemoryView, theirs: Sequence[MemoryRow], what: str, audience: Audience | None
) -> list[MemoryRow]:
    """The person's rows that share a word of ``what`` that names something and are about
    whom it names, the best by BM25 and those near it (``FORGET_RATIO``)."""
    words = [w for w in auto_recall_query([what], 10) if w not in PLAIN_WORDS]
    words = [w for w in words if w not in ATTRIBUTE_WORDS] or words
    if not words:
        return []
    mine = {r.ident for r in theirs}
    found = view.search(" ".join(words), (), FORGET_CANDIDATES, None, audience)
    named = read_question(what)  # whose: "où j'habite" is not "ma mère habite"
    hits = [
        r
        for r in found
        if r.bm25 is not None
        and r.row.ident in mine
        and says_any(r.row, words)
        and fits(evidence(r.row), named)
    ]
    best = max((r.score for r in hits), default=0.0)
    return [r.row for r in hits if r.score >= FORGET_RATIO * best]


async def _by_meaning(
    memory: MemoryScope,
    theirs: Sequence[MemoryRow],
    by_words: Sequence[MemoryRow],
    what: str,
    speaker: str | None,
    tuning: MeaningTuning,
) -> list[Scored]:
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
        scored = [
            m._replace(score=m.score + CHOSEN_BONUS * (m.row.ident == chosen.ident)) for m in scored
        ]
        scored.sort(key=lambda m: m.score, reverse=True)
    return scored


def keyed(rows: Sequence[MemoryRow], what: str) -> list[MemoryRow]:
    """Those of ``rows`` whose key ``what`` names: all of it, or its last words ("my 5",
    "the key 5"), the longest that is a key, compared case-insensitively."""
    by_key: dict[str, list[MemoryRow]] = {}
    for row in rows:
        by_key.setdefault(row.key.casefold(), []).append(row)
    words = what.split()
    for start in range(len(words)):
        found = by_key.get(" ".join(words[start:]).casefold())
        if found:
            return found
    return []


def says_any(row: MemoryRow, words: list[str]) -> bool:
    """Whether the row itself (key, value, tags: SPEC §3's document) has one of ``words``:
    recall also finds a told row by its teller and its day (``view.indexed_tokens``), which
    must not make "forget what I said about May" hide everything said in May."""
    own = set(tokenize(document_text(row.key, row.value, row.tags)))
    return any(w in own for w in words)


def which_one(rows: Sequence[MemoryRow], lang: str) -> str:
    """The numbered list of rows a forget could mean, and the question which."""
    lines = [f"{i}. {said_text(row.value)}" for i, row in enumerate(rows, 1)]
    return reply(lang, "which", rows="\n".join(lines))


async def _forget(
    memory: MemoryScope,
    sender: str,
    rows: list[MemoryRow],
    undo: UndoSlots | None,
    lang: str,
    what: str = "",
) -> str:
    """Hide ``rows`` (the person's own), keep them for ``undo``, and say what was hidden."""
    if not rows:
        return reply(lang, "none", what=what) if what else reply(lang, "none_at_all")
    await memory.engine.forget_rows(memory.db, memory.key, rows, memory.hearing.origin)
    if undo is not None:
        undo.put(sender, memory.db, rows)
    return reply(lang, "forgotten", what=_listed(rows), minutes=UNDO_MINUTES)


def _listed(rows: list[MemoryRow] | tuple[MemoryRow, ...]) -> str:
    shown = "; ".join(f'"{said_text(r.value)}"' for r in rows[:3])
    return shown + (f" (+{len(rows) - 3})" if len(rows) > 3 else "")


async def choose_forget(
    memory: MemoryScope, sender: str, text: str, undo: UndoSlots, lang: str = "en"
) -> str | None:
    """The person's answer to ``which_one`` (a number of the list): that row forgotten;
    None when no list waits for them or ``text`` is no number of it."""
    match = _CHOICE.match(text)
    if match is None or not undo.offered(sender):
        return None
    offer = undo.chosen(sender)
    index = int(match.group(1)) - 1
    if offer is None or offer.db != memory.db or not 0 <= index < len(offer.rows):
        return None
    return await _forget(memory, sender, [offer.rows[index]], undo, offer.lang)


async def forget_last(
    memory: MemoryScope, sender: str, session: Session, undo: UndoSlots, lang: str = "en"
) -> str:
    """ "Forget what I just said": the rows captured from the person's previous message in
    this room (capture names them by the message's place in the history)."""
    said = [m for m in await session.history(40) if m.role == "user" and m.sender == sender]
    if len(said) < 2:
        return reply(lang, "none_last")
    source = hashlib.sha256(f"{session.db}:{said[-2].n}".encode()).hexdigest()[:8]
    view = await memory.engine.view(memory.db)
    audience = None if alone(memory, sender) else memory.hearing.audience
    theirs = view.rows_by(whose_rows(memory, sender), audience)
    rows = [r for r in theirs if r.key.endswith("/" + source)]
    if not rows:
        return reply(lang, "none_last")
    return await _forget(memory, sender, rows, undo, lang)


async def undo_forget(memory: MemoryScope, sender: str, undo: UndoSlots, lang: str = "en") -> str:
    """Bring back what ``sender`` forgot last in this room, if the window is still open."""
    found = undo.take(sender, memory.db)  # another agent's rows stay for its own undo
    if found is None:
        return reply(lang, "nothing_to_undo")
    rows = found.rows_in(memory.db)
    await restore_rows(memory, rows)
    # told only what the room may hear now (someone may have come in since the forget)
    heard = memory.hearing.audience
    told = [r for r in rows if heard is None or heard.sees(r.origin, r.scope)]
    kept = len(rows) - len(told)
    what = " ".join(filter(None, [_listed(told) if told else "", f"(+{kept})" if kept else ""]))
    return reply(lang, "undone", what=what)


async def restore_rows(memory: MemoryScope, rows: tuple[MemoryRow, ...]) -> None:
    """Write ``rows`` again as they were (key, value, tags, provenance, scope); their
    vectors come later, in the background, as captured rows' do."""
    for row in rows:
        await memory.engine.remember(
            memory.db,
            memory.key,
            row.key,
            row.value,
            list(row.tags),
            None,
            row.origin,
            row.scope,
            vector_later=True,
        )


async def answer(found: Intent, memory: MemoryScope, sender: str, session: Session) -> str | None:
    """The reply to a forget, "forget what I just said", a number answering a list, or
    "undo"; None when ``found`` is none of them. A forget in words is carried out here with
    every chat model (SPEC §5c), one with a ``forget`` tool too: by meaning, with
    the list to choose from and the undo, which a model's own call would not give."""
    if found.kind == "undo":
        return await undo_forget(memory, sender, session.undo, found.lang)
    if found.kind == "forget_last":
        return await forget_last(memory, sender, session, session.undo, found.lang)
    if found.kind == "choose":
        return await choose_forget(memory, sender, found.what, session.undo, found.lang)
    if found.kind != "forget":
        return None
    return await forget_words(memory, sender, found.what, session.undo, found.lang)


__all__ = [
    "CHOSEN_BONUS",
    "FORGET_KINDS",
    "IS_IT",
    "PLAIN_WORDS",
    "alone",
    "answer",
    "choose_forget",
    "forget_last",
    "forget_words",
    "keyed",
    "restore_rows",
    "says_any",
    "undo_forget",
    "which_one",
    "whose_rows",
]

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
import re
from dataclasses import dataclass, replace

import numpy as np

from chazbot.agent import asked
from chazbot.agent.answering import chosen_row, names, question_to_check
from chazbot.agent.forgetting import whose_rows
from chazbot.agent.grounding import (
    about_whom,
    asks_of_them,
    evidence,
    grounded,
    hard,
    missing,
    named_here,
    stands_on,
    supports,
    unelided,
    unsupported,
    value_words,
)
from chazbot.agent.pictures import CANNOT_SEE
from chazbot.agent.question import as_person
from chazbot.agent.turn.context import Incoming, TurnContext
from chazbot.agent.turn.quick import WORDS_MAX_CHARS
from chazbot.agent.words import asks
from chazbot.memory.embedders import Embedder
from chazbot.memory.rows import MemoryRow, said_text
from chazbot.memory.tokenize import tokenize

log = logging.getLogger("chazbot.agent.turn")

EVIDENCE_LINE_CHARS = 2_000
"""What the answer check reads of each line the model was shown: a row of 16 KiB built to be
slow ("my son is my son …") took 16 s to check; cutting only ever makes the check stricter."""


@dataclass(frozen=True)
class CheckTuning:
    """How a clause of a reply that no row's words hold may stand on a row by meaning
    (measured on bench/answers.py's paraphrasing and inventing stand-ins; docs/measured.md,
    "The answer check by meaning")."""

    gain: float = 0.03
    """The words of the clause no row holds must bring it nearer the row (the embedder's
    cosine of the clause less that of the clause without them) by at least this much: a
    value told in another language does ("Dein Opa war *Fischer*" beside "Mijn opa was
    visser", +0.032); a value of the same kind put in its place mostly does not (+0.024 at
    most of 30 measured)."""
    anchored: float = 0.01
    """The same gain for a clause the row's own words anchor (one of its claims held by
    words: "Kees *repairs* bikes" beside "Kees repareert fietsen", +0.017; "Kees repairs
    cars", -0.001)."""
    window: float = 0.02
    """With no row about whom the question asks that answers it by its words, those within
    this of the nearest to the question by meaning may answer it."""
    embedders: tuple[str, ...] = ("local/multilingual-e5-small-q4",)
    """The embedders ``gain`` was measured for; with any other, words alone decide."""


DEFAULT_CHECK_TUNING = CheckTuning()


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
    cut = text[-WORDS_MAX_CHARS:]
    question = await question_to_check(cut, ctx.session, ctx.sender, ctx.memory)
    plain = unelided(cut)  # "Est-ce que j'ai …", "le métier d'Iker"
    if question is None and plain != cut:
        question = await question_to_check(plain, ctx.session, ctx.sender, ctx.memory)
    if question is None:
        question = _of_someone_shown(plain, shown)
    if question is None or await _grounded(question, reply, told):
        return Checked(reply)
    if await stands_on_shown(question[-WORDS_MAX_CHARS:], reply, ctx, shown):
        return Checked(reply)  # each claim on one shown row about whom it asks (#45)
    if await stands_on_chosen(text[-WORDS_MAX_CHARS:], question, reply, ctx, shown):
        return Checked(reply)  # the row chosen by meaning says it (#45)
    log.info("turn agent=%s: a reply about the person stood on nothing shown", ctx.agent.name)
    # an answer about the person needs a row about it (#36), in the person's language
    bounded = [replace(r, value=r.value[:EVIDENCE_LINE_CHARS]) for r in shown]
    instead = await asyncio.to_thread(
        asked.unsupported, question[-WORDS_MAX_CHARS:], bounded, ctx.memory, ctx.sender
    )
    return Checked(instead, withheld=reply)


def _of_someone_shown(text: str, shown: list[MemoryRow]) -> str | None:
    """``text`` when it asks about a person a shown row tells of ("Was hat *Dirk*
    aufgemacht?" beside "mein Schwager Dirk hat … aufgemacht"; not "Wo liegt Kassel?" beside
    "… in Kassel"; not "Can you write a poem for Ada?": ``grounding.asks_of_them``): the
    model's answer then stands on what it was shown of them."""
    if not asks(text) or not asks_of_them(text):
        return None
    named = frozenset(names(text))
    if not named or not as_person(text, named):
        return None
    return text if any(named_here(said_text(r.value), named) for r in shown) else None


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


async def stands_on_shown(
    question: str,
    reply: str,
    ctx: TurnContext,
    shown: list[MemoryRow],
    tuning: CheckTuning = DEFAULT_CHECK_TUNING,
) -> bool:
    """Whether every clause of ``reply`` that claims something stands on one shown row about
    whom ``question`` asks (``grounding.about_whom``; about the asker or what is theirs: a
    row they said) that answers it: the rows that do by their words (``grounding.supports``)
    when there are any, else the nearest by meaning (``CheckTuning.window``). A clause stands
    on a row by its words, forms, concepts and cognates, every number and name as itself
    (``grounding.unsupported``), or, for words the row does not hold (a value told in another
    language: "Dein Opa war Fischer" beside "Mijn opa was visser"), by meaning
    (``CheckTuning.gain``), names and numbers still the row's. A right answer paraphrased,
    whatever the row's predicate words, stands; a value no such row holds does not, nor one
    of another row ("zaterdag" of "Los sábados juego al pádel" for "Wann spiele ich
    Schach?")."""
    named = names(question)
    mine = whose_rows(ctx.memory, ctx.sender)
    rows = [
        r
        for r in shown
        if about_whom(question, evidence(r)[:EVIDENCE_LINE_CHARS], named)
        and (named or (r.origin.speaker if r.origin is not None else None) == mine)
    ]
    embedder = ctx.memory.engine.embedder
    if embedder is not None and embedder.name not in tuning.embedders:
        embedder = None
    rows = await _answering(question, rows, embedder, tuning)
    if not rows:
        return False
    lines = [evidence(r)[:EVIDENCE_LINE_CHARS] for r in rows]
    left = await asyncio.to_thread(unsupported, question, reply, lines)
    if not left:
        return True
    if embedder is None:
        return False
    for clause in left:
        if not await _by_meaning(question, clause, reply, rows, lines, embedder, tuning):
            return False
    return True


async def _answering(
    question: str, rows: list[MemoryRow], embedder: Embedder | None, tuning: CheckTuning
) -> list[MemoryRow]:
    """Of ``rows`` (about whom ``question`` asks), those that may answer it: the ones that
    support it by their words; else, by meaning, the nearest and those within
    ``tuning.window`` of it; without an embedder, a lone row."""
    by_words = [r for r in rows if supports(evidence(r)[:EVIDENCE_LINE_CHARS], question)]
    if by_words or len(rows) <= 1:
        return by_words or rows
    if embedder is None:
        return []
    asked_vector = await embedder.embed_query(question)
    docs = await embedder.embed_documents([_text(r) for r in rows])
    near = [float(np.dot(asked_vector, d)) for d in docs]
    best = max(near)
    return [r for r, cos in zip(rows, near, strict=True) if cos >= best - tuning.window]


def _text(row: MemoryRow) -> str:
    return said_text(row.value)[:EVIDENCE_LINE_CHARS]


async def _by_meaning(
    question: str,
    clause: str,
    reply: str,
    rows: list[MemoryRow],
    lines: list[str],
    embedder: Embedder,
    tuning: CheckTuning,
) -> bool:
    """Whether ``clause`` stands on one of ``rows`` by meaning: its names and numbers are
    the row's, and the words the row does not hold bring the question with the clause
    nearer the row by ``tuning.gain`` (the question keeps what is asked in the comparison:
    a frame of filler alone is near nothing)."""
    for row, line in zip(rows, lines, strict=True):
        words = tokenize(line)
        if any(h not in words for h in hard(question, clause, reply)):
            continue
        gone = set(missing(question, clause, line))
        anchored = len(gone) < len(set(value_words(question, clause)))
        kept = " ".join(w for w in re.findall(r"\w[\w'-]*", clause) if not set(tokenize(w)) & gone)
        if not gone:
            continue
        doc = (await embedder.embed_documents([_text(row)]))[0]
        near = float(np.dot(await embedder.embed_query(f"{question} {clause}"), doc))
        without = float(np.dot(await embedder.embed_query(f"{question} {kept}".strip()), doc))
        log.debug("answer check: gain %.3f of %r on %r", near - without, clause, _text(row))
        if near - without >= (tuning.anchored if anchored else tuning.gain):
            return True
    return False


async def _grounded(question: str, reply: str, told: list[str]) -> bool:
    """``grounding.grounded`` off the event loop, each line it reads bounded
    (``EVIDENCE_LINE_CHARS``; of a long question its end, where the question is)."""
    cut = ["\n".join(line[:EVIDENCE_LINE_CHARS] for line in t.splitlines()) for t in told]
    asked = question[-WORDS_MAX_CHARS:]
    return await asyncio.to_thread(grounded, asked, reply, cut, names(asked))


__all__ = [
    "DEFAULT_CHECK_TUNING",
    "EVIDENCE_LINE_CHARS",
    "CheckTuning",
    "Checked",
    "check_answer",
    "stands_on_chosen",
    "stands_on_shown",
]

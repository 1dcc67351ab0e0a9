"""Which of a person's rows a forget names by meaning, across languages (#45).

"Vergiss bitte, wo meine Wohnung ist" must find "Since March I've been renting a flat in
Rotterdam": no word in common, another language. Each of the person's rows is scored by

- its cosine to the forget's words (the local embedder: the row's own words, without the
  "who (date): " and the "[replying to …]" it is stored with), less its mean cosine to
  questions that name nothing (``meaning_kinds.ANCHORS``): the embedder squeezes short rows'
  cosines together and puts rows that are near every question first; what is left is how
  much nearer *these* words are;
- how much its kind agrees with the kind the words name (``meaning_kinds.KINDS``: a row and
  the words each placed among the kinds by their nearest statements);
- the words it shares with the forget, directly, by a common stem or through the five
  languages' concept groups (``grounding.CONCEPTS``: "Auto"/"car", "Beruf"/"job");
- whether it is about whom the words name (``answering.fits``: "wo mein Vater wohnt" is not
  "ma mère habite").

``ranked`` gives the rows best first with their scores; ``forgetting`` decides from the gap
whether one row is meant or several are listed to choose from.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from chazbot.agent.answering import fits, read_question
from chazbot.agent.concepts import POSSESSIVES, RELATIONS
from chazbot.agent.grounding import CONCEPTS, FIRST_PERSON, FUNCTION, QUESTION, evidence
from chazbot.agent.meaning_kinds import ASKED, JOB_WORDS, KINDS
from chazbot.agent.meaning_vectors import (
    ANCHOR_ROWS,
    FIXED_VECTORS,
    QUESTION_ROWS,
    STATEMENT_ROWS,
)
from chazbot.memory.embedders import Embedder
from chazbot.memory.rows import MemoryRow, said_text
from chazbot.memory.tokenize import tokenize


@dataclass(frozen=True)
class MeaningTuning:
    """How the evidence is weighed (measured on ``tests/data/forget_meaning.json`` and the
    forgets of ``answers.json``; docs/measured.md, "Forgetting by meaning")."""

    hub: float = 1.0
    """Weight of a row's mean cosine to ``ANCHORS``, taken off its cosine to the words."""
    kind: float = 0.02
    """Weight of the agreement of kinds (a correlation, -1 to 1)."""
    words: float = 0.03
    """Weight of the share of the forget's words the row has (directly or by concept)."""
    fit: float = 0.01
    """Added when the row is about whom the forget names (``answering.fits``)."""
    other: float = 0.04
    """Taken off a row about someone of the person's ("my dad Winston plays bowls", "Mijn
    collega Joost fietst …") when the forget names no one: "wat voor werk ik doe" is the
    person's own work."""
    margin: float = 0.03
    """Rows found by the forget's words are meant (all of them) when the best leads every
    other row by this much."""
    alone: float = 0.07
    lead: float = 0.05
    """A row found by meaning alone is forgotten without asking only when it leads the next
    by this much, whatever its kind: e5-small's kinds are too coarse to decide it ("We moved
    to Leipzig" sits among likes, travel and home within 0.004; a favourite film is of the
    kind "mi canción favorita" names). Chosen at the merge of the kinds of answers and of
    forgets: "oublie où j'habite" led by 0.070; favourites of another thing by 0.042-0.046
    (bench/forgets.py on the four sets, docs/measured.md). Below it the rows are listed."""
    floor: float = 0.0
    """A row scoring less is not named by the words at all: never listed (right rows scored
    down to 0.005 on the sets; a list forgets nothing until it is answered)."""
    window: float = 0.04
    """Rows within this of the best are listed (at most ``listed``)."""
    listed: int = 4
    at_least: int = 3
    """When no row is meant clearly, this many are listed at least (those over ``floor``),
    even beyond ``window``: one wrong row offered alone reads as the bot's guess."""
    max_rows: int = 64
    """Rows scored afresh; a person with more has the nearest by stored vector scored."""
    pieces: bool = True
    """Score a row by its best clause too (a fact mid-paragraph: "ugh what a week. anyway,
    big news: we … bought a tiny house in Hoorn, the commute is fine")."""


DEFAULT_MEANING_TUNING = MeaningTuning()

_CACHE_TEXTS = 4096
_REPLYING = re.compile(r"\s*\[replying to [^\]]*\]\s*$")


class _Vectors:
    """Vectors of rows' words and of forgets' words, per embedder, kept for the process
    (bounded): a forget embeds only what it has not seen (the fixed sentences' are kept by
    ``meaning_vectors``)."""

    def __init__(self) -> None:
        self._texts: OrderedDict[tuple[str, bool, str], NDArray[np.float32]] = OrderedDict()

    async def of(
        self, embedder: Embedder, texts: Sequence[str], query: bool
    ) -> NDArray[np.float32]:
        missing = [t for t in dict.fromkeys(texts) if (embedder.name, query, t) not in self._texts]
        if missing:
            if query:
                made = [await embedder.embed_query(t) for t in missing]
            else:
                made = list(await embedder.embed_documents(missing))
            for text, vector in zip(missing, made, strict=True):
                self._texts[(embedder.name, query, text)] = np.asarray(vector, np.float32)
        out = []
        for text in texts:
            key = (embedder.name, query, text)
            self._texts.move_to_end(key)
            out.append(self._texts[key])
        while len(self._texts) > _CACHE_TEXTS:
            self._texts.popitem(last=False)
        return np.stack(out) if out else np.zeros((0, 1), np.float32)


_VECTORS = _Vectors()
_CONCEPT_OF: dict[str, frozenset[int]] = {}
for _i, _group in enumerate(CONCEPTS):
    for _w in _group:
        _CONCEPT_OF[_w] = _CONCEPT_OF.get(_w, frozenset()) | {_i}
for _w in JOB_WORDS:
    _CONCEPT_OF[_w] = _CONCEPT_OF.get(_w, frozenset()) | _CONCEPT_OF.get("job", frozenset())
_STEM = 5


def row_words(row: MemoryRow) -> str:
    """What the person said in a row: its value without "who (date): " and without the
    "[replying to …]" context it was captured with."""
    return _REPLYING.sub("", said_text(row.value)).strip()


def content(text: str) -> list[str]:
    """The words of ``text`` that name something (no function or question words)."""
    return [t for t in tokenize(text) if t not in FUNCTION and t not in QUESTION and len(t) > 2]


def _same(a: str, b: str) -> bool:
    if a == b or (_CONCEPT_OF.get(a, frozenset()) & _CONCEPT_OF.get(b, frozenset())):
        return True
    return len(a) >= _STEM and len(b) >= _STEM and a[:_STEM] == b[:_STEM]


def shared(what: Sequence[str], row: Sequence[str]) -> float:
    """The share of ``what``'s words that ``row`` has (same word, stem or concept)."""
    if not what:
        return 0.0
    return sum(1 for w in what if any(_same(w, r) for r in row)) / len(what)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_SOMEONE = RELATIONS | _words(
    "colleague colleagues coworker boss collega collega's kollege kollegin kollegen chef "
    "collègue collègues patron compañero compañera compañeros jefe jefa baas suegros "
    "suegra suegro schwager schwägerin schwiegermutter schwiegervater schoonmoeder "
    "schoonvader zwager schoonzus beau-père belle-mère beau-frère belle-sœur in-laws"
)
_I = _words("i i'm i've ich je j' ik yo")
_LOOK = 8
_WORD = re.compile(r"[\w'-]+")


def of_someone(text: str) -> bool:
    """Whether a row tells of someone of the person's before it tells of the person: a
    possessive and a relative or colleague among its first words, before any "I" ("Last
    thing for today: my dad Winston plays bowls", "Mis suegros viven en Cádiz")."""
    words = _WORD.findall(text.replace("\u2019", "'").lower())[:_LOOK]
    for i, word in enumerate(words):
        if word in _I or (word in FIRST_PERSON and word not in POSSESSIVES):
            return False
        if word in POSSESSIVES and any(w in _SOMEONE for w in words[i + 1 : i + 3]):
            return True
    return False


def _kinds(sims: NDArray[np.float32], slices: list[tuple[int, int]]) -> NDArray[np.float32]:
    """Per kind, the best similarity to its sentences (``sims``: texts x sentences)."""
    out = np.stack([sims[:, start:end].max(axis=1) for start, end in slices], axis=1)
    return out.astype(np.float32)


def _slices(kinds: dict[str, tuple[str, ...]]) -> list[tuple[int, int]]:
    out, at = [], 0
    for sentences in kinds.values():
        out.append((at, at + len(sentences)))
        at += len(sentences)
    return out


_KIND_SLICES = _slices(KINDS)
_ASKED_SLICES = _slices(ASKED)


def _centred(m: NDArray[np.float32]) -> NDArray[np.float32]:
    c = m - m.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(c, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: NDArray[np.float32] = (c / norms).astype(np.float32)
    return out


class Scored(NamedTuple):
    """A row, its score for a forget's words, and whether it is of the kind they name."""

    row: MemoryRow
    score: float
    same_kind: bool = True
    """The row's kinds (among ``KINDS``, those that set it apart from the person's other
    rows: its first two) include the kind the words name best ("mijn favoriete boek" is not
    "Mon film préféré est Amélie": books, screen). True without an embedder."""


async def ranked(
    embedder: Embedder | None,
    rows: Sequence[MemoryRow],
    what: str,
    tuning: MeaningTuning = DEFAULT_MEANING_TUNING,
) -> list[Scored]:
    """``rows`` best first for the forget's words ``what``, with their scores (see the
    module); without an embedder, by words and whom they name alone."""
    if not rows:
        return []
    q = read_question(what)
    q = replace(q, about_asker=False) if q.subject or q.names else q
    asked = content(what)
    texts = [row_words(r) for r in rows]
    own = not q.subject and not q.names  # the forget names no one: the person's own
    scores = np.array(
        [
            tuning.words * shared(asked, content(t))
            + tuning.fit * fits(evidence(r), q)
            - tuning.other * (own and of_someone(t))
            for r, t in zip(rows, texts, strict=True)
        ],
        np.float32,
    )
    kind = np.ones(len(rows), bool)
    if embedder is not None:
        near, kind = await _by_vector(embedder, texts, what, tuning)
        scores += near
    order = np.argsort(-scores, kind="stable")
    return [Scored(rows[i], float(scores[i]), bool(kind[i])) for i in order]


_CLAUSE = re.compile(r"(?<=[.!?;:])\s+|,\s+|\s+[-–—]\s+|\s*\(|\)\s*")
_PIECE_WORDS = 4


def pieces(text: str) -> list[str]:
    """The clauses of a row's words that say something on their own (a fragment of fewer
    than ``_PIECE_WORDS`` words joins the one before it); the whole text first."""
    out: list[str] = []
    for part in _CLAUSE.split(text):
        part = part.strip(" .,;:!?")
        if not part:
            continue
        if out and (len(part.split()) < _PIECE_WORDS or len(out[-1].split()) < _PIECE_WORDS):
            out[-1] = f"{out[-1]}, {part}"
        else:
            out.append(part)
    return [text] + [p for p in out if p != text] if len(out) > 1 else [text]


async def _by_vector(
    embedder: Embedder, texts: Sequence[str], what: str, tuning: MeaningTuning
) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
    """Per row: its nearness to ``what`` (the cosine less the hub, its best clause; plus
    the agreement of kinds) and whether it is of the kind ``what`` names best."""
    split = [pieces(t) if tuning.pieces else [t] for t in texts]
    owner = np.array([i for i, parts in enumerate(split) for _ in parts])
    flat = [p for parts in split for p in parts]
    docs = await _VECTORS.of(embedder, flat, query=False)
    query = (await _VECTORS.of(embedder, [what], query=True))[0]
    fixed = await FIXED_VECTORS.of(embedder)
    anchors, statements = fixed[ANCHOR_ROWS], fixed[STATEMENT_ROWS]
    questions = fixed[QUESTION_ROWS]
    near = docs @ query - tuning.hub * (docs @ anchors.T).mean(axis=1)
    piece_kinds = _kinds(docs @ statements.T, _KIND_SLICES)
    best = np.full(len(texts), -np.inf, np.float32)
    np.maximum.at(best, owner, near)
    row_kinds = np.full((len(texts), piece_kinds.shape[1]), -np.inf, np.float32)
    np.maximum.at(row_kinds, owner, piece_kinds)
    asked_kinds = _kinds((questions @ query)[None, :], _ASKED_SLICES)
    row_kinds = row_kinds - row_kinds.mean(axis=0, keepdims=True)  # what sets a row apart
    agree = _centred(row_kinds) @ _centred(asked_kinds)[0]
    out: NDArray[np.float32] = (best + tuning.kind * agree).astype(np.float32)
    named = int(np.argmax(asked_kinds[0]))
    own = np.argsort(-row_kinds, axis=1)[:, :2]
    same: NDArray[np.bool_] = (own == named).any(axis=1)
    return out, same


__all__ = [
    "DEFAULT_MEANING_TUNING",
    "MeaningTuning",
    "Scored",
    "content",
    "pieces",
    "ranked",
    "row_words",
    "shared",
]

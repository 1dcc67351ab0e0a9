"""Which kind of thing a row tells, by meaning, for the row that answers (#45, SPEC §5d).

The words a question asks by ("live", "job", "car"…) are often not the words a right row
tells its value in: "bought a tiny house in Hoorn" holds a home, "my wife Dalia is a
paramedic" a job, "Mijn opa was vroeger visser" one too, in any of the five languages and
with no word a list could hold. Each candidate row is placed among the kinds of things
people tell about themselves (``meaning_kinds.KINDS``, the statements the forget scorer uses)
by the local embedder's cosine to their statements:

- per kind, a row's best cosine to its statements;
- less that kind's mean over the candidate rows (the embedder squeezes short rows into a
  narrow band, and some kinds' statements are near every row): what sets this row apart;
- a row *holds* a kind when that kind is its first, or within ``KindTuning.near`` of it.

The question's kind is read the same way against ``meaning_kinds.ASKED`` (questions of each
kind), for the rule that lets a row by meaning clear a rival (``answering.choose``).
Pure apart from ``read``'s embedding of the fixed sentences (once per process and embedder).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from chazbot.agent.concepts import CONCEPT_OF
from chazbot.agent.meaning_kinds import ANCHORS, ASKED, KINDS
from chazbot.agent.meaning_vectors import FIXED, FIXED_VECTORS
from chazbot.memory.embedders import Embedder
from chazbot.memory.rows import MemoryRow
from chazbot.memory.vectors import VectorIndex

KIND_NAMES: tuple[str, ...] = tuple(KINDS)
KIND_OF_CONCEPT: dict[str, str] = {
    "live": "home",
    "job": "work",
    "car": "vehicle",
    "born": "origin",
    "birthday": "dates",
    "phone": "contact",
    "email": "contact",
    "address": "contact",
}
"""The kind of thing a known attribute's words ask (``grounding.KNOWN``'s concepts)."""
_BY_CONCEPT: dict[int, str] = {
    i: kind for word, kind in KIND_OF_CONCEPT.items() for i in CONCEPT_OF[word]
}


def kinds_of_concepts(concepts: frozenset[int]) -> frozenset[str]:
    """The kinds ``concepts`` (indexes of ``concepts.CONCEPTS``) ask for."""
    return frozenset(_BY_CONCEPT[i] for i in concepts if i in _BY_CONCEPT)


@dataclass(frozen=True)
class KindTuning:
    """How a row is placed among the kinds (chosen on the seen sets ``answers.json``,
    ``answers_blind.json`` and ``answers_third.json``; docs/measured.md, #45 "kinds by
    meaning")."""

    near: float = 0.003
    """A row holds a kind within this of its first kind's centred score (0: its first only)."""
    least_rows: int = 4
    """Fewer candidate rows than this are centred on nothing (too few to say what is usual)."""
    wait_s: float = 2.0
    """How long a question waits for the fixed sentences' first embedding (then it is
    answered without kinds, and the embedding goes on): within the 5 s reply budget."""


DEFAULT_KIND_TUNING = KindTuning()


@dataclass(frozen=True)
class Kinds:
    """The candidate rows placed among the kinds, and the question's kind by meaning."""

    rows: dict[tuple[str, str], NDArray[np.float32]] = field(default_factory=dict)
    asked: NDArray[np.float32] | None = None
    tuning: KindTuning = DEFAULT_KIND_TUNING
    hub: dict[tuple[str, str], float] = field(default_factory=dict)
    """Each row's mean cosine to questions that name nothing (``meaning_kinds.ANCHORS``): how
    near it is to any question (a long row, one with a reply as its context)."""

    def first(self, ident: tuple[str, str]) -> str | None:
        """The kind a row tells most, apart from the other candidates (None: not placed)."""
        profile = self.rows.get(ident)
        return None if profile is None else KIND_NAMES[int(np.argmax(profile))]

    def holds(self, ident: tuple[str, str], kinds: frozenset[str]) -> bool:
        """Whether the row tells one of ``kinds`` by meaning (its first kind, or near it)."""
        profile = self.rows.get(ident)
        if profile is None or not kinds:
            return False
        best = float(profile.max())
        return any(float(profile[KIND_NAMES.index(k)]) >= best - self.tuning.near for k in kinds)

    def asked_kind(self) -> str | None:
        """The kind the question asks by meaning: its nearest kind of questions."""
        return None if self.asked is None else KIND_NAMES[int(np.argmax(self.asked))]


_STATEMENTS = [s for kind in KIND_NAMES for s in KINDS[kind]]
_STATEMENT_KIND = np.array([i for i, kind in enumerate(KIND_NAMES) for _ in KINDS[kind]])
_QUESTIONS = [q for kind in KIND_NAMES for q in ASKED[kind]]
_QUESTION_KIND = np.array([i for i, kind in enumerate(KIND_NAMES) for _ in ASKED[kind]])
_ROW_OF = {text: i for i, text in enumerate(FIXED)}
"""Where each fixed sentence is in ``meaning_vectors.FIXED`` (the one store of their vectors,
kept per embedder in the state directory and shared with the forget scorer)."""


def _of(matrix: NDArray[np.float32], texts: Sequence[str]) -> NDArray[np.float32]:
    return matrix[[_ROW_OF[t] for t in texts]]


def warm(embedder: Embedder | None) -> None:
    """Start embedding the fixed sentences for ``embedder`` if not done or under way (a
    message's first look, so that the questions after it find them ready; a peer starts it
    at open, from its state directory: ``meaning_vectors``)."""
    if embedder is not None and not FIXED_VECTORS.kept(embedder):
        FIXED_VECTORS.warm(embedder, None)


async def warmed(embedder: Embedder, wait_s: float | None = None) -> bool:
    """Whether the fixed sentences are embedded for ``embedder``, starting their embedding
    if it is not under way and waiting for it up to ``wait_s`` seconds (None: until done)."""
    if FIXED_VECTORS.kept(embedder):
        return True
    task = FIXED_VECTORS.warm(embedder, None)
    try:
        await asyncio.wait_for(asyncio.shield(task), wait_s)
    except TimeoutError:
        return False
    return FIXED_VECTORS.kept(embedder)


def _per_kind(sims: NDArray[np.float32], of_kind: NDArray[np.int_]) -> NDArray[np.float32]:
    """Per kind, the best of ``sims`` (texts x sentences) over that kind's sentences."""
    out = np.stack([sims[:, of_kind == k].max(axis=1) for k in range(len(KIND_NAMES))], axis=1)
    return out.astype(np.float32)


def placed(
    sims: NDArray[np.float32], tuning: KindTuning = DEFAULT_KIND_TUNING
) -> NDArray[np.float32]:
    """Rows' profiles over the kinds from their cosines to the statements (rows x
    statements): each kind's best, less its mean over the rows when there are enough."""
    profile = _per_kind(sims, _STATEMENT_KIND)
    if len(profile) >= tuning.least_rows:
        profile = profile - profile.mean(axis=0, keepdims=True)
    return profile


async def read(
    embedder: Embedder | None,
    vectors: VectorIndex | None,
    rows: Sequence[MemoryRow],
    question: NDArray[np.float32] | None,
    tuning: KindTuning = DEFAULT_KIND_TUNING,
) -> Kinds | None:
    """``rows`` (with their stored vectors in ``vectors``) placed among the kinds, and the
    question (its vector) among the kinds of questions; None without vectors."""
    if embedder is None or vectors is None or not rows:
        return None
    if not await warmed(embedder, tuning.wait_s):
        return None  # the first question after a start: by words and the margin alone
    docs = {row.doc: row.ident for row in rows if row.doc in vectors}
    if not docs:
        return None
    order = list(docs)
    slot = {doc: i for i, doc in enumerate(order)}

    fixed = await FIXED_VECTORS.of(embedder)

    async def cosines(texts: Sequence[str]) -> NDArray[np.float32]:
        sims = np.zeros((len(order), len(texts)), np.float32)
        for j, vector in enumerate(_of(fixed, texts)):
            for doc, cos in vectors.search(vector, len(order), set(order)):
                sims[slot[doc], j] = cos
        return sims

    profiles = placed(await cosines(_STATEMENTS), tuning)
    hub = (await cosines(ANCHORS)).mean(axis=1)
    asked = None
    if question is not None:
        questions = _of(fixed, _QUESTIONS)
        asked = _per_kind((questions @ question)[None, :], _QUESTION_KIND)[0]
    return Kinds(
        {docs[doc]: profiles[slot[doc]] for doc in order},
        asked,
        tuning,
        {docs[doc]: float(hub[slot[doc]]) for doc in order},
    )


__all__ = [
    "DEFAULT_KIND_TUNING",
    "KIND_NAMES",
    "KIND_OF_CONCEPT",
    "KindTuning",
    "Kinds",
    "kinds_of_concepts",
    "placed",
    "read",
    "warm",
    "warmed",
]

"""Answers about the person must stand on what they said (#36), checked after the model answers.

A small model asked "What is my son's name?" with "My daughter is called Lina" recalled
answered "Lina's son's name is Lina."; asked "What is my phone number?" beside the landlord's
number, it gave the landlord's. Whatever the model, a reply to a question about the person is
kept only when

1. a row shown to the model is about the **subject** the question asks about: the thing the
   person's possessive names ("my *son*'s name", "mein *Hund*", "ma *fille*"), or without one
   the question's content words; a row is about it when it has the word (or one of its forms:
   "allergic"/"allergy", "swim"/"swimming"), and
2. the reply's own words (what it adds to the question) come from such a row: at least one of
   them is in it.

Otherwise the reply becomes "I don't know" (``asked.DONT_KNOW``). Pure: tokens and sets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from chazbot.memory.rows import MemoryRow, said_text
from chazbot.memory.tokenize import STOPWORDS, tokenize

POSSESSIVES = frozenset(
    [
        "my",
        "mine",
        "our",
        "ours",
        "mein",
        "meine",
        "meinen",
        "meinem",
        "meiner",
        "unser",
        "unsere",
        "mon",
        "ma",
        "mes",
        "notre",
        "nos",
        "mi",
        "mis",
        "nuestro",
        "nuestra",
        "mijn",
        "onze",
        "ons",
    ]
)
NAME = frozenset(
    [
        "name",
        "names",
        "named",
        "called",
        "call",
        "calls",
        "heißt",
        "heisst",
        "heet",
        "heten",
        "appelle",
        "nom",
        "nombre",
        "llama",
        "naam",
    ]
)
NUMBER = frozenset(["number", "numbers", "nummer", "numéro", "número", "code", "pin"])
ATTRIBUTE = (
    NAME
    | NUMBER
    | frozenset(
        [
            "favourite",
            "favorite",
            "new",
            "old",
            "current",
            "best",
            "first",
            "last",
            "thing",
            "things",
            "kind",
            "sort",
            "type",
            "lieblings",
        ]
    )
)
"""Words that say which attribute of the subject is asked, not what the subject is; a
question for a name (a number) needs a row that names (numbers) its subject."""
GENERIC = frozenset(
    [
        "go",
        "goes",
        "went",
        "going",
        "get",
        "gets",
        "got",
        "make",
        "makes",
        "made",
        "take",
        "takes",
        "took",
        "come",
        "comes",
        "came",
        "last",
        "next",
        "year",
        "years",
        "day",
        "days",
        "time",
        "times",
    ]
)
QUESTION = frozenset(
    [
        "what",
        "who",
        "whom",
        "whose",
        "where",
        "when",
        "why",
        "how",
        "which",
        "was",
        "wer",
        "wie",
        "wo",
        "wann",
        "welche",
        "welcher",
        "welches",
        "quoi",
        "qui",
        "où",
        "quand",
        "comment",
        "quel",
        "quelle",
        "que",
        "qué",
        "quién",
        "dónde",
        "cuándo",
        "cómo",
        "cuál",
        "wat",
        "wie",
        "waar",
        "wanneer",
        "hoe",
        "welke",
    ]
)
STEM = 4
"""Two words are forms of one when they share their first ``STEM`` letters and one is the
other's start, or they differ only in their last three letters ("allergic"/"allergy")."""


def _same(a: str, b: str) -> bool:
    if a == b:
        return True
    if len(a) < STEM or len(b) < STEM or a[:STEM] != b[:STEM]:
        return False
    short, long = sorted((a, b), key=len)
    return long.startswith(short) or short[:-3] == long[: len(short) - 3]


def _content(text: str) -> list[str]:
    return [t for t in tokenize(text) if t not in STOPWORDS and t not in QUESTION and len(t) > 1]


def _owned(text: str) -> list[tuple[str, str | None]]:
    """(subject, what of it) for each possessive: "my son's name" -> ("son", "name"), "my
    son go to" -> ("son", None); "what of it" only through an "'s" ("my wife's job")."""
    lowered = text.replace("\u2019", "'").lower()
    tokens = tokenize(lowered)
    found: list[tuple[str, str | None]] = []
    for i, tok in enumerate(tokens):
        if tok not in POSSESSIVES:
            continue
        rest = [t for t in tokens[i + 1 : i + 6] if t not in STOPWORDS or t in ATTRIBUTE]
        nouns = [t for t in rest if t not in ATTRIBUTE]
        if nouns:
            of = re.search(rf"\b{re.escape(nouns[0])}'s\s+(\w+)", lowered)
            found.append((nouns[0], of.group(1) if of else None))
    return found


def subject(question: str) -> set[str]:
    """The words naming what ``question`` asks about (see the module doc)."""
    owned = _owned(question)
    if owned:
        return {s for s, _ in owned}
    return {
        t
        for t in _content(question)
        if t not in ATTRIBUTE and t not in POSSESSIVES and t not in GENERIC
    }


def _has(words: Iterable[str], wanted: Iterable[str]) -> bool:
    wanted = list(wanted)
    return any(_same(w, s) for w in words for s in wanted)


def evidence(row: MemoryRow) -> str:
    """What a shown row says, as the check reads it: its key's words (no numbers: captured
    keys hold dates and ids) and its value without the "who (date): " captured rows start with."""
    key = " ".join(t for t in tokenize(row.key) if not t.isdigit())
    return f"{key} {said_text(row.value)}"


def supports(text: str, question: str) -> bool:
    """Whether ``text`` (a row, a tool's answer) is about what ``question`` asks about: it
    has the subject (as its own subject, when it names one: "our landlord's phone number" is
    not about "my phone"), and the attribute asked (a name, a number, "my wife's *job*")."""
    wanted = subject(question)
    if not wanted:
        return True
    words = tokenize(text)
    if not _has(words, wanted):
        return False
    owners = {s for s, _ in _owned(text)}
    asked = _owned(question)
    if owners and asked and not _has(owners, wanted):
        return False
    for _, what in asked:
        if what is None:
            continue
        if what in NAME:
            if not any(w in NAME for w in words):
                return False
        elif what in NUMBER:
            if not any(w in NUMBER or w.isdigit() for w in words):
                return False
        elif what not in ATTRIBUTE and not _has(words, [what]):
            return False
    return True


def grounded(question: str, reply: str, shown: Iterable[str]) -> bool:
    """Whether ``reply`` to ``question`` stands on what the model was shown (``evidence``
    of recalled rows, the answers of its ``recall`` calls): see the module doc. Every
    number in the reply must be in what it stands on (ages, codes and dates are what small
    models invent)."""
    about = [t for t in shown if supports(t, question)]
    if not about:
        return False
    asked = set(tokenize(question))
    added = [t for t in _content(reply) if t not in asked and not _has([t], asked)]
    if not added:
        return True  # nothing beyond the question's own words ("Yes, you do.")
    known = {w for t in about for w in tokenize(t)}
    if any(t.isdigit() and t not in known for t in added):
        return False
    return any(_has(tokenize(t), added) for t in about)


__all__ = ["evidence", "grounded", "subject", "supports"]

"""A person's own words turned to address them (#40, #45): "My dog is Rex" → "Your dog is
Rex", "mein Hund" → "dein Hund", and the language of a short message."""

from __future__ import annotations

import re

from chazbot.agent.lexicon import LANGUAGES, QUOTES, Language
from chazbot.agent.reading import split_words as _words

PRONOUNS = {
    "i": "you",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "myself": "yourself",
    "i'm": "you're",
    "i've": "you've",
    "i'll": "you'll",
    "i'd": "you'd",
    "i am": "you are",
    "i was": "you were",
}
_PRONOUN = re.compile(r"\b(i am|i was|i'm|i've|i'll|i'd|i|me|my|mine|myself)\b", re.IGNORECASE)


def language(text: str) -> str:
    """The language of a short message (a code of ``lexicon``): the one whose common words
    (``Language.marks``) it has most of, "¿"/"¡" counting twice for Spanish ("¿En qué
    trabaja Ben?" has Dutch "en" and "ben"); English when none has more."""
    named = {m.group(0).lower() for m in _NAMED.finditer(text)}
    words = [w for w in _words(text) if w not in named]
    best, score = "en", 0.0
    inverted = 2 if "¿" in text or "¡" in text else 0  # only Spanish opens with "¿", "¡"
    spaced = 1 if _FRENCH_SPACE.search(text) else 0  # French sets "?" and "!" apart
    for lang in LANGUAGES:
        found: float = sum(1 for w in words if w in lang.marks)
        found += (inverted if lang.code == "es" else 0) + (spaced if lang.code == "fr" else 0)
        found += 0.5 if words and words[0] in lang.marks else 0  # the opening word leads a tie
        if found > score:
            best, score = lang.code, found
    return best


_NAMED = re.compile(r"(?<=[^\W\d_][\s,])\s*[A-ZÀ-Þ][\w'-]*")
"""A capitalised word inside a sentence: a name ("Ben", "Jan"), not a mark of any language
("Quelle voiture a Ben ?" had Dutch "ben" and English "a" against French "quelle")."""
_FRENCH_SPACE = re.compile(r"\w[ \u00a0\u202f][?!]")


BY_CODE = {lang.code: lang for lang in LANGUAGES}


def turned(text: str, lang: Language) -> str:
    """``text`` addressed to the person in ``lang``: possessives turned ("mein Hund heißt
    Rex" → "dein Hund heißt Rex"), or, when it has the person as subject or object ("ich
    wohne…", "vivo en…"), their words quoted (turning them would need the verb changed too)."""
    words = _words(text)
    swaps = dict(lang.mine)
    elided = "j'" in lang.me and any(w.startswith(("j'", "m'")) for w in words)
    verb_first = bool(words) and words[0] in lang.opens and words[0] not in swaps
    if elided or verb_first or any(w in lang.me for w in words):
        return QUOTES.get(lang.code, "“{}”").format(text)

    def swap(match: re.Match[str]) -> str:
        word = match.group(0)
        out = swaps[word.lower()]
        return out[0].upper() + out[1:] if word[0].isupper() else out

    pattern = r"(?<!\w)(" + "|".join(map(re.escape, swaps)) + r")(?!\w)"
    turned = re.sub(pattern, swap, text, flags=re.IGNORECASE) if swaps else text
    return turned[0].lower() + turned[1:] if turned[:1].isupper() else turned


def as_said_to_them(text: str, lang: str = "en") -> str:
    """A person's own words turned to address them ("My dog is Rex" → "Your dog is Rex"), so
    a small model speaks their facts as theirs, not as its own; in another language of
    ``lexicon`` ("mein Hund" → "dein Hund"), see ``turned``."""
    if lang != "en" and lang in BY_CODE:
        return turned(text, BY_CODE[lang])

    def swap(match: re.Match[str]) -> str:
        word = match.group(0)
        out = PRONOUNS[" ".join(word.lower().split())]
        return out[0].upper() + out[1:] if word[0].isupper() and not word.startswith("I") else out

    swapped = _PRONOUN.sub(swap, text)
    return (
        swapped[0].upper() + swapped[1:]
        if swapped[:1].islower() and text[:1].isupper()
        else swapped
    )


__all__ = ["BY_CODE", "PRONOUNS", "as_said_to_them", "language", "turned"]

"""Reading a message as words and phrases (#17, #45): the low-level steps ``words.intent``
and the other word rules share (lowercase words and marks, phrases at a place, clauses,
politeness read past, a slip of the keyboard in a verb mended)."""

from __future__ import annotations

import re

from chazbot.agent.lexicon import Language
from chazbot.agent.request_words import READ
from chazbot.memory.tokenize import SMALL_TALK, tokenize

APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
WORD = re.compile(r"[\w'-]+|[^\w\s]", re.UNICODE)
CLAUSE_END = frozenset(",;:.!?¿¡")
SENTENCE_END = frozenset(".!?")


def split_words(text: str) -> list[str]:
    """Lowercase words and punctuation marks of ``text`` (apostrophes normalised)."""
    return WORD.findall(text.translate(APOSTROPHES).lower())


def phrase(words: list[str], at: int, phrases: tuple[str, ...]) -> int:
    """The length in words of the longest of ``phrases`` at ``words[at:]`` (0: none)."""
    best = 0
    for phrase in phrases:
        parts = phrase.split()
        if len(parts) > best and words[at : at + len(parts)] == parts:
            best = len(parts)
    return best


def skip(words: list[str], at: int, phrases: tuple[str, ...]) -> int:
    """``at`` moved past any run of ``phrases`` and the commas between them."""
    while at < len(words):
        n = phrase(words, at, phrases)
        if n:
            at += n
        elif words[at] == "," and at > 0:
            at += 1
        else:
            break
    return at


def clause_starts(words: list[str]) -> list[int]:
    return [0] + [i + 1 for i, w in enumerate(words) if w in CLAUSE_END and i + 1 < len(words)]


def rest(text: str, words: list[str], at: int) -> str:
    """The original text from word ``at`` on (best effort: by matching the words again)."""
    lowered = text.translate(APOSTROPHES).lower()
    pos = 0
    for word in words[:at]:
        found = lowered.find(word, pos)
        if found < 0:
            break
        pos = found + len(word)
    return text[pos:].strip(" \t\n,;:-–—").rstrip(" .!?")


def mentions(words: list[str], phrases: tuple[str, ...]) -> bool:
    return any(phrase(words, i, phrases) for i in range(len(words)))


def whole(words: list[str], phrases: tuple[str, ...], filler: tuple[str, ...]) -> bool:
    """Whether the message is one of ``phrases`` and nothing else (filler and marks aside,
    a one-word filler also inside the phrase: "mach das *bitte* rückgängig")."""
    single = {f for f in filler if " " not in f}
    inside = [w for i, w in enumerate(words) if i == 0 or w not in single]
    if inside != words and whole(inside, phrases, filler):
        return True
    at = skip(words, 0, filler)
    n = phrase(words, at, phrases)
    if not n:
        return False
    rest = [w for w in words[at + n :] if w not in CLAUSE_END]
    return not rest or skip(rest, 0, filler) == len(rest)


def keep_out(text: str) -> bool:
    """Whether the person asks the bot not to keep this message ("don't keep this: …",
    "merk dir das nicht", "off the record"), in any of the languages of ``lexicon``."""
    words = split_words(text)
    return any(
        phrase(words, skip(words, i, lang.filler), lang.dont_keep)
        for lang in READ
        for i in clause_starts(words)
    )


def polished(text: str, lang: Language) -> str:
    """``text`` without the politeness of ``lang`` (``Language.polite``), wherever it sits:
    "Forget, please, that I …" → "Forget, that I …", "Vergiss bitte, dass …" → "Vergiss,
    dass …", "Could you please forget …" → "Could you forget …". A comma on either side
    stays one comma, so clauses stay apart."""
    out = text.translate(APOSTROPHES)
    for phrase in sorted(lang.polite, key=len, reverse=True):
        words = r"\s+".join(map(re.escape, phrase.split()))
        pattern = rf"(\s*,?\s*)(?<![\w'])(?:{words})(?![\w'])(\s*,)?"

        def keep(match: re.Match[str]) -> str:
            return ", " if "," in match.group(1) or match.group(2) else " "

        out = re.sub(pattern, keep, out, flags=re.IGNORECASE)
    out = re.sub(r"\s*,(?:\s*,)+", ",", out)
    out = re.sub(r"\s*,\s*([.!?]|$)", r"\1", out)
    return " ".join(out.split()).lstrip(" ,;:")


def typo(word: str, verb: str) -> bool:
    """Whether ``word`` is ``verb`` typed with one slip that leaves no other word: a doubled
    letter ("forgett", "remmember"), two neighbours swapped ("froget"), or, in a verb of 7
    letters or more, one letter left out ("remeber", "vergis"). A changed letter is not a
    slip here: "forgot", "oublié", "olvidó" are other words."""
    if word == verb or not word.isalpha():
        return False
    if len(word) == len(verb) + 1:
        return any(
            word[:i] + word[i + 1 :] == verb and word[i] in (word[i - 1 : i] + word[i + 1 : i + 2])
            for i in range(len(word))
        )
    if len(word) == len(verb) - 1:
        return len(verb) >= 7 and any(verb[:i] + verb[i + 1 :] == word for i in range(len(verb)))
    if len(word) == len(verb):
        diff = [i for i in range(len(word)) if word[i] != verb[i]]
        return (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and word[diff[0]] == verb[diff[1]]
            and word[diff[1]] == verb[diff[0]]
        )
    return False


def mend(words: list[str], lang: Language) -> list[str]:
    """``words`` with a slip of the keyboard in a one-word forget or remember verb mended
    ("forgett my adress" → "forget my adress"), so a typo does not turn a request into a fact
    to keep. Only those verbs: a request about memory still needs its own words."""
    verbs = [v for v in lang.forget + lang.remember if " " not in v and len(v) >= 6]
    mended = list(words)
    for i, word in enumerate(words):
        if len(word) >= 5 and word not in verbs:
            for verb in verbs:
                if typo(word, verb):
                    mended[i] = verb
                    break
    return mended


def small_talk(text: str, names: tuple[str, ...] = ()) -> bool:
    """Greetings and thanks with nothing else in them ("Hello!", "thanks a lot, chaz")."""
    words = tokenize(text)
    allowed = SMALL_TALK | {n.lower() for n in names} | {"a", "lot"}
    return bool(words) and all(w in allowed for w in words)


__all__ = [
    "APOSTROPHES",
    "CLAUSE_END",
    "SENTENCE_END",
    "WORD",
    "clause_starts",
    "keep_out",
    "mend",
    "mentions",
    "phrase",
    "polished",
    "rest",
    "skip",
    "small_talk",
    "split_words",
    "typo",
    "whole",
]

"""The one tokenizer of the memory engine (SPEC §3) and the auto-recall query (SPEC §5).

Lowercase, split on every character that is not alphanumeric in the ``str.isalnum`` sense
(so ``_`` splits too), drop tokens shorter than 2 UTF-8 bytes. No stemming, no stopwords: the
BM25 index sees every word. Only the auto-recall query drops stopwords, so that a chat line
full of "the" and "is" does not recall everything.

Text other than ASCII is normalised first (``fold``), rows and queries alike: NFKC (so "é"
typed as one character or as "e" and U+0301 is one word, "ﬃ" is "ffi", a full-width "Ａ" an
"a"), lowercased, and the combining marks left after that dropped: a mark that no letter takes
(or a run of them) neither splits a word nor makes one (#47: a query of combining marks took
a slower path; "नमस्ते" was four one-letter words).

Every query is bounded before anything scores it (``bound_query``): its first
``MAX_QUERY_BYTES`` bytes, cut after its ``MAX_QUERY_TERMS``-th distinct token. BM25's work
grows with the distinct words of a query (one member's 8,000-word search held the event loop
6 s on a 20k-row bank), and no honest query needs more (auto-recall's has 10, SPEC §5).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# ``\w`` is "isalnum() or underscore" for str patterns, so ``[^\W_]`` is exactly isalnum().
_ALNUM_RUN = re.compile(r"[^\W_]+")
_ODD_RUN = re.compile(r"[^\w\s\x00-\x7f]+")
"""Characters that are neither ASCII, nor alphanumeric, nor space: combining marks among
non-ASCII punctuation and symbols (``re`` cannot name a Unicode category; ``unicodedata``
tells them apart, one character at a time, only here)."""
_TYPED_RUN = re.compile(r"[^\W_](?:[^\W_]|[^\w\s\x00-\x7f])*")
"""A word as typed: a letter or digit, then letters, digits and what may be marks (which
``fold`` drops; any other character there only makes the count of words high, never low)."""


def _marks_dropped(run: re.Match[str]) -> str:
    return _without_marks(run.group())


@functools.lru_cache(maxsize=4096)
def _without_marks(run: str) -> str:
    """``run`` without its combining marks (a run of the same symbols, as hostile text
    repeats, is read once)."""
    return "".join(c for c in run if unicodedata.category(c)[0] != "M")


_STOPWORD_TEXT = """
    about above after again against ain all am an and any are aren arent as at be because been
    before being below between both but by can cannot could couldn couldnt did didn didnt do
    does doesn doesnt doing don dont down during each few for from further had hadn hadnt has
    hasn hasnt have haven havent having he her here hers herself him himself his how if in into
    is isn isnt it its itself just ll me might mightn more most mustn my myself needn no nor not
    now of off on once only or other ought our ours ourselves out over own re same shan she
    should shouldn so some such than that the their theirs them themselves then there these they
    this those through to too under until up ve very was wasn wasnt we were weren what when where
    which while who whom why will with won wont would wouldn you your yours yourself yourselves
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())
_SMALL_TALK_TEXT = """
    hi hello hey hiya howdy yo morning good evening afternoon night day thanks thank you thx ty
    cheers ok okay bye goodbye see later great cool nice awesome perfect sure yes no yep nope lol
    haha welcome there all everyone folks please sorry again much so very alright right fine lot
    hallo danke bitte tschüss bonjour salut merci hola gracias adiós hoi dank doei
"""
SMALL_TALK: frozenset[str] = frozenset(_SMALL_TALK_TEXT.split())
"""Greetings, thanks and fillers: a query of only these (and stopwords) asks for nothing, so
its nearest vectors are not relevant whatever their cosine (#36: "search self hello")."""


def only_small_talk(text: str) -> bool:
    """Whether ``text`` has no token but stopwords and small talk."""
    return all(t in STOPWORDS or t in SMALL_TALK for t in tokenize(text))


def fold(text: str) -> str:
    """``text`` lowercased as the tokenizer reads it: ASCII as it is; anything else NFKC,
    lowercased, without combining marks ("İ" lowercases to "i" and a dot: dropped too)."""
    if text.isascii():
        return text.lower()
    return _ODD_RUN.sub(_marks_dropped, unicodedata.normalize("NFKC", text).lower())


def tokenize(text: str) -> list[str]:
    """Split ``text`` (``fold``-ed) into lowercase alphanumeric tokens of at least 2 UTF-8
    bytes, in order. A one-character token is kept only when it is not ASCII (a CJK
    character is 3 bytes)."""
    return [tok for tok in _ALNUM_RUN.findall(fold(text)) if len(tok) > 1 or tok > "\x7f"]


def document_text(key: str, value: str, tags: Sequence[str]) -> str:
    """The text a memory row is indexed under: key, value and tags, space separated."""
    return key + " " + value + " " + " ".join(tags)


MAX_QUERY_TERMS = 32
"""Distinct tokens of a query that are searched (the first ones); the rest are left out."""
MAX_QUERY_BYTES = 1024
"""UTF-8 bytes of a query that are read (the first ones); the rest are left out."""


@dataclass(frozen=True)
class BoundedQuery:
    """A query as it is searched: ``text`` is the start of the query as typed (its first
    ``max_bytes`` bytes, cut before its ``max_terms + 1``-th distinct token), ``terms`` its
    distinct tokens; ``cut`` says what was left out: "" (nothing), "terms" or "bytes"."""

    text: str
    terms: int
    cut: str


def first_terms(tokens: Iterable[str], max_terms: int = MAX_QUERY_TERMS) -> list[str]:
    """The first ``max_terms`` distinct tokens of ``tokens``, in order."""
    seen: dict[str, None] = {}
    if max_terms <= 0:
        return []
    for tok in tokens:
        if tok not in seen:
            seen[tok] = None
            if len(seen) >= max_terms:
                break
    return list(seen)


def bound_query(
    text: str, max_terms: int = MAX_QUERY_TERMS, max_bytes: int = MAX_QUERY_BYTES
) -> BoundedQuery:
    """``text`` cut to its first ``max_bytes`` UTF-8 bytes (at a character boundary), then
    before the first token past its first ``max_terms`` distinct ones. A query within both
    bounds comes back as it is, so the vector ranker and the month names (``when``) see what
    was typed."""
    cut = ""
    if len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raw = text[:max_bytes].encode("utf-8", "surrogatepass")[:max_bytes]
        text, cut = raw.decode("utf-8", "ignore"), "bytes"
    if not cut and text.isascii():  # each word is its own tokens: one pass tells
        distinct = len(set(tokenize(text)))
        if distinct <= max_terms:
            return BoundedQuery(text, distinct, "")
    seen: dict[str, None] = {}
    for run in _TYPED_RUN.finditer(text):  # each word's tokens as the index reads them
        fresh = [tok for tok in tokenize(run.group()) if tok not in seen]
        if len(seen) + len(dict.fromkeys(fresh)) > max_terms:
            text, cut = text[: run.start()].rstrip(), "terms"
            break
        seen.update(dict.fromkeys(fresh))
    terms = tokenize(text)
    if len(set(terms)) > max_terms:  # NFKC split a word differently (say "½"): rebuild
        kept = first_terms(terms, max_terms)
        return BoundedQuery(" ".join(kept), len(kept), "terms")
    return BoundedQuery(text, len(set(terms)), cut)


def auto_recall_query(messages: Sequence[str], max_tokens: int = 10) -> list[str]:
    """The auto-recall query: the first ``max_tokens`` distinct non-stopword tokens, in order."""
    seen: dict[str, None] = {}
    if max_tokens <= 0:
        return []
    for tok in tokenize(" ".join(messages)):
        if tok in STOPWORDS or tok in seen:
            continue
        seen[tok] = None
        if len(seen) >= max_tokens:
            break
    return list(seen)


__all__ = [
    "MAX_QUERY_BYTES",
    "MAX_QUERY_TERMS",
    "SMALL_TALK",
    "STOPWORDS",
    "BoundedQuery",
    "auto_recall_query",
    "bound_query",
    "document_text",
    "first_terms",
    "fold",
    "only_small_talk",
    "tokenize",
]

"""The one tokenizer of the memory engine (SPEC §3) and the auto-recall query (SPEC §5).

Lowercase, split on every character that is not alphanumeric in the ``str.isalnum`` sense
(so ``_`` splits too), drop tokens shorter than 2 UTF-8 bytes. No stemming, no stopwords: the
BM25 index sees every word. Only the auto-recall query drops stopwords, so that a chat line
full of "the" and "is" does not recall everything.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# ``\w`` is "isalnum() or underscore" for str patterns, so ``[^\W_]`` is exactly isalnum().
_ALNUM_RUN = re.compile(r"[^\W_]+")

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


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lowercase alphanumeric tokens of at least 2 UTF-8 bytes, in order.

    A one-character token is kept only when it is not ASCII (a CJK character is 3 bytes).
    """
    return [tok for tok in _ALNUM_RUN.findall(text.lower()) if len(tok) > 1 or tok > "\x7f"]


def document_text(key: str, value: str, tags: Sequence[str]) -> str:
    """The text a memory row is indexed under: key, value and tags, space separated."""
    return key + " " + value + " " + " ".join(tags)


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
    "SMALL_TALK",
    "STOPWORDS",
    "auto_recall_query",
    "document_text",
    "only_small_talk",
    "tokenize",
]

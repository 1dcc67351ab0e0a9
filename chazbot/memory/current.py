"""The newest statement about the same thing first (SPEC §3, after fusion; issue 35).

"Our wifi code is tulip-42" and, a week later, "The wifi code is now rose-7" are two rows
under two keys; recall returned them in whatever order the scores gave. This step runs after
the ranking: a row that has a newer statement of the same teller about the same subject
among the results (or among the same search's lower candidates, which then come in) is
marked earlier and has its newest update placed just before it. Nothing is hidden or
deleted; rows told by two different people are never updates of each other. A row's teller
is its provenance's speaker, else the speaker a captured row's value names, else the name of
a value "Name: …"; the operator's other rows (and a bank's) count as one teller.

Same subject, judged on the words (no model call on the ranking path): a statement's subject
is its content words with the value taken out. In a clause with a copula ("is", "are",
":", "'m" …) it is what stands before it ("our wifi code"), or, when that is only a pronoun,
the words after it up to the value ("I am allergic to …" → allergic); without one, the words
up to the first preposition or value ("I live in …" → live; "the team meeting moved to …" →
team meeting). Values are words with digits, '@' or '.', number words and capitalised words
inside a sentence (names). Stopwords, update words ("now", "new", "actually", "changed" …)
and verbs in the past tense (an event: "I went to …" twice is two events, both true) go too.
The word lists cover English, German, French, Spanish and Dutch; in a German clause (opening
with an article or possessive) capitalised words before the verb are nouns, not names.
Two statements are about the same subject when, for a clause of each, the shared subject
words are at least ``SAME_SUBJECT`` of the smaller subject. Questions, exclamations, a
one-word subject given no value, and rows of more than ``MAX_STATEMENT_WORDS`` words state
nothing here. Tuned on the dev half of ``tests/data/updates.json`` and LoCoMo's dev
conversations; figures in docs/memory.md ("The newest statement first").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from chazbot.memory.rows import MemoryRow

T = TypeVar("T")

SAME_SUBJECT = 0.66
"""The share of the smaller subject two statements must share to be about one thing (2 of
3 words). On the dev half (36 updates, 12 pairs of one person on two subjects): 0.5 judged
35 updates and 5 of the 12 others the same; 0.66 33 and none; 1.0 the same as 0.66, which
is kept as the looser one."""
SUBJECT_CACHE = 8192
"""Statements whose subjects are kept (the rows recall keeps returning)."""
MAX_STATEMENT_WORDS = 12
"""A longer row is a conversation's turn or a note, not a statement of one fact: never judged
an update. On LoCoMo's dev conversations (chat turns, hardly any updates), hybrid top 10:
at 20 words 100 of 760 result lists had a row marked earlier (nDCG@10 0.507 against 0.509
without the step), at 15 28, at 12 7 (0.509, recall unchanged; 4 with ``_CHAT``); the
update set's dev half is the same at all three."""
MAX_SUBJECT_WORDS = 6
"""A longer subject is not a statement of one fact: never judged an update."""


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_COPULAS = frozenset(
    {"is", "are", "was", "were", "am", "be", "'s", "'m", "'re", ":", "="}
    | _set("ist sind bin bist war waren")  # de
    | _set("est sont suis es était")  # fr
    | _set("son soy eres está están estoy era")  # es
    | _set("zijn ben bent")  # nl
)
_PRONOUNS = frozenset(
    {"i", "we", "you", "he", "she", "they", "it", "this", "that", "there"}
    | _set("ich wir du er sie je nous il elle ils yo nosotros ella ik wij hij zij")
)
_PREPOSITIONS = frozenset(
    {"at", "in", "to", "on", "for", "from", "with", "as", "by", "into", "near", "of", "about"}
    | _set("im auf bei mit nach zu zum zur für aus")  # de
    | _set("à au aux en dans chez avec pour sur")  # fr
    | _set("al con para por")  # es ("en" above)
    | _set("op met naar voor aan uit")  # nl
)
_STOP = _set(
    "a an the my our your his her their its me us and or but so not no do does did "
    "has have had will would can could also too very just really than then up out "
    "there here am be been being ones one"
    # articles, possessives and "of" in German, French, Spanish and Dutch
    " der die das den dem des ein eine einen mein meine meinen unser unsere von vom"
    " le la les un une mon ma mes notre nos du de"
    " el los las lo una mi mis tu nuestro nuestra del"
    " het een mijn onze ons van"
)
_UPDATE_WORDS = _set(
    "now new newer actually changed change moved move switched again since instead "
    "anymore longer still today currently these days turns turned got became become "
    "updated update from old former previously before later this year week sold quit "
    "raised pushed was were"
    " jetzt nun neu neue neuer neues neuen inzwischen mittlerweile seit"
    " maintenant nouveau nouvelle nouvel désormais depuis"
    " ahora nuevo nueva ya desde"
    " nu nieuw nieuwe voortaan sinds tegenwoordig"
)
_NUMBERS = _set(
    "zero one two three four five six seven eight nine ten eleven twelve twenty "
    "hundred first second third fourth fifth once twice half"
)
"""Number words: values, like digits."""
_CLAUSE = re.compile(r"([,;!?](?=\s|$)|\.(?:\s|$)|\s(?:but|and so|so)\s)")
"""Clause separators, kept: punctuation ends a clause only before a space or the end (a
password ``7xQ!pLm`` or ``1,020 euros`` is one word)."""
_ASKING = _set(
    "what where when who whom whose which why how did do does is are was were can "
    "could would will should have has shall may might"
)
"""A clause opening with one of these asks; a question states nothing."""
_WORD = re.compile(r"[^\s]+")
_INNER = re.compile(r"[^\w@.:'=-]+")
_CAPTURED = re.compile(r"^(\S+) \(\d{4}-\d{2}-\d{2}\): ")  # a captured row: "<who> (<date>): "
_REPLYING = re.compile(r" \[replying to [^\]]*\]$")
_NAMED = re.compile(r"^([A-Z][\w'-]*(?: [A-Z][\w'-]*)?): ")  # "Caroline: …", "Jon Snow: …"
_EVENTS = _set(
    "went saw made took met bought did had came ate ran told said gave found left "
    "felt thought visited tried started"
)
"""Verbs of something that happened: two events are both true, never one an update."""
_CHAT = _set(
    "'ll 've 'd hey hi hello thanks thank glad nice wow cool great sure yeah yes ok okay "
    "sorry awesome amazing let know think hope guess mean definitely really totally lol haha"
)
"""The words of chat around a statement (greetings, thanks, reactions): never a subject (on
LoCoMo's dev turns stored as captured rows, "Hey Joanna, …" and "Glad I could help" were the
most of the rows marked earlier)."""


@dataclass(frozen=True)
class Told:
    """What the step needs of a result: who told it, when, and the statement."""

    teller: str  # a speaker's MXID, or "" for the operator (and a bank's rows)
    ts: int
    order: tuple[int, str, int]
    text: str


def told_of(row: MemoryRow) -> Told:
    """A memory row as a statement (``statement``)."""
    speaker = row.origin.speaker if row.origin is not None else ""
    return statement(row.key, row.value, speaker, row.ts, row.order)


def statement(
    key: str, value: str, teller: str, ts: int, order: tuple[int, str, int] = (0, "", 0)
) -> Told:
    """A row as a statement: a captured row's message without its "<who> (<date>): " and
    "[replying to …]" parts; another row's key (underscores as spaces) and value."""
    named = _NAMED.match(value)
    captured = _CAPTURED.match(value)
    if captured:  # its value names who said it, whoever reads it (a hit without provenance)
        teller = teller or captured.group(1)
        text = _REPLYING.sub("", value[captured.end() :])
    elif named:  # "Caroline: …": a row written for someone, whose name tells who said it
        teller = teller or named.group(1)
        text = value[named.end() :]
    else:
        key = key.rsplit("/", 1)[-1]  # a fact's "<speaker>/<key>"
        text = f"{key.replace('_', ' ')}: {value}" if _is_word_key(key) else value
    return Told(teller, ts, order, text)


def _is_word_key(key: str) -> bool:
    """A key that names a subject (``wifi_code``), not an id or a date."""
    return bool(key) and not any(c.isdigit() for c in key) and len(key) <= 64


@functools.lru_cache(maxsize=SUBJECT_CACHE)
def subjects(text: str, max_words: int = MAX_STATEMENT_WORDS) -> tuple[frozenset[str], ...]:
    """The subject of each clause of ``text`` that states something (cached, as the same
    rows come back query after query). A one-word subject needs a value in its clause or
    the next one ("I got a new bike, a Gazelle"); "hiking again" states nothing; nor does
    a text of more than ``max_words`` words."""
    if len(text.split()) > max_words:
        return ()
    pieces = _CLAUSE.split(text)
    parts = []
    for clause, after in zip(pieces[::2], [*pieces[1::2], ""], strict=True):
        first = clause.replace("’", "'").split(maxsplit=1)[:1]
        opening = first[0].lower().strip("\"'(").split("'")[0] if first else ""
        asking = after.strip() in ("?", "!") or opening in _ASKING
        parts.append((frozenset(), False) if asking else _clause_subject(clause))
    found = []
    for i, (subject, valued) in enumerate(parts):
        if not subject:
            continue
        follows = i + 1 < len(parts) and not parts[i + 1][0] and parts[i + 1][1]
        if valued or follows or len(subject) > 1:
            found.append(subject)
    return tuple(found)


def _clause_subject(clause: str) -> tuple[frozenset[str], bool]:
    """The clause's subject and whether the clause gives it a value ("I live in Lisbon":
    live, yes; "went hiking": hiking, no)."""
    words = _words(clause)
    cut = next((i for i, (w, _) in enumerate(words) if w in _COPULAS), None)
    if cut is not None:
        head = _content(words[:cut])
        if head:
            return head, _has_value(words[cut + 1 :])
        words = words[cut + 1 :]  # "I am allergic to …": the predicate up to its value
    end = next((i for i, (w, value) in enumerate(words) if value or w in _PREPOSITIONS), len(words))
    before, after = _content(words[:end]), words[end:]
    if before:
        return before, _has_value(after)
    # "I have two cats": nothing before the value but a verb; the thing counted is after it
    return _content(after), any(value for _, value in after)


def _has_value(words: Sequence[tuple[str, bool]]) -> bool:
    return any(value or (w not in _PREPOSITIONS and w not in _STOP) for w, value in words)


_GERMAN_OPENING = _set(
    "der die das den dem des ein eine einen einem einer mein meine meinen meinem meiner "
    "unser unsere unseren dein deine sein seine ihr ihre"
)
"""A clause opening with one of these is German: its capitalised words before the verb are
nouns ("Mein WLAN-Passwort ist …"), not names."""


_TAILS = ("'m", "'s", "'re", "'ll", "'ve", "'d")
"""Contractions split off a word (each holds the apostrophe: a word without one has none)."""


def _words(clause: str) -> list[tuple[str, bool]]:
    """``(word, is a value)`` of a clause, lower case; contractions split off ("i", "'m")."""
    out: list[tuple[str, bool]] = []
    raws = _WORD.findall(clause.replace("’", "'"))
    nouns = bool(raws) and raws[0].lower() in _GERMAN_OPENING  # until the verb
    for position, raw in enumerate(raws):
        raw = raw.strip('"()[]{}<>!?,;')
        if not raw:
            continue
        if raw.endswith(":") and len(raw) > 1:
            out += _words(raw[:-1])
            out.append((":", False))
            continue
        low = raw.lower()
        nouns = nouns and low not in _COPULAS
        for tail in _TAILS if "'" in low else ():
            if low.endswith(tail) and len(low) > len(tail):
                out.append((low[: -len(tail)], False))
                out.append((tail, False))
                break
        else:
            value = (
                any(map(str.isdigit, raw))
                or low.strip(".,") in _NUMBERS
                or "@" in raw
                or "." in raw.strip(".")
                or (position > 0 and raw[:1].isupper() and low != "i" and not nouns)
            )
            word = _INNER.sub("", low).strip(".'-")
            if word:
                out.append((word, value))
    return out


def _content(words: Sequence[tuple[str, bool]]) -> frozenset[str]:
    return frozenset(
        _stem(w)
        for w, value in words
        if not value
        and w not in _STOP
        and w not in _UPDATE_WORDS
        and w not in _PRONOUNS
        and w not in _COPULAS
        and w not in _PREPOSITIONS
        and w not in _EVENTS
        and w not in _CHAT
        and not (w.endswith("ed") and len(w) > 4)  # past tense: an event
        and len(w) > 1
    )


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def same_subject(a: str, b: str, threshold: float = SAME_SUBJECT) -> bool:
    """Whether statements ``a`` and ``b`` say something about the same subject."""
    words = MAX_STATEMENT_WORDS  # passed as newest_first passes it: one cache entry a text
    return _shares(subjects(a, words), subjects(b, words), threshold)


def _shares(a: Sequence[frozenset[str]], b: Sequence[frozenset[str]], threshold: float) -> bool:
    for sa in a:
        if len(sa) > MAX_SUBJECT_WORDS:
            continue
        for sb in b:
            if len(sb) > MAX_SUBJECT_WORDS:
                continue
            shared = len(sa & sb)
            if shared and shared / min(len(sa), len(sb)) >= threshold:
                return True
    return False


def newest_first(
    items: Sequence[T],
    told: Callable[[T], Told],
    threshold: float = SAME_SUBJECT,
    pool: Sequence[T] = (),
    max_words: int = MAX_STATEMENT_WORDS,
) -> list[tuple[T, bool]]:
    """``items`` (ranked) with the statements of one teller about one subject together at
    the place of the best ranked one, the newest first; each with whether it is an earlier
    statement (a newer one of the same teller about the same subject is shown).

    ``pool``: more candidates of the same search (ranked lower, the same filters passed); one
    that is a newer statement of an item's teller about the item's subject joins it, so the
    current statement shows even when the question's words matched the older one best. The
    list may then be longer than ``items``: the caller cuts it. ``max_words``: a longer
    statement is never judged an update (``MAX_STATEMENT_WORDS``; benches vary it)."""
    members = list(items)
    stated = [told(item) for item in members]
    # A statement's subjects are parsed only when another of its teller's is compared with
    # it (the parse is most of this step's cost; rows of different tellers never need it).
    parsed: list[tuple[frozenset[str], ...] | None] = [None] * len(members)

    def subject_of(i: int) -> tuple[frozenset[str], ...]:
        found = parsed[i]
        if found is None:
            found = parsed[i] = subjects(stated[i].text, max_words)
        return found

    shown = len(members)
    for candidate in pool:
        said = told(candidate)
        subject: tuple[frozenset[str], ...] | None = None
        for i in range(shown):
            base = stated[i]
            if (
                base.teller == said.teller
                and (said.ts, said.order) > (base.ts, base.order)
                and base.text != said.text
            ):
                if subject is None:
                    subject = subjects(said.text, max_words)
                if not subject:
                    break
                if _shares(subject_of(i), subject, threshold):
                    members.append(candidate)
                    stated.append(said)
                    parsed.append(subject)
                    break
    # Each row's newest direct update (same teller, same subject, newer); not transitive, so
    # one loose match cannot chain a whole conversation into one group.
    update: dict[int, int] = {}
    for i in range(len(members)):
        for j in range(len(members)):
            if (
                i != j
                and stated[i].teller == stated[j].teller
                and (stated[j].ts, stated[j].order) > (stated[i].ts, stated[i].order)
                and stated[i].text != stated[j].text
                and subject_of(i)
                and _shares(subject_of(i), subject_of(j), threshold)
            ):
                best = update.get(i)
                if best is None or (stated[j].ts, stated[j].order) > (
                    stated[best].ts,
                    stated[best].order,
                ):
                    update[i] = j
    out: list[tuple[T, bool]] = []
    placed: set[int] = set()
    for i in range(shown):
        if i in placed:
            continue
        newer = update.get(i)
        if newer is not None and newer not in placed:
            placed.add(newer)
            out.append((members[newer], newer in update))
        placed.add(i)
        out.append((members[i], i in update))
    return out


def earlier_mark(text: str, earlier: bool) -> str:
    """``text`` as shown: an earlier statement says so ("earlier: …")."""
    return f"earlier: {text}" if earlier else text


__all__ = [
    "SAME_SUBJECT",
    "Told",
    "earlier_mark",
    "newest_first",
    "same_subject",
    "statement",
    "told_of",
]

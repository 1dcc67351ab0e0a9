"""What people ask of the bot in plain words, for every chat model (#17).

A small intent step, pure: it reads a message and says whether it asks for the intro ("what
can you do?", "help"), for what the bot keeps about the person ("what do you know about
me?"), to forget something ("please forget my manager's name"), or to remember something
("remember that …"). The turn answers the first two for every model, and the last two for
models that call no tools (the embedded ones); a model with tools gets them as tool calls.
Forgetting in words goes through the same checks as ``/memory forget-mine``: the person's own
rows, where the room may see them.

It also says what is not worth keeping (greetings, thanks, requests to the bot), and whether
a message asks something, which the turn uses to tell a model that nothing was recalled.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal

from chazbot.agent.imperative import only_commands
from chazbot.agent.lexicon import Language
from chazbot.agent.reading import APOSTROPHES as _APOSTROPHES
from chazbot.agent.reading import CLAUSE_END as _CLAUSE_END
from chazbot.agent.reading import clause_starts as _clause_starts
from chazbot.agent.reading import keep_out, polished, small_talk
from chazbot.agent.reading import mend as _mend
from chazbot.agent.reading import mentions as _mentions
from chazbot.agent.reading import phrase as _phrase
from chazbot.agent.reading import rest as _rest
from chazbot.agent.reading import skip as _skip
from chazbot.agent.reading import split_words as _words
from chazbot.agent.reading import whole as _whole
from chazbot.agent.request_words import (
    READ,
    canonical_last,
    dont_forget,
    newcomer,
    spanish_speaker,
    untagged,
)
from chazbot.agent.turning import BY_CODE, as_said_to_them, language, turned

IntentKind = Literal["intro", "about_me", "forget", "forget_last", "remember", "undo", "choose"]


@dataclass(frozen=True)
class Intent:
    kind: IntentKind
    what: str = ""  # forget: the words naming what ("" for everything); remember: the fact
    lang: str = "en"  # the language the request was made in (``lexicon``), for the reply


def _asking(words: list[str], lang: Language) -> bool:
    """A question: a question mark, or an opening that asks ("remember when…")."""
    if "?" in words or "¿" in words:
        return True
    return any(_phrase(words, i, lang.asking) for i in _clause_starts(words))


_LEADING_MARKS = re.compile(r"^[^\w¿¡\"'“„«‘(]+")
"""Emoji and symbols before a request's first word: read past like a filler."""
_CHOICE = re.compile(r"^\W*\d{1,2}\W*$")
_SENTENCES = re.compile(r"[^.!?¿¡]+[.!?]*|[¿¡][^.!?]*[.!?]*")


def _intro_inside(flat: str, lang: Language) -> bool:
    """An intro asked after a greeting or a word about the newcomer, in one message: "Hello!
    I'm Ana, I'm new here. What can you do?". Every other sentence is small talk or opens
    (at one of its clauses) with ``Language.intro_said``, or is a greeting or a newcomer's
    line (``request_words.newcomer``: "Hi all, Priya here, just joined.")."""
    sentences = [s.strip(" ¿¡") for s in _SENTENCES.findall(flat) if _words(s)]
    if len(sentences) < 2 or len(sentences) > 4:
        return False
    asked = [s for s in sentences if _whole(_words(s), lang.intro, lang.filler)]
    if len(asked) != 1:
        return False
    for sentence in sentences:
        if sentence is asked[0] or small_talk(sentence):
            continue
        words = [w for w in _words(sentence) if w not in ("!", ".", "?")]
        if newcomer(words, lang, sentence):  # "Hi all, Priya here, just joined."
            continue
        starts = _clause_starts(words)
        if not any(_phrase(words, _skip(words, i, lang.filler), lang.intro_said) for i in starts):
            return False
    return True


INTENTS_KEPT = 64
"""Messages whose intent is kept: a turn reads its message's three times (the reply's
``told``, twice, and capture's ``worth_keeping``), ~2.3 ms each at load 10 (#48)."""


@functools.lru_cache(maxsize=INTENTS_KEPT)
def intent(text: str) -> Intent | None:
    """The intent of ``text``, or None for an ordinary message (also for a request about
    the world that uses a memory verb: "remove the onions from the recipe"). Politeness is
    read past wherever it sits (``polished``), with the particles, openings, question tags and
    ways of saying "what I just said" of ``request_words``. Read once a text (``Intent`` is
    frozen; the rules are constants)."""
    flat = _LEADING_MARKS.sub("", " ".join(text.split()))  # "🙈 forget my weight, please"
    if not _words(flat):
        return None
    if _CHOICE.match(flat):  # a number: the answer to a list of rows a forget could mean
        return Intent("choose", flat)
    read = [(lang, polished(untagged(canonical_last(flat, lang), lang), lang)) for lang in READ]
    for lang, clean in read:
        words = _words(clean)
        if _whole(words, lang.undo, lang.filler):
            return Intent("undo", lang=lang.code)
        if _whole(words, lang.intro, lang.filler) or _intro_inside(clean, lang):
            return Intent("intro", lang=lang.code)
        if _mentions(words, lang.about_me):
            return Intent("about_me", lang=lang.code)
    if keep_out(flat):
        return None
    for lang, clean in read:
        words = _words(clean)
        if not words:
            continue
        found = _memory_request(clean, words, lang)
        if found is not None:
            return found
    return None


_THAT = frozenset({"that", "dass", "que", "dat"})
"""The leads that open a fact ("remember *that* …"), never a thing to do."""
_PERSON = frozenset(w for lang in READ for w in lang.person)


def _theirs(words: list[str]) -> bool:
    """Whether ``words`` name the person or what is theirs, in any language of ``lexicon``
    (a message may mix them: "Vergeet mijn wifi password")."""
    return any(w in _PERSON or w.split("'")[0] + "'" in _PERSON for w in words)


def _clause(words: list[str], at: int) -> list[str]:
    """The words from ``at`` to the end of their clause."""
    out = []
    for w in words[at:]:
        if w in _CLAUSE_END:
            break
        out.append(w)
    return out


def _asks_of_memory(text: str, recalling: bool = True) -> bool:
    """Whether ``text`` opens with a verb that asks something of the bot's memory (forget,
    remember, delete… in any language of ``lexicon``; ``recalling``: the remember verbs too),
    understood or not: such a message ("Remember to buy milk", "Forget the onions") is never
    itself a fact to keep."""
    typed = _words(" ".join(text.split()))
    for lang in READ:
        words = _mend(typed, lang)
        at = _skip(words, 0, lang.filler)
        verbs = lang.forget + lang.delete + lang.dont_keep + (lang.remember if recalling else ())
        if _phrase(words, at, verbs):
            return True
    return False


def _verb_last(
    words: list[str], start: int, at: int, lang: Language
) -> tuple[int, int, bool] | None:
    """A forget whose verb closes the clause (German and Dutch put it last): "kannst du meine
    Adresse vergessen?", "ich möchte nicht, dass du dir meine Adresse merkst", "kun je mijn
    adres vergeten?". An opening of ``Language.verb_last`` from the clause's start to past its
    filler, the clause's last word one of ``verb_last_end`` (a forget) or ``delete`` (about
    memory only when the sentence names it), no "nicht"/"niet" nor "zu"/"te" before it, no
    comma between the opening and the verb. Returns where
    the opening is, its length, and whether the verb is a forget."""
    clause = []
    for w in words[start:]:
        if w in _CLAUSE_END and w != ",":
            break
        clause.append(w)  # the opening may hold a comma: "ich möchte nicht, dass du dir …"
    if len(clause) < 2 or clause[-2] in _NOT or clause[-2] in ("zu", "te"):
        return None
    closing = clause[-1]
    if closing not in lang.verb_last_end and closing not in lang.delete:
        return None
    for i in range(start, at + 1):
        n = _phrase(words, i, lang.verb_last)
        between = words[i + n : start + len(clause) - 1]
        if n and between and "," not in between:  # one clause: "…, das zu vergessen" is not
            return i, n, closing in lang.verb_last_end
    return None


_NOT = frozenset({"nicht", "niet", "not", "pas", "no"})


def _memory_request(text: str, typed: list[str], lang: Language) -> Intent | None:
    words = _mend(typed, lang)
    asking = _asking(words, lang)
    for start in _clause_starts(words):
        at = _skip(words, start, lang.filler)
        n = _phrase(words, at, lang.remember)
        if not n and at > start:  # after a modal: "kannst du dir merken, dass …?"
            n = _phrase(words, at, lang.remember_asked)
        if n:
            verb_at, after = at, _skip(words, at + n, (",", ":"))
            that = after < len(words) and words[after] in _THAT
            if asking and not (at > start and that):
                return None  # "Remember when we went to Paris?": never stored as a fact
            colon = ":" in words[at + n : at + n + 2]
            at = after
            lead = _phrase(words, at, lang.lead)
            that = bool(lead) and words[at] in _THAT
            if not colon and not that and re.search(lang.todo, " ".join(_clause(words, at))):
                return None  # "remember to buy milk": a thing to do, not a fact to keep
            reminder = dont_forget(words, verb_at, lang) and not that and not colon
            if reminder and not _theirs(_clause(words, at)):
                return None  # "Don't forget the umbrella tomorrow!": a reminder
            what = _rest(text, typed, at + lead)
            return Intent("remember", what, lang.code) if what else None
        n, strong = _phrase(words, at, lang.forget), True
        if not n:
            n, strong = _phrase(words, at, lang.delete), False
        last = None if n else _verb_last(words, start, at, lang)
        if last is not None:
            at, n, strong = last
        if not n:
            continue
        if not strong and not _mentions(words, lang.memory):
            return None  # "delete the meeting from my calendar": about the world
        if asking and start == 0 and at == 0 and last is None:
            return None  # "How do I delete…?" starts elsewhere; "Forget X?" is unclear
        at = _skip(words, at + n, (",", ":"))
        object_words = _clause(words, at)
        if last is not None:
            object_words = object_words[:-1]  # "kannst du meine Adresse *vergessen*?"
        if object_words and _phrase(object_words, 0, lang.last_said) == len(object_words):
            return Intent("forget_last", "", lang.code)  # "forget what I just said"
        if not object_words or _phrase(object_words, 0, lang.dismiss) == len(object_words):
            return None  # "forget it", "vergiss es", "laisse tomber"
        what = _object(text, typed, at, lang)
        if last is not None:
            what = re.sub(r"\s*\S+\W*$", "", what)  # the closing verb, as typed
        mine = _theirs(object_words) or any(w in lang.opens for w in object_words)
        mine = mine or (lang.code == "es" and spanish_speaker(object_words))
        if what and not mine and not _mentions(words, lang.memory):
            return None  # "forget about the cinema, let's stay in": nothing of theirs named
        return Intent("forget", what, lang.code)
    return None


_ALL = frozenset({"everything", "all", "alles", "tout", "todo", "alle", "allemaal"})
_ABOUT_ME = frozenset(
    {"about", "me", "of", "from", "you", "über", "mich", "von", "mir", "sur", "moi", "de"}
    | {"mí", "sobre", "over", "mij", "van", "it", "that", "i", "said", "told", "know"}
)


def _object(text: str, words: list[str], at: int, lang: Language) -> str:
    """What a forget request names, as typed, without the words that name memory ("from
    your memory", "what I told you about"); "" for everything."""
    rest = _rest(text, words, at)
    tail = _words(rest)
    kept: list[str] = []
    i = 0
    while i < len(tail):
        n = _phrase(tail, i, lang.memory)
        if n:
            i += n
            continue
        if tail[i] not in _CLAUSE_END:
            kept.append(tail[i])
        i += 1
    if not kept or (kept[0] in _ALL and set(kept[1:]) <= _ABOUT_ME):
        return ""
    for phrase in sorted(lang.memory, key=len, reverse=True):
        pattern = r"(?<!\w)" + r"\s+".join(map(re.escape, phrase.split())) + r"(?!\w)"
        rest = re.sub(pattern, " ", rest.translate(_APOSTROPHES), flags=re.IGNORECASE)
    return " ".join(rest.split()).strip(" ,;:-")


_ASKING = re.compile(
    r"^\W*(what|who|whom|whose|where|when|why|how|which|do|does|did|is|are|was|were|can|"
    r"could|will|would|should|shall|may|might|tell|remind|list|show|give|name|recall|find)\b",
    re.IGNORECASE,
)


def asks(text: str) -> bool:
    """Whether a message asks something: a question mark, or it starts with a question word
    or a request (``Tell me…``, ``Remind me…``)."""
    return "?" in text or _ASKING.match(text) is not None


_PERSONAL = re.compile(
    r"\b(i|my|mine|myself|i'm|i've|i'd|ich|mein|meine|meinen|meinem|meiner|meines|mich|mir|"
    r"je|j'|mon|ma|mes|moi|yo|mi|mis|ik|mijn|mij|"
    r"we|our|ours|wir|unser|unsere|unseren|unserem|unserer|nous|notre|nos|nosotros|nosotras|"
    r"nuestro|nuestra|nuestros|nuestras|wij|onze|ons)(?!\w)",
    re.IGNORECASE,
)
"""The person in a message, in the five languages of ``lexicon`` ("my", "mein", "mon", "mi",
"mijn"…), and their household ("our", "unser", "notre", "nuestro", "onze": "Wat voor werk
doet onze buurman?")."""


def personal(text: str) -> bool:
    """Whether a message asks about the person ("What is my cat's name?", "Where was I
    born?", "Wie heißt mein Sohn?", "Où suis-je né ?"); "Can you help me?" does not."""
    return _PERSONAL.search(text.translate(_APOSTROPHES)) is not None


def to_the_bot(text: str, names: tuple[str, ...] = ()) -> bool:
    """Whether ``text`` asks the bot to do something rather than tells anything (#45): it
    opens with a verb that asks something of memory ("Oublie le cinéma ce soir", "Forget
    the onions"), or it is polite in one of the languages of ``lexicon`` and tells nothing
    of the person ("Lösch bitte die Zwiebeln aus dem Rezept", "Remove the mushrooms from
    that recipe idea, please"), or it only asks the bot to do something
    (``imperative.only_commands``: "Write me a short poem", "Cuéntame un chiste"). "Please
    note that …" is read as a remember before this."""
    if _asks_of_memory(text, recalling="?" not in text):
        return True  # "Remember that block in Game 7?" reminisces: it is kept
    if only_commands(text, names):
        return True  # "Write me a short poem", "Nimm die Nüsse aus dem Rezept raus"
    typed = _words(" ".join(text.split()))
    lang = BY_CODE[language(text)]  # its own language's: Dutch "even" is no English "please"
    return _mentions(typed, lang.polite) and not _theirs(typed)


def worth_keeping(text: str, names: tuple[str, ...] = ()) -> bool:
    """Whether capture may keep ``text``: not greetings or thanks, not a request to the bot
    (the intro, "what do you know about me?", "forget …", "remove the onions, please").
    "Remember that …" is kept: it is what the person wants kept."""
    if small_talk(text, names):
        return False
    found = intent(text)
    if found is not None:
        return found.kind == "remember"
    return not to_the_bot(text, names)


MAX_TOLD_CHARS = 200
"""A told fact is one short statement; anything longer goes to the model."""
_REQUEST = re.compile(
    r"\b(?:you|your|yours|please|pls|help|let's|let\s+us|need|want|wonder|like|could|can|"
    r"should|would|must|wish|hope|think|guess|maybe|perhaps|if)\b",
    re.IGNORECASE,
)
_COMMAND = re.compile(
    r"^\W*(?:write|tell|translate|summari[sz]e|make|give|show|find|explain|list|plan|help|"
    r"draft|create|send|check|remind|book|call|search|compose|describe|suggest|recommend|"
    r"fix|add|set|play|open|read|look|compare|calculate|convert|say|try|use|go|answer|ask|"
    r"do|don't|be|let|wait|stop|keep|take|get|bring|put|turn|think|pick|buy|pay|order|"
    r"schedule|cancel|move|sort|count|imagine|pretend|repeat|continue|reply|respond|"
    r"email|text|message|ping|buzz|wake|start|finish|update|change|delete|remove|note)\b",
    re.IGNORECASE,
)
_TELLS = re.compile(
    r"\b(?:i|my|mine|me|i'm|i've|i'd|we|our|us|we're|is|are|was|were|has|have|had|will|"
    r"\w+'s|\w\w+s|\w+ed)\b",
    re.IGNORECASE,
)
"""What a statement that tells something has: the person, a possessive, or a verb ("is",
"comes", "moved"); "first message" has none."""
_LISTENER_START = frozenset(
    [
        "you",
        "your",
        "you're",
        "you've",
        "you'll",
        "you'd",
        "yours",
        "we",
        "our",
        "we're",
        "we've",
        "us",
        "the",
        "a",
        "an",
    ]
)


def told(text: str, names: tuple[str, ...] = ()) -> str | None:
    """The fact a message tells, turned to the listener ("My cat is called Miso." → "your
    cat is called Miso"), or None when it is not one short statement told to keep: a
    question, a request or command to the bot, small talk, an intent, several sentences."""
    flat = " ".join(text.split())
    if not flat or len(flat) > MAX_TOLD_CHARS or asks(flat) or intent(flat) is not None:
        return None
    if _asks_of_memory(flat):
        return None
    lang = language(flat)
    if lang != "en":
        return _told_in(flat, BY_CODE[lang], names)
    if not worth_keeping(flat, names) or _REQUEST.search(flat) or _COMMAND.match(flat):
        return None
    body = flat.rstrip(" .!")
    if not body or re.search(r"[.!?;]\s", body) or len(body.split()) < 3:
        return None  # several sentences, or too few words to tell anything: the model answers
    if not _TELLS.search(body):
        return None
    fact = as_said_to_them(body)
    first = fact.split(None, 1)[0].lower()
    if first in _LISTENER_START:
        fact = fact[0].lower() + fact[1:]
    return fact


def _told_in(flat: str, lang: Language, names: tuple[str, ...]) -> str | None:
    """``told`` for a statement in another language of ``lexicon``: it starts with the person
    or their possessive (``Language.opens``), has a verb that tells (``Language.tells``), and
    asks nothing of the bot (none of its ``please``: "bitte", "kannst", "por favor")."""
    if not worth_keeping(flat, names) or "?" in flat or "¿" in flat:
        return None
    body = flat.rstrip(" .!")
    words = [w for w in _words(body) if w not in _CLAUSE_END]
    if len(words) < 3 or re.search(r"[.!?;]\s", body):
        return None
    first = words[0]
    if first not in lang.opens and first[:2] not in lang.opens:
        return None
    if not any(w in lang.tells or w.split("'")[-1] in lang.tells for w in words):
        return None
    if _mentions(words, lang.please):
        return None
    return turned(body, lang)


__all__ = [
    "MAX_TOLD_CHARS",
    "Intent",
    "as_said_to_them",
    "asks",
    "intent",
    "keep_out",
    "language",
    "personal",
    "polished",
    "small_talk",
    "to_the_bot",
    "told",
    "worth_keeping",
]

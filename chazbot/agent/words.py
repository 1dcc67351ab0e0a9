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

import re
from dataclasses import dataclass
from typing import Literal

from chazbot.memory.tokenize import tokenize

IntentKind = Literal["intro", "about_me", "forget", "remember"]


@dataclass(frozen=True)
class Intent:
    kind: IntentKind
    what: str = ""  # forget: the words naming what ("" for everything); remember: the fact


_FILLER = (
    r"(?:(?:hey|hi|ok|okay|so|and|now)[,!]?\s+)?(?:please\s+)?"
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
)
_FORGET = re.compile(
    rf"^\s*{_FILLER}(?:forget|erase|delete|remove|drop)\s+(?:about\s+|that\s+)?(?P<what>.*?)"
    r"(?:\s+please)?\s*[.!?]*\s*$",
    re.IGNORECASE | re.DOTALL,
)
_EVERYTHING = re.compile(
    r"^(?:everything|all|it all|all of it|all (?:that|you know)"
    r"|everything (?:you know|i (?:said|told you)))(?:\s+about\s+me)?$",
    re.IGNORECASE,
)
_REMEMBER = re.compile(
    rf"^\s*{_FILLER}(?:remember|note|keep in mind)\s+(?:that\s+)?(?P<what>.+?)\s*$",
    re.IGNORECASE | re.DOTALL,
)
_ABOUT_ME = re.compile(
    r"\b(?:what\s+(?:do|did)\s+you\s+(?:know|remember|keep|have)\s+(?:about|on|of)\s+me"
    r"|what\s+have\s+i\s+told\s+you|what\s+did\s+i\s+tell\s+you)\b",
    re.IGNORECASE,
)
_INTRO = re.compile(
    r"^\s*(?:(?:hi|hello|hey)[,!]?\s+)?(?:help|what\s+can\s+you\s+do|what\s+do\s+you\s+do"
    r"|who\s+are\s+you|what\s+are\s+you|how\s+do\s+you\s+work|how\s+does\s+this\s+work"
    r"|what\s+are\s+you\s+for)\s*[?!.]*\s*$",
    re.IGNORECASE,
)
_ASKING = re.compile(
    r"^\W*(what|who|whom|whose|where|when|why|how|which|do|does|did|is|are|was|were|can|"
    r"could|will|would|should|shall|may|might|tell|remind|list|show|give|name|recall|find)\b",
    re.IGNORECASE,
)
_SMALL_TALK_WORDS = """
hi hello hey hiya howdy yo morning good evening afternoon night day thanks thank you thx ty
cheers ok okay bye goodbye see later great cool nice awesome perfect sure yes no yep nope lol
haha welcome there all everyone folks please sorry again much so very alright right fine
"""
SMALL_TALK = frozenset(_SMALL_TALK_WORDS.split())


def intent(text: str) -> Intent | None:
    """The intent of ``text``, or None for an ordinary message."""
    flat = " ".join(text.split())
    if _INTRO.match(flat):
        return Intent("intro")
    if _ABOUT_ME.search(flat):
        return Intent("about_me")
    if m := _FORGET.match(flat):
        what = m.group("what").strip()
        if not what:
            return None
        return Intent("forget", "" if _EVERYTHING.match(what) else what)
    if m := _REMEMBER.match(flat):
        return Intent("remember", m.group("what").strip())
    return None


def asks(text: str) -> bool:
    """Whether a message asks something: a question mark, or it starts with a question word
    or a request (``Tell me…``, ``Remind me…``)."""
    return "?" in text or _ASKING.match(text) is not None


_PERSONAL = re.compile(r"\b(i|my|mine|myself|i'm|i've|i'd)\b", re.IGNORECASE)


def personal(text: str) -> bool:
    """Whether a message asks about the person ("What is my cat's name?", "Where was I
    born?"); "Can you help me?" does not."""
    return _PERSONAL.search(text) is not None


def small_talk(text: str, names: tuple[str, ...] = ()) -> bool:
    """Greetings and thanks with nothing else in them ("Hello!", "thanks a lot, chaz")."""
    words = tokenize(text)
    allowed = SMALL_TALK | {n.lower() for n in names} | {"a", "lot"}
    return bool(words) and all(w in allowed for w in words)


def worth_keeping(text: str, names: tuple[str, ...] = ()) -> bool:
    """Whether capture may keep ``text``: not greetings or thanks, not a request to the bot
    (the intro, "what do you know about me?", "forget …"). "Remember that …" is kept: it
    is what the person wants kept."""
    if small_talk(text, names):
        return False
    found = intent(text)
    return found is None or found.kind == "remember"


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


def as_said_to_them(text: str) -> str:
    """A person's own words turned to address them ("My dog is Rex" → "Your dog is Rex"), so
    a small model speaks their facts as theirs, not as its own."""

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


__all__ = [
    "MAX_TOLD_CHARS",
    "Intent",
    "as_said_to_them",
    "asks",
    "intent",
    "personal",
    "small_talk",
    "told",
    "worth_keeping",
]

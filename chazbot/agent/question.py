"""A question about a person, read (#45): whom it asks about and what (SPEC §5d).

The names it gives ("What does *Jonas* do?"), the possessed nouns a row must name ("my
*brother*", "ma *grand-mère*"), whether it is about the asker ("Where do I live?"), a
follow-up's subject taken from the question before it ("And what does *he* do?"), and whether
it asks something of a person at all ("What is the capital of France?" does not). Pure: words
and sets; ``answering`` chooses the row that answers what is read here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from chazbot.agent.grounding import (
    CONCEPT_OF,
    FIRST_PERSON,
    FUNCTION,
    KIND_WORDS,
    KNOWN,
    POSSESSIVES,
    QUESTION,
    RELATIONS,
    asked,
)
from chazbot.agent.words import language, personal
from chazbot.memory.tokenize import tokenize


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


FOLLOW_OPENINGS = _set("and und et y e en also")
PRONOUNS = _set(
    "he she him his her hers they them their er sie ihm ihn ihr ihre sein seine seinen "
    "seinem seiner il elle lui son sa ses leur él ella su sus hij zij ze hem haar zijn"
)
"""Third persons that point back to the previous question's subject."""
AGE = _set("old age alt alter âge edad años oud leeftijd ans jahre years")
NUMBER_WORDS = _set(
    "one two three four five six seven eight nine ten twenty thirty forty fifty sixty "
    "seventy eighty ninety hundred eins zwei drei vier fünf zehn zwanzig dreißig vierzig "
    "fünfzig sechzig siebzig achtzig neunzig hundert un deux trois quatre cinq dix vingt "
    "trente quarante cinquante soixante cent uno dos tres cuatro cinco diez veinte treinta "
    "cuarenta cincuenta sesenta setenta ochenta noventa cien een twee drie vier vijf tien "
    "twintig dertig veertig vijftig zestig zeventig tachtig negentig honderd"
)
_JOB = CONCEPT_OF["job"]
_NAMED = CONCEPT_OF["name"]
_NOT_NAMES = _set("i sie ihr ihnen usted ustedes vous u")


FAVOURITE_PREFIXES = ("lieblings", "lievelings")


def lower_tokens(text: str) -> list[str]:
    """Tokens, and a compound's noun beside it ("Lieblingsessen", "lievelingseten": "essen",
    "eten", so "food" finds them)."""
    tokens = tokenize(text.replace("\u2019", "'"))
    extra = [
        t[len(p) :]
        for t in tokens
        for p in FAVOURITE_PREFIXES
        if t.startswith(p) and len(t) > len(p) + 2
    ]
    return tokens + extra


def names(question: str) -> set[str]:
    """The names a question gives (capitalised words inside it that are no known word):
    "What does Jonas do?" → {"jonas"}, "Comment s'appelle la femme de Ben ?" → {"ben"}.
    German capitalises every noun: there, not a word after an article, a possessive or
    "welcher" ("meinen Kaffee"). A lowercase possessor counts too ("the admin's dog")."""
    lang = language(question)
    found: set[str] = set()
    for match in re.finditer(r"[^\W\d_][\w'-]*", question):
        word = match.group(0)
        before = question[: match.start()].rstrip()
        if not word[0].isupper() or not before or before[-1] in ".!?¿¡:;":
            continue
        base = word.split("'")[0].lower()
        if len(base) < 2 or base in _NOT_NAMES or base in QUESTION:
            continue  # "Ben" is a name, though "ben" is a Dutch verb
        if base in CONCEPT_OF or base in KIND_WORDS or (lang == "de" and base in _DE_FUNCTION):
            continue  # "Ihr Hund"; not "Wo wohnt Ben?" ("ben": a Dutch word, not a German one)
        previous = before.split()[-1].lower() if before.split() else ""
        if lang == "de" and (previous in _DE_DETERMINERS or len(base) > 8):
            continue  # "meinen Kaffee", "welcher Stadt": nouns; "des Admins": whose
        found.add(base)
    low = question.replace("\u2019", "'")
    if _ROLE.search(low.lower()):  # "Where does the admin live?", "das Hobby vom Admin"
        found.add("admin")
    for match in re.finditer(r"(\w+\s+)?\b([a-z]\w+)'s\b", low):  # "the admin's", not "my sister's"
        owner, whose = (match.group(1) or "").strip().lower(), match.group(2)
        plain = whose in QUESTION or whose in FUNCTION or whose in PRONOUNS  # "what's", "she's"
        if owner not in POSSESSIVES and whose not in CONCEPT_OF and whose not in _NOT_NAMES:
            found |= set() if plain else {whose}
    return found


_ROLE = re.compile(
    r"\b(?:the|der|den|dem|des|vom|beim|zum|le|l'|el|del|al|de|het|onze|our|unser\w*|notre)"
    r"\s*(?:admin|admins|administrator|administratorin|administrateur|administratrice|"
    r"administrador|administradora|beheerder)\b"
)
"""The peer's admin named by role, in the five languages: a person the room may ask about,
told of or not (``answering.ROLES``), whose facts get the same honesty as anyone's (#45: "The
admin's dog is named Jack", invented)."""

_DE_DETERMINERS = _set(
    "der die das den dem ein eine einen einem einer eines mein meine meinen meinem meiner "
    "meines dein deine deinen deinem sein seine seinen ihr ihre ihren unser unsere welche "
    "welcher welches welchen im am zum zur vom beim kein keine keinen"
)


@dataclass(frozen=True)
class Question:
    """What a question about a person asks: the names and possessed nouns the row must have,
    whether it is about the asker, and the text the row is chosen by (the previous question
    with it, for a follow-up)."""

    text: str
    subject: frozenset[str]
    names: frozenset[str]
    about_asker: bool
    follow_up: bool
    search: str
    by_words_only: bool = False
    """Answer only from a row whose words support it (a question naming a place or a thing,
    not asking anything of a person: "Any tips for a weekend in Lyon?")."""
    aliases: frozenset[str] = frozenset()
    """Names a row gives the subject ("My sister is called *Ada*"): a row about Ada is about
    the sister ("Ada lives in Porto" answers "And where does she live?")."""


_DE_FUNCTION = _DE_DETERMINERS | _set(
    "ist sind bin bist war hat habe hast haben und oder in an auf zu von mit für bei es er sie "
    "ihnen ich du dich dir mich mir uns euch sich nicht noch schon auch denn dann so etwas "
    "irgendetwas"
)
"""German's own function words: a capitalised one inside a question is no name ("Ihr")."""


def _own_subject(text: str) -> tuple[frozenset[str], frozenset[str]]:
    found = asked(text)
    subject = set(found.subject) | {
        s[len(p) :] for s in found.subject for p in FAVOURITE_PREFIXES if s.startswith(p)
    }  # "Lieblingsessen" is asked as itself and as "essen" (food)
    subject |= {  # "ma grand-mère" is asked as "grand-mère", not as "grand"
        c for c in HYPHENED.findall(text.lower()) if c in CONCEPT_OF and c.split("-")[0] in subject
    }
    return frozenset(subject), frozenset(names(text))


def read_question(text: str, previous: str = "") -> Question:
    """``text`` read as a question about a person, with the ``previous`` question of the
    same person in the room (its subject, when ``text`` has none and points back)."""
    subject, named = _own_subject(text)
    words = lower_tokens(text)
    points_back = bool(words) and (
        words[0] in FOLLOW_OPENINGS or any(w in PRONOUNS for w in words) or len(words) <= 3
    )
    pronoun = any(w in PRONOUNS for w in words)  # "What does *he* have of ours?"
    if previous and not subject and not named and points_back and (pronoun or not personal(text)):
        subject, named = _own_subject(previous)
        if subject or named:
            return Question(text, subject, named, False, True, f"{previous} {text}")
        return Question(text, subject, named, True, True, f"{previous} {text}")
    return Question(text, subject, named, not subject and not named, False, text)


def about_me(text: str) -> bool:
    """Whether a question is about the asker: ``words.personal``, or a first-person verb
    where the language drops the pronoun."""
    return personal(text) or any(w in FIRST_PERSON for w in lower_tokens(text))


def asks_about_someone(text: str) -> bool:
    """Whether a question asks about a named person (not the asker): "Where does Kees live?"."""
    return bool(names(text))


def concepts_of(words: Sequence[str]) -> set[int]:
    return {i for w in words for i in CONCEPT_OF.get(w, frozenset())}


HYPHENED = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)+")


_BEFORE_A_PLACE = _set(
    "in of for to from about at on near around à au aux de du des en a al el la le les los "
    "las der die das den dem von vom nach naar van uit het the une un ein eine een"
)
"""Words before a name that make it a place or a thing the question is about ("a weekend
in Lyon", "the capital of France"), not a person its verb asks about."""


def as_person(text: str, named: frozenset[str]) -> bool:
    """Whether a name of ``text`` is whom its verb asks about ("does *Léo* go", "¿Dónde
    estudia *Chloé*?"), not a place after a preposition ("a weekend in *Lyon*")."""
    said = lower_tokens(text)
    return any(
        i > 0 and said[i - 1] not in _BEFORE_A_PLACE for i, w in enumerate(said) if w in named
    )


DOING = _set(
    "do does did doing doet doe deed macht mache machst gemacht fait fais faire hace haces "
    "hizo hacer tun is ist est es"
)
"""What a question asks of someone when it asks what they do or who they are."""
_PERSONAL_CONCEPTS = (
    KNOWN
    | _NAMED
    | frozenset(i for w in ("old", "dog", "cat", "horse", "favourite") for i in CONCEPT_OF[w])
    | frozenset(i for w in RELATIONS for i in CONCEPT_OF.get(w, frozenset()))
)


def personal_attribute(text: str, named: frozenset[str]) -> bool:
    """Whether a question asks something of a person it names (their job, home, age, name,
    family, pets…, or anything of theirs: "Ben's", "de Ben", "von Ben"), not of a place or a
    thing ("What is the capital of France?")."""
    low = text.replace("\u2019", "'").lower()
    rest = [
        w
        for w in lower_tokens(text)
        if w not in FUNCTION and w not in QUESTION and w not in named and w not in DOING
    ]
    if not rest:
        return True  # "What does Kees do?", "Wat doet Kees?", "Who is Ben?"
    for name in named:
        if re.search(rf"\b{re.escape(name)}'s?\b|\b(?:de|von|van|del) {re.escape(name)}\b", low):
            return True
    tokens = set(lower_tokens(text))
    return bool(concepts_of(sorted(tokens)) & _PERSONAL_CONCEPTS) or bool(
        tokens & (AGE | frozenset(KIND_WORDS))
    )


__all__ = [
    "AGE",
    "DOING",
    "FAVOURITE_PREFIXES",
    "FOLLOW_OPENINGS",
    "HYPHENED",
    "NUMBER_WORDS",
    "PRONOUNS",
    "Question",
    "about_me",
    "as_person",
    "asks_about_someone",
    "concepts_of",
    "lower_tokens",
    "names",
    "personal_attribute",
    "read_question",
]

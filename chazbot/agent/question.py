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

from chazbot.agent.concepts import OWN_CONCEPTS
from chazbot.agent.grounding import (
    CONCEPT_OF,
    FAVOURITE,
    FIRST_PERSON,
    FUNCTION,
    HYPHENED,
    KIND_WORDS,
    KNOWN,
    NUMBER,
    POSSESSIVES,
    QUESTION,
    RELATIONS,
    asked,
    has_word,
    speaker_first,
)
from chazbot.agent.persons import RANKS, is_kin, person_word
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
NAME_WORDS = _set(
    "name names named called call heißt heisst heißen nom prénom appelle appellent nombre "
    "llama llaman heet heten naam"
)


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
    for match in re.finditer(r"[^\W\d_][\w'-]*", question.replace("\u2019", "'")):
        word, start = match.group(0), match.start()
        elided = _ELIDED.match(word)  # "le métier *d'Iker*", "l'Oksana"
        if elided:
            word, start = word[elided.end() :], start + elided.end()
        before = question[:start].rstrip()
        if not word[0].isupper() or not before or before[-1] in ".!?¿¡:;":
            continue
        base = word.split("'")[0].lower()
        if len(base) < 2 or base in _NOT_NAMES or base in QUESTION:
            continue  # "Ben" is a name, though "ben" is a Dutch verb
        if (
            base in CONCEPT_OF
            or base in KIND_WORDS
            or person_word(base) is not None  # "Wo wohnt Mama?", "Omas Garten"
            or (lang == "de" and base in _DE_FUNCTION)
        ):
            continue  # "Ihr Hund"; not "Wo wohnt Ben?" ("ben": a Dutch word, not a German one)
        previous = before.split()[-1].lower() if before.split() else ""
        if lang == "de" and (previous in _DE_DETERMINERS or len(base) > 8):
            continue  # "meinen Kaffee", "welcher Stadt": nouns; "des Admins": whose
        if _after_determiner(before, lang):
            continue  # "meine neue Wohnung", "im Schrebergarten" (read as English: "was", "an")
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


def _after_determiner(before: str, lang: str) -> bool:
    """Whether the words before a capitalised word are a German article or possessive and at
    most two lowercase adjectives ("meine *neue* Wohnung", "im Schrebergarten"): a noun, not
    a name. Outside German-read text only the determiners no other of the five languages
    writes ("im", "meine", "unserem"…): the language of a short question is often misread."""
    run = before.split()[-3:]
    for word in reversed(run):
        plain = word.strip(",;:\"'()").lower()
        if plain in (_DE_DETERMINERS if lang == "de" else _DE_ONLY):
            return True
        if not plain.isalpha() or not plain.islower() or not word[:1].islower():
            return False
    return False


_ELIDED = re.compile(r"(?:[dlsjnmtc]|qu)'(?=[^\W\d_])", re.IGNORECASE)
"""French elision before a name ("d'Iker", "l'Oksana", "qu'Anna")."""

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
_DE_ONLY = _DE_DETERMINERS - _set("der die das den am sein ihr welche")
"""German determiners no other of the five languages writes as a word of its own."""


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
    attributes: frozenset[str] = frozenset()
    """Possessed nouns that are the asker's own attributes, not someone ("Was ist mein *Job*?",
    "how is my *eyesight*", "mein *Arbeitsweg*"): the question is about the asker, and these
    are what it asks of them (``someone``)."""


_DE_FUNCTION = _DE_DETERMINERS | _set(
    "ist sind bin bist war hat habe hast haben und oder in an auf zu von mit für bei es er sie "
    "ihnen ich du dich dir mich mir uns euch sich nicht noch schon auch denn dann so etwas "
    "irgendetwas"
)
"""German's own function words: a capitalised one inside a question is no name ("Ihr")."""


def _own_subject(text: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """Whom ``text`` asks about: the possessed nouns that are someone, the names it gives, and
    the possessed nouns that are the asker's own attributes (``someone``)."""
    found = asked(text)
    subject = set(found.subject) | {
        s[len(p) :] for s in found.subject for p in FAVOURITE_PREFIXES if s.startswith(p)
    }  # "Lieblingsessen" is asked as itself and as "essen" (food)
    for whole in HYPHENED.findall(text.lower()):  # "ma *grand-mère*", "my *brother-in-law*"
        parts = set(whole.split("-"))
        if parts & subject and (whole in CONCEPT_OF or person_word(whole) is not None):
            subject = (subject - parts) | {whole}
    named = frozenset(names(text))
    people = {s for s in subject if person_word(s) is not None or s in RANKS}
    kin = unowned_kin(text) if not people else frozenset()
    if not kin:  # "the *neighbour* who waters our plants": her name is asked, not theirs
        people |= {s for s in subject if someone(s, text)}
    # "Wo wohnt der Opa?", "What's the name of the neighbour who waters our plants?"
    return frozenset(people | kin), named, frozenset(subject - people)


_DOES_ONES = _set(
    "lives works plays studies teaches speaks wohnt lebt arbeitet spielt studiert unterrichtet "
    "spricht habite vit travaille joue étudie enseigne parle vive trabaja juega estudia "
    "enseña habla woont werkt speelt studeert spreekt"
)
_ONE_DOES = _set("live work play study teach speak")
_AUXILIARY = _set("does did")
"""What only someone does ("where *does* my *physio* *live*?", "Wo *arbeitet* mein Coach?"):
a possessed noun that does it is someone, whatever the word ("my line of work" is not)."""


def someone(noun: str, text: str) -> bool:
    """Whether the possessed ``noun`` of the question ``text`` is someone, not an attribute of
    the asker: a person's or an animal's word (``persons``, in any of its forms), a relative's
    compound, or the question asks of it what one asks of someone (its name, its age, "'s",
    or a verb only someone does). "Was ist mein *Job*?", "how is my *eyesight*?", "mein
    *Arbeitsweg*", "mi *plato* favorito" are the asker's own."""
    if person_word(noun) is not None or noun in RANKS:
        return True
    words = lower_tokens(text)
    if set(words) & (NAME_WORDS | AGE):
        return True  # "What is my boat called?", "How old is my car?": the old reading holds
    said = re.findall(r"[^\W\d_]+", text.lower())  # "does" is a stopword of ``tokenize``
    if set(said) & _DOES_ONES:
        return True  # "Wo *arbeitet* mein Physio?"
    return bool(set(said) & _AUXILIARY and set(said) & _ONE_DOES) or _apostrophe_s(noun, text)


def _apostrophe_s(noun: str, text: str) -> bool:
    low = text.replace("\u2019", "'").lower()
    return re.search(rf"\b{re.escape(noun)}'s\b", low) is not None  # "my physio's address"


def unnamed_attribute(q: Question) -> bool:
    """Whether a row may tell the asker's attribute that ``q`` asks without naming it: one of
    the person's own (a job, a home, a birth…: "Bin seit Oktober Bauleiterin" for "Was ist
    mein *Job*?"), or anything asked plainly ("how is my *eyesight*?" beside "je suis
    daltonienne"); not a favourite, a number or a kind, which a row that answers names
    ("mon *livre* préféré", "mi número de *zapato*", "welche Farbe hat mein *Fahrrad*")."""
    if concepts_of(sorted(q.attributes)) & OWN_CONCEPTS:
        return True
    said = lower_tokens(q.text)
    favourite = any(w in FAVOURITE or w.startswith(FAVOURITE_PREFIXES) for w in said)
    return not favourite and not set(said) & NUMBER and asked(q.text).kind is None


_WITH = _set("with mit avec con met")


def companion_only(said: str, subject: frozenset[str]) -> bool:
    """Whether a row its teller tells of themselves names whom ``subject`` asks about only as
    company ("*Juego* al pádel *con* mis amigas", "I go running *with* my sister"): it says
    what the teller does, nothing of them."""
    if not speaker_first(said):
        return False
    tokens = re.findall(r"[^\W\d_]+", said.replace("\u2019", "'").lower())
    wanted = sorted(subject)
    hits = [i for i, t in enumerate(tokens) if has_word([t], wanted)]
    return bool(hits) and all(set(tokens[max(0, i - 3) : i]) & _WITH for i in hits)


_DEFINITE = _set("the der die das den dem des le la les l el los las lo de het 't")
_POSSESSOR_AFTER = _set("of de du des von vom van del")


def unowned_kin(text: str) -> frozenset[str]:
    """Relatives and people of the asker's named without a possessive, as families speak:
    after a definite article or alone as a name ("Wo wohnt *der Opa*?", "What does *the
    neighbour* do?", "Où travaille *Maman* ?"); not one whose possessor follows ("la femme
    *de Ben*", "the mother *of* Jesus"), nor "a grandmother" (anyone's)."""
    said = text.replace("\u2019", "'")
    found: set[str] = set()
    matches = list(re.finditer(r"[^\W\d_][\w'-]*", said))
    for i, match in enumerate(matches):
        word = match.group(0)
        elided = _ELIDED.match(word)
        if elided:
            word = word[elided.end() :]
        if word.lower().endswith("'s"):
            continue  # "Mother's Day"
        base = word.lower()
        if person_word(base) is None:
            continue
        before = matches[i - 1].group(0).lower() if i else ""
        after = matches[i + 1].group(0).lower() if i + 1 < len(matches) else ""
        if after in _POSSESSOR_AFTER:
            continue
        if elided or before in _DEFINITE or (i and word[0].isupper() and is_kin(base)):
            found.add(base)
    return frozenset(found)


def read_question(text: str, previous: str = "") -> Question:
    """``text`` read as a question about a person, with the ``previous`` question of the
    same person in the room (its subject, when ``text`` has none and points back)."""
    subject, named, attributes = _own_subject(text)
    words = lower_tokens(text)
    points_back = bool(words) and (
        words[0] in FOLLOW_OPENINGS or any(w in PRONOUNS for w in words) or len(words) <= 3
    )
    pronoun = any(w in PRONOUNS for w in words)  # "What does *he* have of ours?"
    if previous and not subject and not named and points_back and (pronoun or not personal(text)):
        subject, named, earlier = _own_subject(previous)
        search = f"{previous} {text}"
        if subject or named:
            return Question(text, subject, named, False, True, search)
        return Question(text, subject, named, True, True, search, attributes=attributes | earlier)
    about = not subject and not named
    return Question(text, subject, named, about, False, text, attributes=attributes)


def about_me(text: str) -> bool:
    """Whether a question is about the asker: ``words.personal``, a first-person verb
    where the language drops the pronoun, or one of the asker's people named as families
    do ("Wo wohnt der Opa?": ``unowned_kin``)."""
    return (
        personal(text)
        or any(w in FIRST_PERSON for w in lower_tokens(text))
        or bool(unowned_kin(text))
    )


def asks_about_someone(text: str) -> bool:
    """Whether a question asks about a named person (not the asker): "Where does Kees live?"."""
    return bool(names(text))


def concepts_of(words: Sequence[str]) -> set[int]:
    return {i for w in words for i in CONCEPT_OF.get(w, frozenset())}


def whole_relatives(words: list[str], text: str) -> list[str]:
    """``words`` (``text``'s tokens) with a relative's hyphened word whole: "Ma *belle-sœur*
    Chloé …" is about a sister-in-law, not a "sœur"; "mi *medio-hermano*"."""
    out = list(words)
    for whole in HYPHENED.findall(text.replace("\u2019", "'").lower()):
        if person_word(whole) is None:
            continue
        for part in whole.split("-"):
            if part in out:
                out.remove(part)
        out.append(whole)
    return out


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
    "companion_only",
    "concepts_of",
    "lower_tokens",
    "names",
    "personal_attribute",
    "read_question",
    "someone",
    "unnamed_attribute",
    "unowned_kin",
    "whole_relatives",
]

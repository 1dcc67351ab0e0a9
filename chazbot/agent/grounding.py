"""Answers about the person must stand on what they said (#36), checked after the model answers.

A small model asked "What is my son's name?" with "My daughter is called Lina" recalled
answered "Lina's son's name is Lina."; asked "Where was my wife born?" beside "My wife is
called Sofia", it answered "Sofia was born in Bulgaria". Whatever the model, a reply to a
question about the person is kept only when a row shown to the model supports it:

1. **subject**: the row is about what the question asks about: the thing the person's
   possessive names ("my *son*'s name", "mein *Hund*", "ma *fille*"); a row that names its
   own subject ("My daughter …", "Our landlord's …") must name that one. A question without a
   possessive ("Where was I born?") is about the person, and a row about someone or something
   else of theirs ("My daughter plays the piano") does not answer it.
2. **predicate**: the row has what is asked of the subject: every content word of the question
   beyond the subject, question and function words ("where does my sister *live*", "how *old*
   is my son", "my son's *teacher*"). Relations are predicates too: "my son" is not "my
   daughter". The word after "which"/"what" ("which *school*", "what *car*") names the kind of
   answer: the row need not have it (its value is the school), but when it has it, that carries
   the predicate ("My car is a red Skoda" answers "What car do I drive?"); a row that only
   names its subject ("My daughter is called Ella") answers only for a name; and a row whose
   value is of another known kind (a trumpet for "which *sport*") does not answer.
3. **value**: the reply's own words (what it adds to the question) come from a supporting row:
   at least one of them is in it, and every number and every name (a word capitalised inside
   a sentence: "Harvard") the reply adds is in one.

Words match as forms of one another ("allergic"/"allergy", "live"/"lives") or through
``CONCEPTS``, small groups of words that ask the same thing in the five languages of
``lexicon`` ("job", "works", "for a living", "Beruf", "métier"…; "son", "Sohn", "fils"…).
Otherwise the reply becomes "I don't know" (``asked.DONT_KNOW``). Pure: tokens and sets, no
embedder, so it holds the same for every embedder configuration (hashed or none included).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache

from chazbot.agent.concepts import (
    AGE_WORDS,
    ATTRIBUTE,
    CONCEPT_OF,
    CONCEPTS,
    FAVOURITE,
    FUNCTION,
    GENERIC,
    KIND_ASKERS,
    KIND_WORDS,
    KINDS,
    NAME,
    NUMBER,
    OWN_CONCEPTS,
    PLAIN,
    POSSESSIVES,
    QUESTION,
    RELATIONS,
    WHO,
)
from chazbot.agent.lexicon import ES
from chazbot.agent.persons import RANKS, person_word
from chazbot.agent.words import language, personal
from chazbot.memory.rows import MemoryRow, said_text
from chazbot.memory.tokenize import tokenize


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


_CONCEPT_OF = CONCEPT_OF
_OWN_CONCEPTS = OWN_CONCEPTS
_JOB_NOUN = re.compile(
    r"(?:er|ist|iste|ista|ero|era|eur|euse|ier|ière|(?<![aeiouäöüy])in|kapitän|arzt|ärztin|chauffeur|"
    r"captain|nurse|chef|koch|cook|pilot|driver|nanny|mann)$"
)


_KIN_ENDS = tuple(sorted(r for r in RELATIONS if len(r) > 3 and not r.endswith(("man", "mann"))))
"""A word ending in a relative's ("stepdaughter", "Großmutter", "schoonmoeder") is no job;
"-mann" ends jobs too ("Bergmann", "Kaufmann")."""
_PLACE_BEFORE = _set("in im aus from à en uit nach naar to")
"""A word right after one of these is a place ("in Dublin", "à Berlin"), never a job."""


def job_nouns(words: Iterable[str]) -> list[str]:
    """Words that may name a job ("carpenter", "Elektriker", "dentista", "infirmière",
    "buschauffeur"): a job is told as what someone *is*, without a word for "job"; not a
    place that ends like one ("lives in Dublin")."""
    tokens = list(words)
    spanish = language(" ".join(tokens)) == "es"  # "Salgo a *correr*": a verb, not a job
    return [
        w
        for i, w in enumerate(tokens)
        if len(w) > 3
        and not (spanish and w.endswith(("er", "ar", "ir")))
        and w not in RELATIONS
        and w not in POSSESSIVES  # "mein"
        and not w.endswith(_KIN_ENDS)  # "stepdaughter", "Großmutter"
        and _JOB_NOUN.search(w)
        and (i == 0 or tokens[i - 1] not in _PLACE_BEFORE)
    ]


_JOB_CONCEPT = _set(
    "job jobs work works working worked living profession occupation career beruf arbeit "
    "arbeitet arbeite métier travail travaille trabajo trabaja trabajas baan werk werkt "
    "beroep beruflich dedica dedicas macht mache machst gemacht hace haces fait fais doet doe"
)


STEM = 4
"""Two words are forms of one when they share their first ``STEM`` letters and one is the
other's start, or they differ only in their last three letters ("allergic"/"allergy")."""


@lru_cache(maxsize=8192)
def concept_ids(word: str) -> frozenset[int]:
    """The concepts ``word`` is a word of: its own, or, for someone's word in another form,
    its table word's ("Nachbarinnen", "broertje", "Lieblingstante": ``persons.person_word``)."""
    found = _CONCEPT_OF.get(word)
    if found is not None:
        return found
    person = person_word(word)
    return _CONCEPT_OF.get(person, frozenset()) if person is not None else frozenset()


def _same(a: str, b: str) -> bool:
    if a == b:
        return True
    of_a, of_b = concept_ids(a), concept_ids(b)
    if of_a & of_b:
        return True
    if of_a and of_b:
        return False  # words of two known concepts: "grandad" is no "grandmother"
    if person_word(a) is not None and person_word(b) is not None:
        return False  # "stepdad"/"stepdaughter": a stem is no relative
    if len(a) < STEM or len(b) < STEM or a[:STEM] != b[:STEM]:
        return False
    short, long = sorted((a, b), key=len)
    if long.startswith(short):
        return True
    # "allergic"/"allergy"; not "fahre"/"fahrrad": the shared start must be a stem itself
    return len(short) - 3 >= STEM and short[:-3] == long[: len(short) - 3]


def _has(words: Iterable[str], wanted: Iterable[str]) -> bool:
    wanted = list(wanted)
    return any(_same(w, s) for w in words for s in wanted)


def _content(text: str) -> list[str]:
    return [t for t in tokenize(text) if t not in FUNCTION and t not in QUESTION and len(t) > 1]


def _owned(text: str) -> list[tuple[str, str | None]]:
    """(subject, what of it) for each possessive: "my son's name" -> ("son", "name"), "my
    son go to" -> ("son", None); "what of it" only through an "'s" ("my wife's job")."""
    lowered = text.replace("\u2019", "'").lower()
    tokens = tokenize(lowered)
    # "<word>'s <what>", the first of each word, read in one pass: a search of the whole
    # text for each possessive was quadratic (a 16 KiB row of "my son is my son …" held
    # the loop 9.8 s in the answer check)
    whats: dict[str, str] = {}
    for m in _APOSTROPHE_S.finditer(lowered):
        whats.setdefault(m.group(1), m.group(2))
    found: list[tuple[str, str | None]] = []
    spanish = "¿" in text or "¡" in text
    wholes = {  # "ma *belle-sœur*", "my *in-laws*": the whole, not "belle", "laws"
        part: w
        for w in HYPHENED.findall(lowered)
        if person_word(w) is not None
        for part in w.split("-")
    }
    for i, tok in enumerate(tokens):
        if tok not in POSSESSIVES or (tok == "nos" and spanish):
            continue  # "¿Quién *nos* riega las plantas?": Spanish "nos" is "us", owns nothing
        rest = [t for t in tokens[i + 1 : i + 6] if t not in FUNCTION or t in ATTRIBUTE]
        nouns = [t for t in rest if t not in ATTRIBUTE and t not in POSSESSIVES and t not in RANKS]
        # "my *little* brother", "mi hermano mayor", "mijn kleine broertje": the person
        nouns = [t for t in nouns[:3] if person_word(wholes.get(t, t))][:1] or nouns
        # "my PIN"; "my *youngest*" alone is a child ("my oldest friend": the friend)
        nouns = nouns or [t for t in rest if t in NAME or t in NUMBER or t in RANKS][:1]
        if nouns:
            found.append((wholes.get(nouns[0], nouns[0]), whats.get(nouns[0])))
    return found


HYPHENED = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)+")
"""A hyphened word ("grand-mère", "brother-in-law", "WLAN-Passwort")."""


_APOSTROPHE_S = re.compile(r"(?<!\w)(\w+)'s\s+(?=(\w+))")


@dataclass(frozen=True)
class Asked:
    """What a question asks: about whom or what (``subject``, empty: the person), the words a
    supporting row must have (``predicate``), the kind of answer (``kind``, "which *school*"),
    and whether it asks for a name."""

    subject: frozenset[str]
    predicate: tuple[str, ...]
    kind: str | None
    naming: bool
    what: tuple[str, ...]  # "my wife's *job*": asked through an "'s"


def _kind_word(tokens: list[str]) -> str | None:
    """The word right after "which"/"what" ("which *school*", "what *car*"), if it is one."""
    for i, tok in enumerate(tokens[:-1]):
        nxt = tokens[i + 1]
        if tok in KIND_ASKERS and nxt not in FUNCTION | QUESTION | AGE_WORDS:
            return nxt
    return None


def asked(question: str) -> Asked:
    """Parse ``question`` (see the module doc)."""
    tokens = tokenize(question.replace("\u2019", "'"))
    owned = _owned(question)
    subject = frozenset(s for s, _ in owned)
    kind = _kind_word(tokens)
    content = [t for t in _content(question) if t not in POSSESSIVES and t not in GENERIC]
    naming = any(t in NAME for t in tokens) or any(t in WHO for t in tokens)
    predicate = tuple(
        t
        for t in dict.fromkeys(content)
        if t != kind
        and not _has([t], subject)
        and t not in NAME
        and t not in NUMBER
        and t not in PLAIN
    )
    what = tuple(w for _, w in owned if w is not None)
    return Asked(subject, predicate, kind, naming, what)


def subject(question: str) -> set[str]:
    """The words naming what ``question`` asks about: its possessive's noun, or without one
    its content words."""
    found = asked(question)
    if found.subject:
        return set(found.subject)
    return set(found.predicate) | ({found.kind} if found.kind else set())


def evidence(row: MemoryRow) -> str:
    """What a shown row says, as the check reads it: its key's words (no numbers: captured
    keys hold dates and ids) and its value without the "who (date): " captured rows start with."""
    key = " ".join(t for t in tokenize(row.key) if not t.isdigit())
    return f"{key} {said_text(row.value)}"


def _names_only(words: list[str], q: Asked) -> bool:
    """A row that names its subject and says nothing else of it ("My daughter is called Ella")."""
    if not any(w in NAME for w in words):
        return False
    return not any(_has(words, [p]) for p in q.predicate)


def _other_kind(kind: str | None, words: list[str]) -> bool:
    """Whether the row's value is of a known kind other than the one asked ("which *sport*"
    beside "I play the trumpet"; "which *school*" beside "Léo fait du judo": a sport is no
    school). A row that has the asked kind's own word ("my *car* is a Volvo") is not."""
    if kind is None or kind in GENERIC or _has(words, [kind]):
        return False
    asked_kind = KIND_WORDS.get(kind)
    theirs = {k for k, members in KINDS.items() for w in words if w in members}
    return bool(theirs) and asked_kind not in theirs


_PLACE = re.compile(
    r"\b(?:" + "|".join(sorted(_PLACE_BEFORE)) + r")\s+(?:(?:the|de|la|el|den|der)\s+)?"
    r"[A-ZÀ-Ý][\w'-]+"
)
"""A place named in a row: a capitalised word after "in", "à", "nach", "en"… ("bought a tiny
house *in Hoorn*", "viven *en Cádiz*")."""


def _of_kind(kind: str | None, words: list[str], raw: str = "") -> bool:
    """Whether the row holds a value of the kind asked ("which *sport*" beside "juego al
    pádel", "quel *jour*" beside "le mercredi", "welke *plaats*" beside "in Hoorn"): it
    answers without the question's verb."""
    asked_kind = KIND_WORDS.get(kind or "")
    if asked_kind is None:
        return False
    if asked_kind not in KINDS:  # a place: no list, a name after "in", "à"… (``_PLACE``)
        return _PLACE.search(raw) is not None
    return any(w in KINDS[asked_kind] for w in words)


def other_kind(question: str, row: str) -> bool:
    """``_other_kind`` of a question's "which *kind*" and a row's words."""
    kind = _kind_word(tokenize(question.replace("\u2019", "'")))
    return _other_kind(kind, tokenize(row.replace("\u2019", "'")))


def lacks_kind(question: str, row: str) -> bool:
    """Whether a question asks "which *kind*" and the row has neither that word (in a form
    or language ``CONCEPTS`` knows) nor a value of that kind: a row found by meaning alone
    then answers something else ("Which bank am I with?" beside "Nací en Bilbao")."""
    kind = _kind_word(tokenize(question.replace("\u2019", "'")))
    if kind is None or kind in GENERIC:
        return False
    words = tokenize(row.replace("\u2019", "'"))
    return not _has(words, [kind]) and not _of_kind(kind, words, row)


def gives_name(text: str, subject: Iterable[str]) -> bool:
    """Whether a row names one of ``subject`` without a word for "name": a capitalised word
    right after it ("Mijn man *Pieter* werkt als buschauffeur", "My partner *Jonas*")."""
    wanted = sorted(subject)
    if not wanted:
        return False
    said = text.replace("\u2019", "'").split()
    for i, word in enumerate(said[:-1]):
        plain = word.strip(".,;:!?\"'()").lower()
        nxt = said[i + 1].strip(".,;:!?\"'()")
        if plain and nxt[:1].isupper() and _has([plain], wanted):
            return True
    return False


def supports(text: str, question: str) -> bool:
    """Whether ``text`` (a row, a tool's answer) is about what ``question`` asks: its
    subject, its predicate and, for "which *kind*", a value of that kind (the module doc)."""
    return _supports(text, question, asked(question))


def _about_the_person(q: Asked) -> bool:
    """Whether ``q`` asks about the person themselves ("Where do I live?", "Was ist mein
    Beruf?"), not about someone or something of theirs ("my son", "my dentist")."""
    return all(_CONCEPT_OF.get(s, frozenset()) & _OWN_CONCEPTS for s in q.subject)


FIRST_PERSON = frozenset(ES.opens) | _set(
    "bin hab "  # German drops "ich" too: "*Bin* seit Oktober Bauleiterin"
    "practico hablo hago estudié estudio nací entreno odio trabajé viví crecí tuve fui "
    "toco escribo cocino salgo corro nado camino bebo leo canto bailo conduzco voy llevo "
    "prefiero necesito uso tomo escucho veo"
)
"""Spanish tells its speaker by the verb alone ("*Estudié* historia", "¿Qué coche *tengo*?")."""


_I = _set("i i'm ich je j j' ik yo we wir nous nosotros wij")


def speaker_first(said: str) -> bool:
    """Whether the teller is the sentence's subject before any possessive ("Los sábados
    *juego* al pádel con mis amigas", "*I* drink my coffee black")."""
    # every word, stopwords too ("I", "ich", "je" are stopwords of ``tokenize``)
    for token in re.findall(r"[^\W\d_]+", said.replace("\u2019", "'").lower()):
        if token in POSSESSIVES:
            return False
        if token in _I or token in FIRST_PERSON:
            return True
    return False


def _someone_else(text: str) -> bool:
    """Whether a row (``evidence``) tells of someone it names, not of the person who said it:
    "Raj lives in Leicester", "Kees werkt als bakker". The row has no first-person word (nor,
    in Spanish, a first-person verb: "Vivo en…") and its first capitalised word is a name,
    not the speaker's own (a fact row written in the third person, "Alice works as a nurse",
    has the speaker in its key: "alice example org job")."""
    said = text.replace("\u2019", "'")
    if personal(said):
        return False
    raw = said.split()
    for i, word in enumerate(raw):
        if not word[:1].isupper():
            continue
        name = word.strip(".,;:!?\"'()").lower()
        if i == len(raw) - 1 or name.endswith("'s") or name in FIRST_PERSON:
            return False
        keyed = {w.lower() for w in raw[:i]}
        return name not in keyed and name not in FUNCTION and name not in POSSESSIVES
    return False


KNOWN = frozenset(
    i
    for word in ("live", "job", "born", "birthday", "car", "phone", "email", "address")
    for i in _CONCEPT_OF[word]
)
"""Attributes a question may ask that a row tells in words of their own: a row telling one of
them answers no question for another."""


def _another_attribute(words: list[str], question: str) -> bool:
    """Whether the row tells a known attribute other than the one asked ("What is Sam's
    job?" beside "Sam lives in Dublin"); a job may be told as what someone is ("… und ist
    Fährkapitän")."""
    asked_of = {i for w in tokenize(question) for i in _CONCEPT_OF.get(w, ())} & KNOWN
    have = {i for w in words for i in _CONCEPT_OF.get(w, ())} & KNOWN
    if not asked_of or not have or asked_of & have:
        return False
    return not (asked_of & _CONCEPT_OF["job"] and job_nouns(words))


_TOWARDS = _set(
    "to naar zur zum nach au à al a before after antes después avant après vor voor na del "
    "du at op bei"
)
"""A job's word after one of these is a place or a time ("the train *to work*", "naar mijn
werk", "antes del trabajo", "after work", "op het werk"), not what one does for a living
("*for* a living", "*als* Lehrer", "*von* Beruf" are)."""


PLACES = _set(
    "where wo wohin woher où dónde donde waar city town place village country stadt ort "
    "dorf land ville endroit pays ciudad pueblo lugar país stad plaats dorp"
)


def asks_place(question: str) -> bool:
    """Whether a question asks where, or the way somewhere ("In which *city* do I work?",
    "Hoe ga ik *naar mijn werk*?"): then a row's "naar mijn werk" is what it asks."""
    said = re.findall(r"[^\W\d_]+", question.replace("\u2019", "'").lower())
    if set(said) & PLACES:
        return True
    tokens = tokenize(question.replace("\u2019", "'"))
    return len(commute(tokens)) < len(tokens)


def commute(words: list[str], question: str = "") -> list[str]:
    """``words`` without a job's word that names where one goes ("Ik neem de trein naar mijn
    *werk*" says nothing of what the person does), unless ``question`` asks a place or the
    way there (``asks_place``: "In which city do I work?" is answered by that row)."""
    if question and asks_place(question):
        return words
    job = _CONCEPT_OF["job"]
    return [
        w
        for i, w in enumerate(words)
        if not (
            _CONCEPT_OF.get(w, frozenset()) & job
            and any(t in _TOWARDS for t in words[max(0, i - 2) : i])
        )
    ]


def _supports(text: str, question: str, q: Asked) -> bool:
    words = commute(tokenize(text.replace("\u2019", "'")), question.replace("\u2019", "'"))
    if _another_attribute(words, question.replace("\u2019", "'")):
        return False
    if _about_the_person(q) and _someone_else(text):
        return False  # "Raj lives in Leicester" does not say where *I* live
    if q.subject and not _has(words, q.subject):
        return False
    owners = {s for s, _ in _owned(text)}
    if owners and q.subject and not _has(owners, q.subject):
        return False  # "our landlord's phone number" is not about "my phone"
    if owners and not q.subject and not speaker_first(text):
        mentioned = [t for t in tokenize(question) if t not in FUNCTION]
        named = {t for t in tokenize(" ".join(_names(question))) if t in words}
        if not _has(owners, mentioned) and not named:
            return False  # "my daughter plays …" does not say what *I* play; "my friend
            # Sam lives in Dublin" does say where *Sam* lives
    names_it = any(w in NAME for w in words) or gives_name(text, q.subject)
    for what in q.what:
        if what in NAME and not names_it:
            return False
        if what in NUMBER and not any(w in NUMBER or w.isdigit() for w in words):
            return False
    if q.naming and not q.subject and not q.predicate and not q.kind:
        return names_it
    said = set(tokenize(question))
    if said & NAME and not said & WHO and not names_it:
        return False  # "what is my cat called?" needs a row that names it
    if said & NAME and q.subject and not q.predicate and gives_name(text, q.subject):
        return True  # "En hoe heet hij? (my man)" beside "Mijn man Pieter werkt als …"
    # (a place named is no answer by itself: "In which city did I get married?" is not
    # "I was born in London"; ``lacks_kind`` reads it)
    if q.kind is not None and (_has(words, [q.kind]) or _of_kind(q.kind, words)):
        return True  # "My car is a red Skoda" for "What car do I drive?"; "juego al pádel"
    whom = _names(question)  # "Which school do *Nora* and *Liv* go to?": whom, not what
    asks_more = [p for p in q.predicate if p not in whom]
    if q.kind is not None and q.kind not in GENERIC and not asks_more and not q.subject:
        return False  # "Which bank am I with?": the kind is all it asks, the row has none
    if job_nouns(words):  # "What did my father do for work?" beside "… war Elektriker"
        q = replace(q, predicate=tuple(p for p in q.predicate if p not in _JOB_CONCEPT))
    if not all(_has(words, [p]) for p in q.predicate):
        return False
    if q.kind is not None and not q.naming and _names_only(words, q):
        return False  # "My daughter is called Ella" says nothing of her school
    return not _other_kind(q.kind, words)


def equivalents(question: str) -> list[str]:
    """The words of ``CONCEPTS`` that name what ``question`` asks about (``subject``: "my
    *dentist*", "mein *Beruf*"), in the five languages, beyond the question's words: recall
    needs them to show the row the check would accept ("What is my dentist's name?" beside
    "Mein Zahnarzt heißt Dr. Keller": no word in common, and the embedder's vector alone fell
    below the floor). Attribute words (names, numbers, favourites) are left out: every row
    has one."""
    tokens = tokenize(question.replace("\u2019", "'"))
    generic = {i for i, words in enumerate(CONCEPTS) if words in (NAME, NUMBER, FAVOURITE)}
    found: list[str] = []
    for token in sorted(subject(question)):
        for i in sorted(_CONCEPT_OF.get(token, frozenset()) - generic):
            found += [w for w in sorted(CONCEPTS[i]) if w not in tokens]
    return list(dict.fromkeys(found))


def grounded(question: str, reply: str, shown: Iterable[str], named: Iterable[str] = ()) -> bool:
    """Whether ``reply`` to ``question`` stands on what the model was shown (``evidence``
    of recalled rows, the answers of its ``recall`` calls): see the module doc. Every
    number in the reply must be in what it stands on (ages, codes and dates are what small
    models invent). ``named``: the people the question names (``answering.names``): a line
    that does not name them is not about them."""
    q = asked(question)
    pieces = [line for text in shown for line in text.splitlines() if line.strip()]
    whom = sorted(named)  # "What does Ben do?": only a line that names Ben is about him
    about = [  # a recall answer: a row a line
        t for t in pieces if _supports(t, question, q) and all(_has(tokenize(t), [n]) for n in whom)
    ]
    return bool(about) and stands_on(question, reply, about)


def stands_on(question: str, reply: str, about: Iterable[str]) -> bool:
    """Whether every piece of ``reply`` that carries a fact stands on one of the rows
    ``about`` (their ``evidence``) by its words: ``unsupported`` is empty (the module doc,
    3). The answer check asks it of the rows that support the question by their words, of
    the row chosen by meaning (``answering.chosen_row``) and of the shown rows about whom
    the question asks (``about_whom``)."""
    return not unsupported(question, reply, list(about))


FILLER = _set(
    # the listener, in the five languages ("*your* brother", "*dein* Bruder", "*ta* sœur")
    "you your yours yourself du dein deine deinen deinem deiner deines dich dir tu ton ta tes "
    "toi te vous votre vos tú tu tus te ti usted su sus jij je jou jouw jullie uw "
    # when a claim holds, in the five languages ("now", "these days")
    "now currently nowadays jetzt zurzeit derzeit inzwischen maintenant actuellement "
    "désormais ahora actualmente nu momenteel tegenwoordig inmiddels "
    # en: hedges, attribution, the frame of an answer
    "think thought believe believes guess suppose recall remember remembered remembering "
    "mention mentioned mentions told tell telling said say says saying according based going "
    "let sure seems seem seemed apparently memory memories correctly correct right far know "
    "knew noted note recorded see looks answer would could might probably perhaps maybe "
    "yes yeah well okay ok course actually indeed if unless mistaken wrong "
    # de
    "glaube glaub denke meine meinst vermute erinnere erinnern erinnert erinnerung erzählt "
    "erzähltest erzählst gesagt sagtest sagst erwähnt erwähntest laut soweit richtig wohl "
    "anscheinend offenbar gespeichert notiert dass also ja jedenfalls klar "
    "vielleicht wahrscheinlich genau wenn falls mal weiß weißt wüsste irre täusche "
    # fr
    "crois pense suppose souviens souvient rappelle rappelles dit dis dites mentionné "
    "raconté racontes racontais d'après après selon bien semble semblerait apparemment "
    "mémoire noté trompe que qu oui voilà effectivement sûr sûre peut-être probablement "
    "si sais sache "
    # es
    "creo pienso supongo recuerdo recuerda acuerdo dijiste dices contaste cuentas "
    "mencionaste según parece aparentemente memoria entiendo entendido equivoco sí pues "
    "claro quizás quizá probablemente seguro si mal sé sabes "
    # nl
    "denk geloof vermoed herinner herinneren herinnering zei zegt zeg vertelde vertelt "
    "verteld gezegd noemde genoemd volgens lijkt blijkbaar goed wel toch zeker misschien "
    "waarschijnlijk ja inderdaad als weet vergis vergist vergissen niet "
)
"""Words that carry no fact of the person: hedges and attribution ("I believe", "you told
me", "si je me souviens bien", "según lo que me contaste", "als ik me goed herinner").
What is left of a reply's own words is what it claims."""


def value_words(question: str, text: str) -> list[str]:
    """The words of ``text`` (a reply, or a clause of one) that claim something beyond
    ``question``: not its words (nor their forms or concepts), no function, question,
    possessive or filler word."""
    asked_words = set(tokenize(question))
    return [
        t
        for t in dict.fromkeys(_content(text))
        if t not in asked_words
        and t not in FILLER
        and t not in POSSESSIVES
        and not _has([t], asked_words)
    ]


_CLAUSE = re.compile(r"[.!?;:\n—–]+\s*|,\s+|\s+-\s+|\.\.\.")


def clauses(reply: str) -> list[str]:
    """``reply`` cut where a claim may end: sentence marks, commas, dashes."""
    return [c.strip() for c in _CLAUSE.split(reply) if c.strip()]


def fold(word: str) -> str:
    """``word`` without accents ("Montréal" → "montreal", "paramédica" → "paramedica")."""
    return "".join(
        c for c in unicodedata.normalize("NFKD", word.lower()) if not unicodedata.combining(c)
    )


COGNATE = 6
"""A word this long or longer that differs from a row's word by one letter (accents aside)
and starts as it does is the same word in another language ("Noorwegen"/"Norwegen",
"Oktopus"/"octopus"); shorter words differ by more than their language ("Lena"/"Lina")."""


def cognate(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are one word spelled in two languages (``COGNATE``): the same
    without accents, or one letter apart."""
    x, y = fold(a), fold(b)
    if x == y:
        return True
    if min(len(x), len(y)) < COGNATE or abs(len(x) - len(y)) > 1 or x[:1] != y[:1]:
        return False
    if len(x) == len(y):
        return sum(p != q for p, q in zip(x, y, strict=True)) == 1
    short, long = sorted((x, y), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def _held(word: str, row_words: list[str]) -> bool:
    """Whether a row (its words) says ``word``: the same word, a form of it, a concept
    (``CONCEPTS``), a part of a compound, or a cognate; a number only as itself."""
    if word.isdigit():
        return word in row_words
    folded = [fold(w) for w in row_words]
    return (
        _has(row_words, [word])
        or _has(folded, [fold(word)])
        or _part_of(row_words, [word])
        or any(cognate(word, w) for w in row_words)
    )


def missing(question: str, clause: str, row: str) -> list[str]:
    """What ``clause`` claims that ``row`` (its ``evidence``) does not say, by words: its
    ``value_words`` the row does not hold (``_held``) and every name or number it adds
    that the row does not have."""
    words = tokenize(row.replace("\u2019", "'"))
    wanted = value_words(question, clause)
    return [w for w in wanted if not _held(w, words)]


def hard(question: str, clause: str, reply: str) -> list[str]:
    """The words of ``clause`` (of ``reply``) that only their own spelling can support: the
    numbers and names it adds to ``question`` (they survive translation: "Dalia", "93",
    "Hoorn")."""
    named = _names(reply)
    return [w for w in value_words(question, clause) if any(c.isdigit() for c in w) or w in named]


_YOU_OR_I = _I | _set(
    "me my mine mich mir mein meine moi ma mon mes mí mi mis mij mijn "
    "you your du dich dir dein deine tu te toi ton ta tes vous votre tú ti jij jou jouw u"
)


def asks_of_them(question: str) -> bool:
    """Whether ``question`` opens by asking (a question word in its first two words) and
    speaks of no one but whom it names: "Was hat Dirk aufgemacht?", "¿A qué se dedica
    Iker?"; not a request or advice that names them ("Can you write a poem for Ada?",
    "What should I get Ada for her birthday?")."""
    tokens = tokenize(question.replace("\u2019", "'"))
    return bool(set(tokens[:2]) & QUESTION) and not set(tokens) & _YOU_OR_I


def named_here(text: str, named: Iterable[str]) -> bool:
    """Whether ``text`` (a row's words as said) names one of ``named`` as someone, not as a
    place ("Mein Schwager *Dirk* hat …", "*Greta*, my youngest, …"; not "… in *Kassel*")."""
    wanted = set(named)
    tokens = tokenize(text.replace("\u2019", "'"))
    return any(
        w in wanted and (i == 0 or tokens[i - 1] not in _PLACE_BEFORE) for i, w in enumerate(tokens)
    )


_ELIDED = re.compile(r"\b([jJdDlL])['\u2019](?=\w)")
_UNELIDED = {"j": "je ", "d": "de ", "l": "le "}


def unelided(text: str) -> str:
    """French elisions written out ("j'ai" → "je ai", "le métier d'Iker" → "de Iker"), so
    that the first person and a name after "d'" read as they do elsewhere."""
    return _ELIDED.sub(lambda m: _UNELIDED[m.group(1).lower()], text)


def _a_taste(question: str, q: Asked) -> bool:
    """Whether ``question`` asks the person's favourite of something ("¿Cuál es mi *plato*
    favorito?", "mein Lieblingsessen"), not something of someone of theirs ("my son's
    favourite colour"): about the person, whose row need not name the thing."""
    tokens = tokenize(question.replace("\u2019", "'"))
    taste = any(t in FAVOURITE or t.startswith(("lieblings", "lievelings")) for t in tokens)
    return taste and not any(s in RELATIONS for s in q.subject)


def about_whom(question: str, text: str, named: Iterable[str] = ()) -> bool:
    """Whether a row (its ``evidence``) is about whom ``question`` asks: every person it
    ``named`` (a name, in the row's words or its key's); else the thing the person's
    possessive names ("my *dog*", "meine *Frau*", in any of the five languages), not as
    someone else's ("our landlord's *phone*"); else the person themselves: a row about no
    one else ("Raj lives in Leicester") and not about a relative of theirs ("My daughter
    plays …") unless the teller comes first ("I drink my coffee black")."""
    words = tokenize(text.replace("\u2019", "'"))
    whom = sorted(named)
    if whom:
        return all(_has(words, [n]) for n in whom)
    q = asked(question)
    said = said_text(text)
    owned_here = _owned(said)
    if q.subject and not _about_the_person(q) and not _a_taste(question, q):
        if not _has(words, sorted(q.subject)):
            return False
        return not any(
            what is not None
            and _has([what], sorted(q.subject))
            and not _has([noun], sorted(q.subject))
            for noun, what in owned_here
        )
    if _someone_else(text):
        return False
    owners = [noun for noun, _ in owned_here]
    mentioned = [t for t in tokenize(question) if t not in FUNCTION]
    return not owners or speaker_first(said) or _has(owners, mentioned)


def unsupported(question: str, reply: str, about: list[str]) -> list[str]:
    """The clauses of ``reply`` that claim something no single row of ``about`` holds by
    its words (``missing``); a clause of filler alone claims nothing."""
    left: list[str] = []
    for clause in clauses(reply):
        if not value_words(question, clause):
            continue
        if not any(not missing(question, clause, row) for row in about):
            left.append(clause)
    return left


COMPOUND_PART = 3
"""A reply's word this long or longer that starts or ends a longer word of the row is one of
its parts ("bus" of "buschauffeur", "Chemie" told, "Zahnarzt" for "Arzt")."""


def _part_of(words: list[str], added: list[str]) -> bool:
    """Whether an added word of a reply is a part of a compound the row has."""
    return any(
        len(a) >= COMPOUND_PART
        and len(w) >= len(a) + COMPOUND_PART
        and (w.startswith(a) or w.endswith(a))
        for a in added
        for w in words
    )


_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]\s*|[\"“„«‘'(]\s*)$")


def _names(reply: str) -> set[str]:
    """The words a reply capitalises inside a sentence (names, places, titles: what a small
    model invents beside a true word), lowercased; not a sentence's first word, nor "I"."""
    found: set[str] = set()
    for match in re.finditer(r"\w[\w'-]*", reply):
        word = match.group(0)
        if not word[0].isupper() or word == "I" or _SENTENCE_START.search(reply[: match.start()]):
            continue
        found.update(tokenize(word))
    return found


has_word = _has
owned = _owned
someone_else = _someone_else
names_only = _names_only

__all__ = [  # the vocabulary lives in ``concepts``: its names stay importable from here
    "ATTRIBUTE",
    "COGNATE",
    "CONCEPTS",
    "CONCEPT_OF",
    "FAVOURITE",
    "FILLER",
    "FIRST_PERSON",
    "FUNCTION",
    "GENERIC",
    "HYPHENED",
    "KINDS",
    "KIND_ASKERS",
    "KIND_WORDS",
    "KNOWN",
    "NAME",
    "NUMBER",
    "PLAIN",
    "POSSESSIVES",
    "QUESTION",
    "RELATIONS",
    "WHO",
    "Asked",
    "about_whom",
    "asked",
    "asks_of_them",
    "asks_place",
    "clauses",
    "cognate",
    "commute",
    "concept_ids",
    "equivalents",
    "evidence",
    "fold",
    "gives_name",
    "grounded",
    "hard",
    "has_word",
    "job_nouns",
    "lacks_kind",
    "missing",
    "named_here",
    "names_only",
    "other_kind",
    "owned",
    "someone_else",
    "speaker_first",
    "stands_on",
    "subject",
    "supports",
    "unelided",
    "unsupported",
    "value_words",
]

"""How people ask things of the bot, read whole (#45): the words that do not change a request.

``lexicon.LANGUAGES`` has each language's verbs and phrases. A request is also said with
politeness, softeners and modal particles anywhere ("Kannst du bitte *einfach* vergessen,
…", "Vergeet *maar gewoon* …", "*Honestly, just* forget …, *ok*?"), after an opening that asks
("*Would you be so kind as to* forget …", "*Sei so lieb und* vergiss …", "*Est-ce que tu peux*
oublier …", "*Te puedes* acordar de que …", "*Zou je willen* vergeten …"), and "what I just
said" is said a hundred ways. This module adds, per language, classes of such words to the
lexicon's (``READ``: the languages as the intent step reads them), so that after they are read
past, the lexicon's verb frames match:

- ``particles``: single words (and short phrases) read past wherever they sit;
- ``openers``: openings that ask, read past at a clause's start (a request still);
- ``said``: how "what I just said" / "my last message" is said, as regular expressions over
  the lowercased message, each turned into the lexicon's own phrase for it
  (``canonical_last``) before particles are read past ("just" is one);
- ``newcomer``: the words of a greeting or a newcomer's line before an intro question ("Hi
  all, Priya here, just joined.", "Hallo allemaal, ik ben Sanne en net nieuw.");
- ``intro``, ``remember_asked``: more ways to ask what the bot does and to ask it to remember;
- ``dont_forget``: remember verbs that are reminders when they name nothing of the person
  ("Don't forget the umbrella tomorrow!" is about the world, never a fact to keep).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from chazbot.agent.lexicon import LANGUAGES, Language


def _ws(text: str) -> tuple[str, ...]:
    return tuple(w.strip() for w in text.split(",") if w.strip())


@dataclass(frozen=True)
class RequestWords:
    """One language's words that do not change a request (see the module)."""

    particles: tuple[str, ...]
    openers: tuple[str, ...]
    said: tuple[str, ...]
    newcomer: frozenset[str]
    intro: tuple[str, ...] = ()
    forget: tuple[str, ...] = ()
    """Forms of the forget verb an opening leaves ("would you mind *forgetting*")."""
    remember_asked: tuple[str, ...] = ()
    dont_forget: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    """Words that end a request as a question without making it one ("…, ok?")."""
    person: tuple[str, ...] = ()
    """The person with others ("we", "wir", "nous", "wij"): what a forget names is theirs."""
    undo: tuple[str, ...] = ()
    """More ways to ask to take back what the bot just did ("undo what you just did")."""
    dont_keep: tuple[str, ...] = ()
    """More ways to say a message is not to be kept ("between you and me", "onder ons")."""


EN = RequestWords(
    particles=_ws(
        "just, maybe, perhaps, simply, honestly, actually, really, kindly, please, pls, plz, "
        "okay, ok, well, um, uh, basically, quickly, also, anyway, anyways, btw, totally, "
        "completely, entirely, thanks, thank you, thx, possibly, for me, you know what, "
        "never mind that, if you could, if that's ok, if that's okay"
    ),
    openers=_ws(
        "would you be so kind as to, be so kind as to, would you kindly, would you mind, "
        "do you mind, i'd appreciate it if you could, i'd appreciate it if you would, "
        "i'd love it if you could, can i ask you to, could i ask you to, go ahead and, "
        "you can, you could, you should, you may, would you please, can you please, "
        "ignore and, and"
    ),
    said=(
        r"(?:what|everything|all|the (?:thing|things|stuff|bit)|that)(?: that)? (?:i|i've|i have)"
        r" (?:just|only just) (?:said|wrote|written|typed|told you|sent|mentioned|posted|"
        r"told|put)(?: to you| you)?",
        r"(?:what|everything|all|the (?:thing|things|stuff|bit)|that)(?: that)? (?:i|i've|i have)"
        r" (?:said|wrote|written|typed|told you|sent|mentioned|posted|told)(?: to you| you)?"
        r" (?:just now|right now|a (?:second|sec|moment|minute|min|bit) ago|a second back|"
        r"just|there)",
        r"(?:my|that|the) (?:very )?(?:last|previous|latest|most recent) (?:message|msg|text|"
        r"one|post|line|thing i (?:said|wrote|typed|told you|sent))",
        r"the last thing i (?:said|wrote|typed|told you|sent)",
    ),
    newcomer=frozenset(
        _ws(
            "hi, hello, hey, hiya, all, everyone, everybody, folks, there, guys, team, y'all, "
            "i'm, i, am, is, this, here, new, just, joined, name, name's, my, and, it's, me, "
            "first, time, the, nice, to, meet, you, arrived, signed, up, good, morning, "
            "evening, afternoon, so, ok, okay, a, newbie, in, chat, room, group, today"
        )
    ),
    intro=_ws(
        "what can you help me with, what can you help with, what are you able to do, "
        "what are you able to help with, what are you able to help me with, how can you help, "
        "how can you help me, what can i ask you, what can i use you for, what are you good "
        "at, what can you do for me, what do you offer, what can you do here, "
        "what else can you do, what are your features, what do you know how to do"
    ),
    dont_forget=_ws("don't forget, do not forget, never forget"),
    forget=_ws("forgetting"),
    person=_ws("we, we're, we've, we'd"),
    undo=_ws(
        "undo what you just did, undo what you did, undo your last action, undo the last forget, "
        "undo that "
        "forget, take that back, bring back what you just forgot"
    ),
    dont_keep=(
        "between you and me ,",
        "between you and me :",
        "just between you and me",
        "this stays between us",
    ),
    tags=_ws("ok, okay, right, yeah, please, alright, thanks, yes, will you, would you"),
)

DE = RequestWords(
    particles=_ws(
        "mal, doch, bitte, einfach, halt, ruhig, vielleicht, eventuell, bloß, nur, schon, "
        "gerne, gern, also, jetzt, nun, ja, kurz, schnell, danke, okay, ok, eigentlich, "
        "wirklich, bitteschön, bitte schön, wenn's geht, wenn es geht, wenn du magst, "
        "wenn du willst, für mich"
    ),
    openers=_ws(
        "sei so lieb und, sei so gut und, seien sie so gut und, wärst du so lieb und, "
        "würdest du bitte, würdest du, magst du, kannst du, könntest du, kannst du mir, "
        "ich möchte, dass du, ich möchte dass du, ich hätte gern, dass du, ich will, dass du, "
        "du kannst, du könntest, und"
    ),
    said=(
        r"(?:das,? )?(?:was|das) ich (?:dir )?(?:gerade eben|eben gerade|gerade|eben|grad|"
        r"soeben|vorhin|jetzt) (?:gesagt|geschrieben|erzählt|geschickt|getippt|gesendet)"
        r"(?: habe| hab)?",
        r"(?:das,? )?(?:was|das) ich (?:dir )?(?:gerade eben|eben gerade|gerade|eben|grad|"
        r"soeben|vorhin) (?:sagte|schrieb|erzählte|schickte)",
        r"das (?:eben|gerade|soeben|zuletzt) (?:gesagte|geschriebene|erzählte)",
        r"(?:meine|die|diese) (?:letzte|vorige|vorherige|allerletzte) nachricht",
        r"das letzte,? was ich (?:dir )?(?:gesagt|geschrieben|erzählt) (?:habe|hab)",
    ),
    newcomer=frozenset(
        _ws(
            "hallo, hi, hey, zusammen, alle, allerseits, leute, ihr, ich, bin, heiße, hier, "
            "neu, gerade, eben, dazugekommen, beigetreten, und, mein, name, ist, das, erste, "
            "mal, moin, servus, guten, morgen, tag, abend, freut, mich, grüß, gott, euch"
        )
    ),
    intro=_ws(
        "wobei kannst du helfen, wobei kannst du mir helfen, was kann ich dich fragen, "
        "wie kannst du mir helfen, was kannst du für mich tun, wofür bist du da, "
        "wofür bist du gut, was kannst du so, womit kannst du helfen"
    ),
    dont_forget=_ws("vergiss nicht"),
    person=_ws("wir"),
    undo=_ws(
        "mach rückgängig, was du gerade getan hast, mach das vergessen rückgängig, "
        "hol zurück, was du gerade vergessen hast, nimm das zurück"
    ),
    dont_keep=_ws("unter uns gesagt, das bleibt unter uns, zwischen dir und mir"),
    tags=_ws("ok, okay, ja, gell, oder, bitte, danke"),
)

FR = RequestWords(
    particles=_ws(
        "donc, simplement, juste, alors, bon, vraiment, stp, svp, merci de, merci, ok, okay, eh, "
        "hein, "
        "peut-être, plutôt, s'il te plaît, s'il vous plaît, je te prie, je t'en prie, "
        "si tu veux bien, si possible, pour moi, tout simplement"
    ),
    openers=_ws(
        "est-ce que tu peux, est-ce que tu pourrais, est-ce que vous pouvez, "
        "est-ce que vous pourriez, tu veux bien, tu voudrais bien, voudrais-tu, veux-tu, "
        "voulez-vous, merci de, je voudrais que tu, tu pourrais, vous pourriez, "
        "pourriez-vous, sois gentil et, sois gentille et, aie la gentillesse de, "
        "ça te dérangerait de, tu peux, et"
    ),
    said=(
        r"ce que je (?:viens|venais) (?:juste )?de (?:te |vous )?(?:dire|écrire|raconter|"
        r"envoyer|taper)",
        r"ce que je (?:t'|vous )?ai (?:dit|écrit|raconté|envoyé|tapé) (?:à l'instant|"
        r"juste avant|tout à l'heure|il y a un instant|il y a une minute|juste là)",
        r"(?:mon|le|ce) (?:dernier|précédent) message",
        r"mon message (?:précédent|d'avant)",
        r"la dernière chose que (?:je t'ai|je vous ai|j'ai) (?:dite|écrite|dit|écrit)",
    ),
    newcomer=frozenset(
        _ws(
            "bonjour, salut, coucou, hello, à, tous, toutes, je, suis, m'appelle, moi, c'est, "
            "ici, nouveau, nouvelle, viens, d'arriver, arriver, de, et, tout, le, monde, "
            "bonsoir, première, fois, enchanté, enchantée"
        )
    ),
    intro=_ws(
        "comment peux-tu m'aider, en quoi peux-tu m'aider, qu'est-ce que je peux te demander, "
        "que peux-tu faire pour moi, à quoi sers-tu, tu sais faire quoi, tu fais quoi"
    ),
    remember_asked=_ws("te rappeler, t'en souvenir, garder en mémoire"),
    dont_forget=_ws("n'oublie pas, n'oubliez pas"),
    forget=_ws("d'oublier"),
    person=_ws("nous"),
    undo=_ws(
        "annule ce que tu viens de faire, annule ta dernière action, annule l'oubli, "
        "remets ce que tu viens d'oublier, reviens en arrière"
    ),
    dont_keep=(
        "entre toi et moi ,",
        "entre toi et moi :",
        "entre nous soit dit",
        "ça reste entre nous",
    ),
    tags=_ws("ok, d'accord, merci, stp, svp, hein, veux-tu"),
)

ES = RequestWords(
    particles=_ws(
        "porfa, porfavor, por favor, simplemente, solo, sólo, pues, bueno, vale, quizás, "
        "quizá, tal vez, gracias, ok, si puedes, si no te importa, para mí"
    ),
    openers=_ws(
        "te puedes, me puedes, puedes, podrías, te podrías, te importaría, me haces el favor de, "
        "hazme el favor de, haz el favor de, quieres, quisiera que, sé bueno y, sé buena y, "
        "serías tan amable de, ¿puedes, y"
    ),
    said=(
        r"lo que (?:te |le )?acabo de (?:decir|escribir|contar|mandar|enviar|poner)",
        r"lo que (?:te )?(?:dije|escribí|conté|mandé|puse) (?:hace un momento|hace nada|"
        r"ahora mismo|recién|hace un rato|hace un segundo|justo ahora)",
        r"(?:mi|el|ese) (?:último|anterior) mensaje",
        r"mi mensaje anterior",
        r"lo último que (?:te )?(?:dije|escribí|conté|he dicho|he escrito)",
        r"lo último(?= *[.,;!?]| *$)",
    ),
    newcomer=frozenset(
        _ws(
            "hola, a, todos, todas, soy, me, llamo, aquí, nuevo, nueva, acabo, de, llegar, "
            "unirme, entrar, y, mi, nombre, es, buenos, días, buenas, primera, vez, gente, "
            "encantado, encantada"
        )
    ),
    intro=_ws(
        "en qué me puedes ayudar, en qué puedes ayudarme, qué te puedo preguntar, "
        "cómo me puedes ayudar, para qué sirves, qué puedes hacer por mí, qué sabes hacer"
    ),
    remember_asked=_ws("acordar de, acordar, acordarte, recordar, guardar"),
    dont_forget=_ws("no olvides, no te olvides de, no te olvides"),
    person=_ws("nosotros, nosotras"),
    undo=_ws(
        "deshaz lo que acabas de hacer, deshaz lo último, recupera lo que acabas de olvidar, "
        "vuelve atrás"
    ),
    dont_keep=(
        "entre tú y yo ,",
        "entre tú y yo :",
        "que quede entre nosotros",
        "esto queda entre nosotros",
    ),
    tags=_ws("vale, ok, sí, porfa, gracias"),
)

NL = RequestWords(
    particles=_ws(
        "even, eens, maar, gewoon, misschien, alsjeblieft, alstublieft, graag, toch, nou, "
        "effe, ff, hoor, oké, ok, dank je, bedankt, svp, aub, ajb, voor mij, als het kan"
    ),
    openers=_ws(
        "zou je willen, zou je, wil je, kun je, kan je, kunt u, wilt u, zou u, "
        "wees zo lief en, wees zo vriendelijk om, mag ik je vragen om, ik wil dat je, "
        "je mag, en"
    ),
    said=(
        r"wat ik (?:je |jou )?(?:net|zojuist|zonet|daarnet|net nog|zo-even|zoëven) (?:zei|"
        r"schreef|vertelde|stuurde|typte)",
        r"wat ik (?:je |jou )?(?:net|zojuist|zonet|daarnet|zo-even) (?:heb |had )?(?:gezegd|"
        r"geschreven|verteld|gestuurd|getypt)(?: heb)?",
        r"(?:mijn|het|dat) (?:laatste|vorige) (?:bericht|berichtje)",
        r"het laatste wat ik (?:je )?(?:zei|schreef|vertelde)",
    ),
    newcomer=frozenset(
        _ws(
            "hallo, hoi, hi, hey, allemaal, iedereen, ik, ben, heet, hier, nieuw, net, pas, "
            "en, mijn, naam, is, de, eerste, keer, goedemorgen, goedemiddag, goedenavond, "
            "lui, jongens, dag, erbij, gekomen"
        )
    ),
    intro=_ws(
        "wat kan ik je vragen, waarmee kun je helpen, waarmee kun je me helpen, "
        "hoe kun je me helpen, wat kun je voor me doen, waar ben je goed in, "
        "wat kan je allemaal"
    ),
    remember_asked=_ws("onthouden, opschrijven"),
    dont_forget=_ws("vergeet niet"),
    person=_ws("we, wij"),
    undo=_ws(
        "maak ongedaan wat je net deed, maak dat ongedaan, zet terug wat je net vergat, "
        "draai het terug"
    ),
    dont_keep=(
        "onder ons ,",
        "tussen jou en mij ,",
        "onder ons :",
        "tussen jou en mij :",
        "dit blijft onder ons",
    ),
    tags=_ws("oké, ok, goed, hè, toch, graag"),
)

BY_CODE: dict[str, RequestWords] = {"en": EN, "de": DE, "fr": FR, "es": ES, "nl": NL}


def _read(lang: Language) -> Language:
    more = BY_CODE[lang.code]
    return replace(
        lang,
        filler=lang.filler + more.openers + more.particles,
        polite=lang.polite + more.particles,
        intro=lang.intro + more.intro,
        remember_asked=lang.remember_asked + more.remember_asked,
        forget=lang.forget + more.forget,
        person=lang.person + more.person,
        undo=lang.undo + more.undo,
        dont_keep=lang.dont_keep + more.dont_keep,
    )


READ: tuple[Language, ...] = tuple(_read(lang) for lang in LANGUAGES)
"""The lexicon's languages with this module's words added, as the intent step reads them."""

_SAID = {
    code: re.compile(r"(?<![\w'])(?:" + "|".join(words.said) + r")(?![\w'])")
    for code, words in BY_CODE.items()
}


def canonical_last(text: str, lang: Language) -> str:
    """``text`` with any way of saying "what I just said" / "my last message" in ``lang``
    turned into the lexicon's own phrase for it (the first of ``last_said`` that holds no
    particle), so that particles read past later do not take it apart."""
    phrase = next(
        (p for p in lang.last_said if not set(p.split()) & set(BY_CODE[lang.code].particles)),
        lang.last_said[0] if lang.last_said else "",
    )
    if not phrase:
        return text
    lowered = text.replace("\u2019", "'").lower()
    found = list(_SAID[lang.code].finditer(lowered))
    for match in reversed(found):  # the same length in lowercase for these scripts
        text = text[: match.start()] + phrase + text[match.end() :]
    return text


_TAG_END = re.compile(r"[,\s]+([\w' -]+?)\s*\?\s*$")


def untagged(text: str, lang: Language) -> str:
    """``text`` without a question tag that leaves a request a request ("Forget my phone
    number, ok?" → "Forget my phone number."); a real question is left as it is."""
    match = _TAG_END.search(text)
    if match is None or match.group(1).lower() not in BY_CODE[lang.code].tags:
        return text
    return text[: match.start()] + "."


def newcomer(sentence: list[str], lang: Language, typed: str) -> bool:
    """Whether a sentence (its lowercase words) is a greeting or a newcomer's line: every
    word one of ``newcomer``, a mark, or a name (a capitalised word of ``typed``)."""
    names = {w.lower() for w in re.findall(r"\b[A-ZÀ-Ý][\w'-]*", typed)}
    allowed = BY_CODE[lang.code].newcomer
    return bool(sentence) and all(
        w in allowed or w in names or not any(c.isalnum() for c in w) for w in sentence
    )


_ES_ASKING = frozenset(
    ["qué", "que", "dónde", "donde", "cuándo", "cuando", "cómo", "como", "cuál", "cuáles", "quién"]
)
_ES_DETERMINERS = frozenset(
    [
        "el",
        "la",
        "los",
        "las",
        "un",
        "una",
        "unos",
        "unas",
        "mi",
        "tu",
        "su",
        "mis",
        "tus",
        "sus",
        "del",
        "al",
    ]
)


def spanish_speaker(clause: list[str]) -> bool:
    """Whether a Spanish clause asks about its speaker by the verb alone: an embedded question
    that ends in a first-person verb ("qué instrumento *toco*", "a qué me *dedico*", "dónde
    *estudié*"), not in a noun ("dónde está el banco")."""
    words = [w for w in clause if w.isalpha()]
    if len(words) < 2 or not any(w in _ES_ASKING for w in words[:2]):
        return False
    last, before = words[-1], words[-2]
    return len(last) >= 3 and last.endswith(("o", "é")) and before not in _ES_DETERMINERS


def dont_forget(words: list[str], at: int, lang: Language) -> bool:
    """Whether the remember verb at ``words[at]`` is one that is a reminder when it names
    nothing of the person ("don't forget", "vergiss nicht", "n'oublie pas")."""
    return any(words[at : at + len(p.split())] == p.split() for p in BY_CODE[lang.code].dont_forget)


__all__ = [
    "BY_CODE",
    "READ",
    "RequestWords",
    "canonical_last",
    "dont_forget",
    "newcomer",
    "spanish_speaker",
    "untagged",
]

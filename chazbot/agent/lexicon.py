"""The words that ask something of the bot's memory, in English, German, French, Spanish and
Dutch (#36): data for ``words``, one table per language.

Requests about memory and requests about the world use the same verbs ("remove the onions
from the recipe", "remove my number from your memory"), so the verbs come in two kinds:

- ``forget``: verbs that are about memory by themselves ("forget", "vergiss", "oublie"…);
  their object may still dismiss ("forget it", "vergiss es", "laisse tomber");
- ``delete``: verbs about anything ("delete", "lösche", "supprime"…), about memory only when
  the sentence names memory (``memory``: "from your memory", "what I told you"…).

Phrases are matched on whole words at the start of a clause, after ``filler`` ("please",
"can you"…); a sentence that asks (``asking``, or a question mark) is never a request to
remember. Lowercase; apostrophes as typed on phones are normalised by ``words``.
"""

from __future__ import annotations

from dataclasses import dataclass


def _ws(text: str) -> tuple[str, ...]:
    """Comma-separated phrases as a tuple."""
    return tuple(p.strip() for p in text.split(","))


@dataclass(frozen=True)
class Language:
    """One language's words (each a tuple of phrases, lowercase, whole words)."""

    code: str
    filler: tuple[str, ...]
    forget: tuple[str, ...]
    delete: tuple[str, ...]
    remember: tuple[str, ...]
    dont_keep: tuple[str, ...]
    undo: tuple[str, ...]
    dismiss: tuple[str, ...]
    """Objects that dismiss rather than name something ("it", "about it", "that")."""
    memory: tuple[str, ...]
    """Words that make a ``delete`` verb about memory."""
    everything: tuple[str, ...]
    asking: tuple[str, ...]
    """Openings of a question about memory ("remember when", "weißt du noch")."""
    about_me: tuple[str, ...]
    intro: tuple[str, ...]
    lead: tuple[str, ...]
    """Words that may sit between a verb and its object ("that", "about", "dass")."""
    marks: tuple[str, ...] = ()
    """Common words that tell the language of a short statement ("ich", "est", "mijn")."""
    mine: tuple[tuple[str, str], ...] = ()
    """The person's possessives turned to the listener's ("mein" → "dein"), for "Noted: …"."""
    me: tuple[str, ...] = ()
    """The person as subject or object ("ich", "je"): their words are quoted, not turned (the
    verb would have to change too)."""
    opens: tuple[str, ...] = ()
    """How a statement that tells a fact to keep may start: the person or their possessive, or
    a verb in the first person (Spanish drops the pronoun: "vivo en…")."""
    tells: tuple[str, ...] = ()
    """Verbs of a statement that tells something ("ist", "heißt", "s'appelle", "vive")."""
    please: tuple[str, ...] = ()
    """Words that ask something of the bot ("bitte", "peux-tu"): such a message tells nothing."""
    verb_last: tuple[str, ...] = ()
    """Openings of a request whose verb closes the clause ("kannst du … vergessen?", "ich
    möchte nicht, dass du dir … merkst", "kun je … vergeten?", "ik wil niet dat je …
    onthoudt"): a forget when the clause ends in one of ``verb_last_end``."""
    verb_last_end: tuple[str, ...] = ()
    """The verbs that close a ``verb_last`` forget ("vergessen", "merkst", "onthoudt")."""
    todo: str = r"(?!x)x"
    """A regular expression over a remember request's object (lowercase words joined by
    spaces) that finds a thing to do, not a fact: "remember *to buy milk*", "vergiss nicht,
    *Milch zu kaufen*", "n'oublie pas *d'acheter* du pain", "no olvides *regar* las
    plantas", "vergeet niet *om* brood *te kopen*". Such a request is about the world (a
    reminder), never a fact to keep."""
    person: tuple[str, ...] = ()
    """The person and what is theirs ("my", "me", "mein", "mon", "mi", "mijn"…): what a
    forget request names is theirs, or it is about the world ("forget about the cinema")."""
    polite: tuple[str, ...] = ()
    """Politeness that may sit anywhere in a request ("Vergiss *bitte*, dass …", "Oublie,
    *s'il te plaît*, …", "Olvida, *por favor*, …"): read past, never part of what is named."""
    last_said: tuple[str, ...] = ()
    """What a forget names when it means the person's previous message ("what I just said",
    "was ich gerade gesagt habe", "lo que acabo de decir")."""
    remember_asked: tuple[str, ...] = ()
    """A remember verb as a question asks it, after a modal ("can you *remember that* …",
    "kannst du dir *merken, dass* …", "peux-tu *retenir que* …"): a request when a
    "that" follows, a question about the world otherwise ("can you remember when …?")."""
    intro_said: tuple[str, ...] = ()
    """Sentences that may come before an intro question in one message and leave it an intro
    ("I'm new here", "hello, I'm Ana"): openings of a sentence about the newcomer."""


EN = Language(
    "en",
    filler=(
        "hey",
        "hi",
        "ok",
        "okay",
        "so",
        "and",
        "now",
        "please",
        "can you",
        "could you",
        "would you",
        "will you",
        "can you please",
        "could you please",
        "would you please",
        "i want you to",
        "i'd like you to",
        "i would like you to",
        "i need you to",
        "can u",
        "could u",
        "pls",
        "plz",
        "wait",
        "oops",
        "oh",
        "ah",
        "sorry",
        "actually",
    ),
    forget=(
        "forget",
        "mind forgetting",
        "don't remember",
        "do not remember",
        "stop remembering",
        "no need to remember",
        "you don't need to remember",
        "you do not need to remember",
        "i'd rather you didn't remember",
        "i'd rather you did not remember",
        "i would rather you didn't remember",
        "i'd prefer you didn't remember",
        "i don't want you to remember",
        "i do not want you to remember",
    ),
    delete=("delete", "remove", "erase", "drop", "wipe", "clear", "scrap", "scratch", "strike"),
    remember=(
        "remember",
        "note",
        "keep in mind",
        "bear in mind",
        "make a note",
        "don't forget",
        "do not forget",
        "never forget",
        "write down",
        "for the record",
        "keep this :",
        "save this :",
        "store this :",
        "note this :",
    ),
    dont_keep=(
        "don't keep this",
        "do not keep this",
        "don't remember this",
        "do not remember this",
        "please don't remember this",
        "don't store this",
        "do not store this",
        "don't save this",
        "don't write this down",
        "don't note this",
        "don't note that",
        "do not note this",
        "off the record",
        "between us",
        "just between us",
    ),
    undo=(
        "undo",
        "undo that",
        "undo it",
        "bring it back",
        "bring that back",
        "bring them back",
        "restore it",
        "restore that",
        "restore them",
        "put it back",
        "put that back",
    ),
    dismiss=(
        "it",
        "about it",
        "that",
        "this",
        "about that",
        "all about it",
        "i said anything",
        "i said that",
        "i said it",
        "i asked",
        "i mentioned it",
    ),
    memory=(
        "memory",
        "memories",
        "from memory",
        "from your memory",
        "from your memories",
        "the memory about",
        "the memory of",
        "the memories about",
        "what i told you",
        "what i said",
        "what i've told you",
        "what i've said",
        "everything i told you",
        "you know about me",
        "what you know about",
        "what you know",
        "you remember",
        "you stored",
        "you saved",
        "you keep",
        "your notes",
    ),
    everything=("everything", "all", "it all", "all of it", "all that", "everything about me"),
    asking=("remember when", "remember the time", "remember what", "remember how"),
    about_me=(
        "what do you know about me",
        "what did you know about me",
        "what do you remember about me",
        "what have i told you",
        "what did i tell you",
        "what do you keep about me",
        "what do you have on me",
    ),
    intro=(
        "help",
        "what can you do",
        "what do you do",
        "who are you",
        "what are you",
        "how do you work",
        "how does this work",
        "what are you for",
    ),
    lead=("that", "about", "what", "the fact that"),
    marks=_ws(
        "i, my, is, the, am, and, called, live, have, was, a, in, what, where, who, which, how"
    ),
    todo=r"^to\b",
    person=_ws("my, me, i, mine, i'm, i've, our, ours, us, myself"),
    polite=_ws(
        "please, pls, plz, kindly, if you don't mind, if you do not mind, if you would, "
        "if you can, if possible, scratch that, okay so, ok so"
    ),
    last_said=_ws(
        "what i just said, what i just told you, what i just wrote, what i said just now, "
        "that last message, my last message, the last message, the last thing i said, "
        "my previous message, what i just sent, that last thing, the last thing i told you, "
        "what i've just told you, what i told you just now, my last one"
    ),
    remember_asked=_ws("remember, keep in mind, note, make a note"),
    intro_said=_ws(
        "i'm, i am, my name, i just, i've just, this is, first time, new here, good morning, "
        "good afternoon, good evening"
    ),
)

DE = Language(
    "de",
    filler=(
        "hey",
        "hallo",
        "ok",
        "also",
        "und",
        "jetzt",
        "bitte",
        "kannst du",
        "könntest du",
        "warte",
        "moment",
        "oh",
        "ups",
        "hoppla",
    ),
    forget=("vergiss", "vergessen", "vergesse", "merk dir nicht mehr", "merke dir nicht mehr"),
    delete=(
        "lösche",
        "lösch",
        "löschen",
        "entferne",
        "entfern",
        "entfernen",
        "streiche",
        "streich",
    ),
    remember=(
        "merk dir",
        "merke dir",
        "vergiss nicht",
        "denk daran",
        "denke daran",
        "denk dran",
        "denke dran",
        "notiere",
        "notier",
        "behalte",
        "behalte im hinterkopf",
        "fürs protokoll",
        "speicher das :",
        "speichere das :",
    ),
    dont_keep=(
        "merk dir das nicht",
        "merke dir das nicht",
        "nicht speichern",
        "bitte nicht speichern",
        "speicher das nicht",
        "speichere das nicht",
        "unter uns",
        "behalte das nicht",
        "schreib das nicht auf",
        "notier das nicht",
        "notiere das nicht",
    ),
    undo=(
        "rückgängig",
        "mach das rückgängig",
        "rückgängig machen",
        "mach es rückgängig",
        "stell das wieder her",
        "stell es wieder her",
        "stelle das wieder her",
        "hol das zurück",
        "hol es zurück",
    ),
    dismiss=("es", "das", "es einfach", "das einfach", "es doch"),
    memory=(
        "aus deinem gedächtnis",
        "aus deiner erinnerung",
        "aus deinen erinnerungen",
        "gedächtnis",
        "erinnerung",
        "erinnerungen",
        "gespeichert",
        "gemerkt",
        "was ich dir",
        "was du über mich weißt",
        "was du von mir weißt",
        "was du weißt",
        "aus deinem speicher",
        "speicher",
        "gesagt habe",
        "erzählt habe",
    ),
    everything=("alles", "alles über mich"),
    asking=("weißt du noch", "erinnerst du dich"),
    about_me=("was weißt du über mich", "was weißt du von mir", "was habe ich dir erzählt"),
    intro=(
        "hilfe",
        "was kannst du",
        "was kannst du alles",
        "wer bist du",
        "was bist du",
        "wie funktionierst du",
        "wie funktioniert das",
        "was machst du",
    ),
    lead=("dass", "über", "was"),
    marks=_ws(
        "ich, mein, meine, meinen, ist, und, der, die, das, heißt, wohne, nicht, bin, habe, "
        "ein, eine, mit, im, wo, wer, wann, welche, welcher, welches, wohnt, spielt, heißt"
    ),
    mine=(
        ("mein", "dein"),
        ("meine", "deine"),
        ("meinen", "deinen"),
        ("meinem", "deinem"),
        ("meiner", "deiner"),
        ("meines", "deines"),
    ),
    me=_ws("ich, mich, mir"),
    opens=_ws("ich, mein, meine, meinen, meinem, meiner, unser, unsere"),
    tells=_ws(
        "ist, bin, sind, heißt, heiße, heisst, wohne, wohnt, habe, hat, arbeite, arbeitet, "
        "lebe, lebt, mag, spiele, spielt, war, komme"
    ),
    please=_ws("bitte, kannst, könntest, kann, sag mir, erzähl, schreib, hilf"),
    verb_last=(
        "ich möchte nicht , dass du dir",
        "ich möchte nicht dass du dir",
        "ich will nicht , dass du dir",
        "ich will nicht dass du dir",
        "kannst du",
        "könntest du",
        "würdest du",
        "kannst du bitte",
        "könntest du bitte",
        "bitte",
    ),
    verb_last_end=_ws("merkst, behältst, speicherst, vergessen"),
    todo=r"(?:\bzu \w+|\w+zu\w+en)$",
    person=_ws(
        "ich, mich, mir, mein, meine, meinen, meinem, meiner, meines, unser, unsere, unseren, "
        "unserem, uns"
    ),
    polite=_ws(
        "bitte, bitteschön, doch bitte, wenn's geht, wenn es geht, mal bitte, bitte mal, "
        "doch mal, mal, vielleicht, doch"
    ),
    last_said=_ws(
        "was ich gerade gesagt habe, was ich eben gesagt habe, was ich gerade geschrieben "
        "habe, was ich eben geschrieben habe, was ich gerade sagte, meine letzte nachricht, "
        "die letzte nachricht, das letzte, was ich gesagt habe, das eben gesagte, "
        "das gerade gesagte, meine vorige nachricht, was ich dir gerade gesagt habe"
    ),
    remember_asked=_ws("dir merken, dir das merken, merken, notieren, dir notieren"),
    intro_said=_ws(
        "ich bin, ich heiße, mein name, ich bin neu, neu hier, das erste mal, guten tag, "
        "guten morgen, guten abend, servus, moin"
    ),
)

FR = Language(
    "fr",
    filler=(
        "hé",
        "ok",
        "alors",
        "et",
        "maintenant",
        "s'il te plaît",
        "s'il vous plaît",
        "stp",
        "svp",
        "peux-tu",
        "pourrais-tu",
        "pouvez-vous",
        "tu peux",
        "attends",
        "oups",
        "oh",
    ),
    forget=(
        "oublie",
        "oubliez",
        "oublier",
        "ne retiens plus",
        "arrête de retenir",
        "je préfère que tu ne retiennes pas",
        "je ne veux pas que tu retiennes",
        "je préfère que tu oublies",
    ),
    delete=("efface", "effacez", "supprime", "supprimez", "enlève", "enlevez", "retire", "raye"),
    remember=(
        "souviens-toi",
        "rappelle-toi",
        "retiens",
        "retenez",
        "note",
        "notez",
        "n'oublie pas",
        "n'oubliez pas",
        "garde en tête",
        "garde à l'esprit",
        "pour mémoire",
        "garde ça :",
        "retiens ça :",
    ),
    dont_keep=(
        "ne retiens pas ça",
        "ne retiens pas",
        "ne garde pas ça",
        "ne garde pas ça en mémoire",
        "ne l'enregistre pas",
        "n'enregistre pas ça",
        "entre nous",
        "ne note pas ça",
        "ne note pas",
        "ne l'écris pas",
        "n'écris pas ça",
    ),
    undo=(
        "annule",
        "annule ça",
        "annuler",
        "annulez",
        "remets-le",
        "remets ça",
        "rétablis-le",
        "restaure-le",
    ),
    dismiss=("ça", "cela", "le", "tout ça"),
    memory=(
        "de ta mémoire",
        "de votre mémoire",
        "mémoire",
        "souvenir",
        "souvenirs",
        "ce que je t'ai dit",
        "ce que je vous ai dit",
        "ce que tu sais",
        "enregistré",
        "ce que j'ai dit",
    ),
    everything=("tout", "tout ce que tu sais sur moi", "tout sur moi"),
    asking=(
        "tu te souviens",
        "te souviens-tu",
        "tu te rappelles",
        "te rappelles-tu",
        "vous souvenez-vous",
    ),
    about_me=("que sais-tu de moi", "que sais-tu sur moi", "qu'est-ce que tu sais sur moi"),
    intro=(
        "aide",
        "que peux-tu faire",
        "qu'est-ce que tu peux faire",
        "que sais-tu faire",
        "qui es-tu",
        "comment ça marche",
        "tu sers à quoi",
    ),
    lead=("que", "de", "ce que"),
    marks=_ws(
        "je, j', mon, ma, mes, est, suis, le, la, les, et, une, s'appelle, m'appelle, habite, "
        "j'habite, à, du, des, quel, quelle, où, comment, quand"
    ),
    mine=(("mon", "ton"), ("ma", "ta"), ("mes", "tes")),
    me=_ws("je, j', moi, me, m'"),
    opens=_ws("je, j', mon, ma, mes, notre, nos"),
    tells=_ws(
        "est, suis, sont, s'appelle, m'appelle, appelle, habite, ai, a, travaille, aime, joue, "
        "vis, vit, était"
    ),
    todo=r"^(?:de |d')(?:(?:le|la|les|l'|me|m'|te|t'|lui|leur|y|en|se|s') ?)*\w+(?:er|ir|re)\b",
    person=_ws("je, j', moi, me, m', mon, ma, mes, notre, nos"),
    polite=_ws(
        "s'il te plaît, s'il vous plaît, stp, svp, si possible, si tu veux bien, je te prie, "
        "je t'en prie, je vous prie, donc"
    ),
    last_said=_ws(
        "ce que je viens de dire, ce que je viens d'écrire, ce que je t'ai dit à l'instant, "
        "mon dernier message, le dernier message, ce que je t'ai dit tout à l'heure, "
        "mon message précédent"
    ),
    remember_asked=_ws("retenir, te souvenir, noter, garder en tête, vous souvenir"),
    intro_said=_ws(
        "je suis, je m'appelle, moi c'est, je suis nouveau, je suis nouvelle, bonjour, bonsoir, "
        "salut"
    ),
    please=_ws(
        "s'il te plaît, s'il vous plaît, peux-tu, pourrais-tu, tu peux, dis-moi, pouvez-vous, "
        "aide-moi, écris"
    ),
)

ES = Language(
    "es",
    filler=(
        "oye",
        "hola",
        "vale",
        "y",
        "ahora",
        "por favor",
        "puedes",
        "podrías",
        "porfa",
        "espera",
        "uy",
        "ups",
    ),
    forget=(
        "olvida",
        "olvídate de",
        "olvídate",
        "olvidar",
        "deja de recordar",
        "ya no recuerdes",
        "prefiero que no recuerdes",
        "no quiero que recuerdes",
        "prefiero que olvides",
    ),
    delete=("borra", "elimina", "quita", "suprime", "borrar", "eliminar", "tacha"),
    remember=(
        "recuerda",
        "acuérdate de",
        "acuérdate",
        "apunta",
        "anota",
        "no olvides",
        "no te olvides de",
        "ten en cuenta",
        "ten presente",
        "que conste",
        "para que conste",
        "guarda esto :",
        "apunta esto :",
    ),
    dont_keep=(
        "no guardes esto",
        "no recuerdes esto",
        "no lo guardes",
        "no lo recuerdes",
        "entre nosotros",
        "no apuntes esto",
        "no anotes esto",
        "no lo apuntes",
        "no lo anotes",
    ),
    undo=(
        "deshacer",
        "deshaz",
        "deshazlo",
        "deshacer eso",
        "deshaz eso",
        "recupéralo",
        "devuélvelo",
        "restáuralo",
    ),
    dismiss=("lo", "eso", "esto"),
    memory=(
        "de tu memoria",
        "memoria",
        "recuerdos",
        "lo que te dije",
        "lo que dije",
        "lo que sabes",
        "guardado",
    ),
    everything=("todo", "todo lo que sabes de mí", "todo sobre mí"),
    asking=("recuerdas", "te acuerdas"),
    about_me=("qué sabes de mí", "que sabes de mi", "qué sabes sobre mí"),
    intro=(
        "ayuda",
        "qué puedes hacer",
        "que puedes hacer",
        "qué sabes hacer",
        "quién eres",
        "cómo funciona esto",
        "cómo funcionas",
    ),
    lead=("que", "de", "de que", "lo que"),
    marks=_ws(
        "yo, mi, mis, es, el, los, las, y, soy, se, llama, vivo, vive, tengo, una, del, está, "
        "cuál, cómo, dónde, quién, cuándo, qué"
    ),
    mine=(("mi", "tu"), ("mis", "tus")),
    me=_ws("yo, me"),
    opens=_ws("yo, mi, mis, nuestro, nuestra, vivo, soy, tengo, trabajo, estoy, juego, me"),
    tells=_ws(
        "es, soy, son, está, estoy, llama, llamo, vivo, vive, tengo, tiene, trabajo, trabaja, "
        "gusta, juego, juega, era"
    ),
    todo=r"^(?:de )?\w+(?:ar|er|ir)(?:la|lo|le|las|los|les|me|te|se)?\b",
    person=_ws("yo, me, mí, mi, mis, nuestro, nuestra, nuestros, nuestras, nos"),
    polite=_ws("por favor, porfa, porfavor, si puedes"),
    last_said=_ws(
        "lo que acabo de decir, lo que acabo de escribir, lo que te acabo de decir, "
        "mi último mensaje, el último mensaje, lo último que te dije, lo último que dije, "
        "mi mensaje anterior"
    ),
    remember_asked=_ws("recordar, acordarte de, acordarte, apuntar, anotar, tener en cuenta"),
    intro_said=_ws(
        "soy, me llamo, mi nombre, es mi primera vez, soy nuevo, soy nueva, buenos días, "
        "buenas tardes, buenas noches, buenas"
    ),
    please=_ws("por favor, puedes, podrías, dime, ayúdame, escribe"),
)

NL = Language(
    "nl",
    filler=(
        "hé",
        "hoi",
        "ok",
        "oké",
        "dus",
        "en",
        "nu",
        "alsjeblieft",
        "kun je",
        "kan je",
        "wil je",
        "aub",
        "ajb",
        "wacht",
        "oeps",
        "oh",
    ),
    forget=("vergeet", "vergeten", "onthoud niet langer", "onthoud niet meer"),
    delete=("verwijder", "wis", "haal", "schrap", "verwijderen", "wissen"),
    remember=(
        "onthoud",
        "vergeet niet",
        "denk eraan",
        "noteer",
        "schrijf op",
        "hou in je achterhoofd",
        "houd in je achterhoofd",
        "hou er rekening mee",
        "houd er rekening mee",
        "sla op",
        "sla dit op :",
        "bewaar dit :",
    ),
    dont_keep=(
        "onthoud dit niet",
        "onthoud dat niet",
        "niet opslaan",
        "sla dit niet op",
        "schrijf dit niet op",
        "noteer dit niet",
    ),
    undo=(
        "ongedaan maken",
        "maak dat ongedaan",
        "maak het ongedaan",
        "herstel",
        "herstel het",
        "zet het terug",
        "haal het terug",
    ),
    dismiss=("het", "het maar", "dat", "dat maar", "maar"),
    memory=(
        "uit je geheugen",
        "uit jouw geheugen",
        "geheugen",
        "herinnering",
        "wat ik je",
        "wat je over mij weet",
        "wat je weet",
        "opgeslagen",
        "heb verteld",
        "heb gezegd",
        "wat ik zei",
    ),
    everything=("alles", "alles over mij", "alles wat je over mij weet"),
    asking=("weet je nog", "herinner je je", "herinner jij je"),
    about_me=("wat weet je over mij", "wat weet je van mij"),
    intro=(
        "help",
        "wat kun je",
        "wat kan je",
        "wat kun jij",
        "wat kun je allemaal",
        "wie ben je",
        "hoe werk je",
        "hoe werkt dit",
    ),
    lead=("dat", "over", "wat"),
    marks=_ws(
        "ik, mijn, het, een, de, en, heet, woon, ben, niet, van, heb, werk, onze, wat, waar, hoe, "
        "wanneer, welke, woont"
    ),
    mine=(("mijn", "jouw"),),
    me=_ws("ik, mij, me"),
    opens=_ws("ik, mijn, onze, ons"),
    tells=_ws(
        "is, ben, zijn, heet, heten, woon, woont, heb, heeft, werk, werkt, speel, speelt, was, hou"
    ),
    please=_ws("alsjeblieft, kun je, wil je, kan je, vertel, help, schrijf"),
    verb_last=(
        "ik wil liever niet dat je",
        "ik wil liever niet dat jij",
        "ik wil niet dat je",
        "ik wil niet dat jij",
        "ik heb liever niet dat je",
        "kun je",
        "kan je",
        "kun jij",
        "wil je",
        "zou je",
    ),
    verb_last_end=_ws("onthoudt, opslaat, bewaart, vergeten"),
    todo=r"^om\b|\bte \w+$",
    person=_ws("ik, mij, me, mijn, ons, onze"),
    polite=_ws("alsjeblieft, alstublieft, asjeblieft, aub, ajb, a.u.b., even, graag, eens"),
    last_said=_ws(
        "wat ik net zei, wat ik net gezegd heb, wat ik net heb gezegd, wat ik zojuist zei, "
        "wat ik net schreef, mijn laatste bericht, het laatste bericht, mijn vorige bericht, "
        "het vorige bericht"
    ),
    remember_asked=_ws("onthouden, noteren, opslaan"),
    intro_said=_ws(
        "ik ben, ik heet, mijn naam, ik ben nieuw, nieuw hier, de eerste keer, goedemorgen, "
        "goedemiddag, goedenavond"
    ),
)

LANGUAGES: tuple[Language, ...] = (EN, DE, FR, ES, NL)

REPLIES: dict[str, dict[str, str]] = {
    "en": {
        "forgotten": "Forgotten: {what}. Say “undo” within {minutes} minutes to bring it back.",
        "none": "I don't keep anything you told me about {what}.",
        "none_at_all": "I don't keep anything you told me.",
        "remembered": "Noted: {what}.",
        "you_said": "You told me: {what}.",
        "they_said": "{who} told me: {what}.",
        "undone": "Brought back: {what}.",
        "intro": "I'm {agent}, an assistant that remembers what you tell me.\n"
        "- I bring up what you told me when it matters, and only where everyone present was "
        "there when you said it.\n"
        '- Ask "what do you know about me?" to see it, and say "forget …" to take something '
        "back (or {prefix}memory mine and {prefix}memory forget-mine <key>|all).\n"
        "- In a group room, start a message with {bare} or mention me; in a DM (a room of "
        "just you and me) just talk.\n"
        "- {prefix}help lists every command.",
        "told": "What you told me:",
        "told_newest": "What you told me (the newest {shown} of {total}):",
        "told_nothing": "You haven't told me anything I keep.",
        "told_nothing_here": "You haven't told me anything I keep in this room.",
        "which": "Which one do you mean? Answer with its number.\n{rows}",
        "none_last": "I kept nothing from your last message.",
        "nothing_to_undo": "There is nothing of yours to bring back here.",
        "dont_know": "I don't know: you haven't told me that yet (or asked me to forget it). "
        "If you tell me, I'll remember it.",
    },
    "de": {
        "forgotten": "Vergessen: {what}. Sag „rückgängig“ in den nächsten {minutes} Minuten, "
        "um es zurückzuholen.",
        "none": "Ich habe nichts gespeichert, was du mir über {what} gesagt hast.",
        "none_at_all": "Ich habe nichts gespeichert, was du mir gesagt hast.",
        "remembered": "Notiert: {what}.",
        "you_said": "Du hast mir gesagt: {what}.",
        "they_said": "{who} hat mir gesagt: {what}.",
        "undone": "Zurückgeholt: {what}.",
        "intro": "Ich bin {agent}, ein Assistent, der sich merkt, was du mir erzählst.\n"
        "- Ich bringe es zur Sprache, wenn es passt, und nur wo alle Anwesenden dabei waren, "
        "als du es gesagt hast.\n"
        "- Frag „was weißt du über mich?“, um es zu sehen, und sag „vergiss …“, um etwas "
        "zurückzunehmen (oder {prefix}memory mine und {prefix}memory forget-mine "
        "<key>|all).\n"
        "- In einem Gruppenraum beginne eine Nachricht mit {bare} oder erwähne mich; in "
        "einer Direktnachricht sprich einfach.\n"
        "- {prefix}help listet alle Befehle.",
        "told": "Was du mir gesagt hast:",
        "told_newest": "Was du mir gesagt hast (die neuesten {shown} von {total}):",
        "told_nothing": "Du hast mir nichts gesagt, was ich behalte.",
        "told_nothing_here": "Du hast mir in diesem Raum nichts gesagt, was ich behalte.",
        "which": "Welches meinst du? Antworte mit seiner Nummer.\n{rows}",
        "none_last": "Aus deiner letzten Nachricht habe ich nichts gespeichert.",
        "nothing_to_undo": "Hier gibt es nichts von dir zurückzuholen.",
        "dont_know": "Das weiß ich nicht: du hast es mir noch nicht gesagt (oder mich gebeten, "
        "es zu vergessen). Wenn du es mir sagst, merke ich es mir.",
    },
    "fr": {
        "forgotten": "Oublié : {what}. Dis « annule » dans les {minutes} minutes pour le "
        "retrouver.",
        "none": "Je ne garde rien de ce que tu m'as dit sur {what}.",
        "none_at_all": "Je ne garde rien de ce que tu m'as dit.",
        "remembered": "C'est noté : {what}.",
        "you_said": "Tu m'as dit : {what}.",
        "they_said": "{who} m'a dit : {what}.",
        "undone": "Retrouvé : {what}.",
        "intro": "Je suis {agent}, un assistant qui retient ce que tu lui dis.\n"
        "- Je le rappelle quand c'est utile, et seulement là où tous les présents étaient "
        "là quand tu l'as dit.\n"
        "- Demande « que sais-tu de moi ? » pour le voir, et dis « oublie … » pour reprendre "
        "quelque chose (ou {prefix}memory mine et {prefix}memory forget-mine <key>|all).\n"
        "- Dans un salon de groupe, commence ton message par {bare} ou mentionne-moi ; en "
        "message privé, parle simplement.\n"
        "- {prefix}help liste toutes les commandes.",
        "told": "Ce que tu m'as dit :",
        "told_newest": "Ce que tu m'as dit (les {shown} plus récents sur {total}) :",
        "told_nothing": "Tu ne m'as rien dit que je garde.",
        "told_nothing_here": "Tu ne m'as rien dit que je garde dans ce salon.",
        "which": "Lequel veux-tu dire ? Réponds avec son numéro.\n{rows}",
        "none_last": "Je n'ai rien gardé de ton dernier message.",
        "nothing_to_undo": "Il n'y a rien à toi à retrouver ici.",
        "dont_know": "Je ne le sais pas : tu ne me l'as pas encore dit (ou tu m'as demandé de "
        "l'oublier). Si tu me le dis, je m'en souviendrai.",
    },
    "es": {
        "forgotten": "Olvidado: {what}. Di «deshacer» en los próximos {minutes} minutos para "
        "recuperarlo.",
        "none": "No guardo nada de lo que me dijiste sobre {what}.",
        "none_at_all": "No guardo nada de lo que me dijiste.",
        "remembered": "Anotado: {what}.",
        "you_said": "Me dijiste: {what}.",
        "they_said": "{who} me dijo: {what}.",
        "undone": "Recuperado: {what}.",
        "intro": "Soy {agent}, un asistente que recuerda lo que le cuentas.\n"
        "- Lo menciono cuando importa, y solo donde todos los presentes estaban cuando lo "
        "dijiste.\n"
        "- Pregunta «¿qué sabes de mí?» para verlo, y di «olvida …» para retirar algo (o "
        "{prefix}memory mine y {prefix}memory forget-mine <key>|all).\n"
        "- En una sala de grupo, empieza el mensaje con {bare} o mencióname; en un mensaje "
        "directo, simplemente habla.\n"
        "- {prefix}help lista todos los comandos.",
        "told": "Lo que me dijiste:",
        "told_newest": "Lo que me dijiste (los {shown} más recientes de {total}):",
        "told_nothing": "No me has dicho nada que guarde.",
        "told_nothing_here": "No me has dicho nada que guarde en esta sala.",
        "which": "¿Cuál quieres decir? Responde con su número.\n{rows}",
        "none_last": "No guardé nada de tu último mensaje.",
        "nothing_to_undo": "Aquí no hay nada tuyo que recuperar.",
        "dont_know": "No lo sé: todavía no me lo has dicho (o me pediste que lo olvidara). "
        "Si me lo dices, lo recordaré.",
    },
    "nl": {
        "forgotten": "Vergeten: {what}. Zeg „ongedaan maken” binnen {minutes} minuten om het "
        "terug te halen.",
        "none": "Ik bewaar niets van wat je me over {what} hebt verteld.",
        "none_at_all": "Ik bewaar niets van wat je me hebt verteld.",
        "remembered": "Genoteerd: {what}.",
        "you_said": "Je hebt me verteld: {what}.",
        "they_said": "{who} heeft me verteld: {what}.",
        "undone": "Teruggehaald: {what}.",
        "intro": "Ik ben {agent}, een assistent die onthoudt wat je me vertelt.\n"
        "- Ik breng het ter sprake als het ertoe doet, en alleen waar iedereen die er is "
        "erbij was toen je het zei.\n"
        "- Vraag „wat weet je over mij?” om het te zien, en zeg „vergeet …” om iets terug "
        "te nemen (of {prefix}memory mine en {prefix}memory forget-mine <key>|all).\n"
        "- Begin in een groepsruimte je bericht met {bare} of noem mij; in een privébericht "
        "praat je gewoon.\n"
        "- {prefix}help toont alle commando's.",
        "told": "Wat je me hebt verteld:",
        "told_newest": "Wat je me hebt verteld (de nieuwste {shown} van {total}):",
        "told_nothing": "Je hebt me niets verteld dat ik bewaar.",
        "told_nothing_here": "Je hebt me in deze ruimte niets verteld dat ik bewaar.",
        "which": "Welke bedoel je? Antwoord met het nummer.\n{rows}",
        "none_last": "Van je laatste bericht heb ik niets bewaard.",
        "nothing_to_undo": "Er is hier niets van jou om terug te halen.",
        "dont_know": "Dat weet ik niet: je hebt het me nog niet verteld (of me gevraagd het te "
        "vergeten). Als je het me vertelt, onthoud ik het.",
    },
}
"""Replies to requests in words, in the language the request was made in; "remembered" is
also the acknowledgement of a told fact (``asked.acknowledgement``), "dont_know" the answer
to a question about the person that nothing recalled supports (``asked.dont_know``),
"you_said" the person's own row that answers it when the model's words did not stand on it
(``asked.unsupported``)."""
QUOTES: dict[str, str] = {"en": "“{}”", "de": "„{}“", "fr": "« {} »", "es": "«{}»", "nl": "‘{}’"}
"""How each language quotes the person's own words (a fact that cannot be turned to them)."""


def reply(lang: str, name: str, **values: object) -> str:
    return REPLIES.get(lang, REPLIES["en"])[name].format(**values)


__all__ = ["LANGUAGES", "QUOTES", "REPLIES", "Language", "reply"]

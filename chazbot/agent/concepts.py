"""The words a question about a person is read by, in English, German, French, Spanish and
Dutch (#36, #45): data for ``grounding``, ``question`` and ``answering``.

``CONCEPTS`` are small groups of words that ask the same thing across the five languages
("job", "Beruf", "métier"…; "son", "Sohn", "fils"…); ``KINDS`` what a "which *kind*" question
asks for ("which *sport*": tennis, pádel, judo…). Lowercase, whole tokens as
``memory.tokenize`` cuts them.
"""

from __future__ import annotations

from chazbot.agent.persons import GROUPS as PERSON_GROUPS
from chazbot.agent.persons import KIN
from chazbot.memory.tokenize import STOPWORDS


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


POSSESSIVES = _set(
    "my mine our ours mein meine meinen meinem meiner meines unser unsere unseren unserem "
    "mon ma mes notre nos mi mis nuestro nuestra nuestros nuestras mijn onze ons"
)
NAME = _set(
    "name names named called call calls heißt heisst heißen heiße name namen heet heten naam "
    "appelle appelles appellent nom prénom nombre llama llaman llamo"
)
NUMBER = _set("number numbers nummer numéro número nummer code pin")
FAVOURITE = _set(
    "favourite favorite favourites lieblings favori favorie favorito favorita favoriete "
    "favoriet préféré préférée preferido preferida"
)
ATTRIBUTE = (
    NAME
    | NUMBER
    | FAVOURITE
    | _set("new old current best first last thing things kind sort type neue neuer neues")
    | _set("meilleur meilleure mejor beste besten bester")
)
"""Words that say which attribute of the subject is asked, not what the subject is; a
question for a name (a number) needs a row that names (numbers) its subject."""
PLAIN = _set(
    "new current best first last thing things kind sort type neue neuer neues meilleur "
    "meilleure mejor beste besten bester"
)
"""Attribute words a row need not repeat ("my *new* job")."""
ATTRIBUTE_WORDS = _set(
    "name names named called thing things stuff fact facts info information detail details "
    "favourite favorite live lives"
)
"""Words that name no subject of their own: dropped from what to forget when other words
remain (``forgetting``: in "forget my manager's name" the manager is what names the row; with
another person's manager row about, BM25 gave "name" the higher idf and picked the sister's
name), and the only shared words of a false friend (``asked.false_friend``)."""
GENERIC = _set(
    "go goes went going get gets got make makes made take takes took come comes came last "
    "next year years day days time times usually often always"
)
QUESTION = _set(
    "what who whom whose where when why how which was wer wie wo wann welche welcher welches "
    "welchen warum woher wohin quoi qui où quand comment quel quelle quels quelles que qu "
    "pourquoi qué que quién quien dónde donde cuándo cuando cómo como cuál cual cuáles cuánto "
    "cuántos wat waar wanneer hoe welk welke waarom"
)
WHO = _set("who whom wer qui quién quien")
KIND_ASKERS = _set(
    "what which welche welcher welches welchen welchem quel quelle quels quelles qué cuál "
    "cuáles welk welke"
)
FUNCTION = STOPWORDS | _set(
    "ist sind bin bist war hat habe hast haben der die das den dem des ein eine einen einem "
    "einer und oder in im am an auf zu zum zur von vom mit für bei es er sie ihr ich du dich "
    "dir mich mir uns euch sich nicht noch schon auch denn dann so "
    "est es sont suis êtes le la les l' un une des du de d et ou à au aux en dans sur pour par "
    "avec il elle ils elles je tu nous vous se me te ce cet cette ne pas fait "
    "el los las una unos unas del al y o en con por para es soy eres está están estoy se "
    "lo le les te yo tú él ella ellos su sus "
    "het een is zijn ben bent was van en of op te met voor bij ik jij je hij zij ze wij we "
    "mij me hem haar er dat die deze "
    "something anything etwas irgendetwas quelque chose algo algún alguna iets "
    "doet doe deed macht mache machst fait fais hace haces hizo "
    "waren wart était étaient été sera fue fueron era eran fui será werd geweest"
)
"""Words that say nothing of what is asked, in the five languages."""

CONCEPTS: tuple[frozenset[str], ...] = (
    NAME,
    NUMBER,
    FAVOURITE,
    _set(
        "phone telephone mobile cell telefon telefonnummer handy handynummer téléphone "
        "portable teléfono móvil telefoon telefoonnummer mobiel"
    ),
    _set("email mail courriel correo electrónico"),
    _set("address adresse dirección adres"),
    _set(
        "job jobs work works working worked living profession occupation career beruf arbeit "
        "arbeitet arbeite métier travail travaille trabajo trabaja trabajas baan werk werkt "
        "beroep beruflich"
    ),
    _set(
        "live lives lived wohnt wohne wohnst wohnen lebt leben lebe habite habites "
        "habitent habiter vit vis vive vives vivo viven woont woon wonen moved move "
        "umgezogen gezogen déménagé déménagés mudé mudamos mudado verhuisd"
    ),
    _set("born birthplace geboren née né nés nacido nacida nació nací"),
    _set("birthday birthdays geburtstag anniversaire cumpleaños verjaardag jarig"),
    _set("old age alt alter âge edad años oud leeftijd"),
    _set("colour color farbe couleur kleur"),
    _set(
        "car auto voiture coche wagen drive drives drove driving fahre fährst fährt fahren "
        "conduis conduit conduire conduzco conduces manejo rijd rijdt rijden"
    ),
    _set("bike bicycle fahrrad rad vélo bicicleta fiets"),
    _set(
        "drink drinks drank drinking getränk trinke trinkst trinkt trinken boisson bois boit "
        "boire bebida bebo bebes bebe beber drankje drink drinkt drinken"
    ),
    _set(
        "play plays played playing spiele spielst spielt spielen joue joues jouer juego "
        "juegas juega jugar speel speelt spelen toco tocas toca tocan tocar"
    ),
    _set("food eat essen nourriture plat comida eten"),
    _set(
        "allergy allergies allergic allergie allergien allergisch allergique allergiques "
        "alergia alergias alérgico alérgica allergieën"
    ),
    _set("coffee kaffee café koffie"),
    _set("tea tee thé té thee"),
    _set("chess schach échecs ajedrez schaken schaak"),
    _set("club clubs verein vereniging club"),
    _set("school schule école escuela colegio"),
    _set("monday mondays montag montags lundi lundis lunes maandag maandags"),
    _set("tuesday tuesdays dienstag dienstags mardi mardis martes dinsdag dinsdags"),
    _set("wednesday wednesdays mittwoch mittwochs mercredi mercredis miércoles woensdag woensdags"),
    _set("thursday thursdays donnerstag donnerstags jeudi jeudis jueves donderdag donderdags"),
    _set("friday fridays freitag freitags vendredi vendredis viernes vrijdag vrijdags"),
    _set("saturday saturdays samstag samstags samedi samedis sábado sábados zaterdag zaterdags"),
    _set("sunday sundays sonntag sonntags dimanche dimanches domingo domingos zondag zondags"),
    _set("book buch livre libro boek"),
    _set("grow grew grown growing"),
    _set(
        "study studied studies studying studiert studiere studium étudie étudié études "
        "estudio estudié estudia estudié studeer studeerde studie"
    ),
    _set("meet met meeting"),
    _set("buy bought"),
    _set(
        "speak spoke spoken speaks spreche spricht sprichst parle parles parlé hablo hablas "
        "habla spreek spreekt spreken"
    ),
    _set("ride rode ridden rides riding"),
    _set("teach taught teaches"),
    _set("marry married wedding getrouwd geheiratet marié mariée casado casada"),
    _set("film movie films movies pelicula película"),
    _set(
        "university uni universität hochschule université fac universidad universiteit "
        "college degree studium"
    ),
    _set("garden gardens garten jardin jardín tuin moestuin"),
    _set("milk milch lait leche melk"),
    _set("choir chor chorale coro koor"),
    _set("morning mornings morgens matin matins mañana mañanas ochtend ochtends"),
    *PERSON_GROUPS,
)
"""Words that ask the same thing (in English, German, French, Spanish, Dutch)."""
KINDS: dict[str, frozenset[str]] = {
    "instrument": _set(
        "piano guitar cello violin viola trumpet flute drums saxophone clarinet harp ukulele "
        "trombone oboe accordion keyboard bass klavier geige gitarre trompete flöte violon "
        "drum batterie schlagzeug batería bateria drumstel violoncelle violonchelo "
        "guitare trompette flûte piano violín guitarra trompeta flauta viool gitaar trompet"
    ),
    "sport": _set(
        "football soccer tennis hockey golf rugby basketball volleyball badminton squash "
        "cricket baseball handball swimming running cycling climbing skiing fußball tennis "
        "fútbol baloncesto natación voetbal zwemmen schwimmen natation judo karate padel "
        "pádel yoga boxing boxen rowing rudern aviron remo roeien surfing marathon"
    ),
    "day": _set(
        "monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays "
        "thursdays fridays saturdays sundays montag dienstag mittwoch donnerstag freitag "
        "samstag sonntag montags dienstags mittwochs donnerstags freitags samstags sonntags "
        "lundi mardi mercredi jeudi vendredi samedi dimanche lunes martes miércoles jueves "
        "viernes sábado sábados domingo domingos maandag dinsdag woensdag donderdag vrijdag "
        "zaterdag zondag weekend week-end"
    ),
}
"""Kinds of answer a "which *kind*" question asks, with what is of the kind (a place has no
list: a row names one by a capitalised word after "in", "à", "nach"…, ``grounding``)."""
AGE_WORDS = _set("age âge alter edad leeftijd")
"""What "which *age*" asks is a number (``question.AGE``'s rule), not a kind of thing."""
KIND_WORDS: dict[str, str] = {
    word: kind
    for kind, words in {
        "instrument": _set("instrument instruments instrumento instrumentos"),
        "sport": _set("sport sports deporte deportes sportart race carrera wedstrijd"),
        "day": _set("day days tag tage jour jours día días dag dagen wochentag weekday"),
        "place": _set(
            "place city town village country ort stadt dorf land ville village pays endroit "
            "lieu lugar ciudad pueblo país plaats stad dorp"
        ),
    }.items()
    for word in words
}
CONCEPT_OF: dict[str, frozenset[int]] = {}
for _i, _words in enumerate(CONCEPTS):
    for _w in _words:
        CONCEPT_OF[_w] = CONCEPT_OF.get(_w, frozenset()) | {_i}
OWN_CONCEPTS = frozenset(
    i
    for word in ("job", "live", "born", "birthday", "old", "phone", "email", "address")
    for i in CONCEPT_OF[word]
)
"""What a person has themselves ("my *job*", "my *phone* number", "where do I *live*"): a
question about one of these is about the person, not about someone of theirs."""
RELATIONS = frozenset(
    w
    for group in KIN.values()
    for w in group
    if w not in FUNCTION  # a function word of another language is no relative on its own
)
"""The people a row may be about besides its teller ("my *brother*", "mijn *buurman*"); a
word that is a function word in another language is none on its own (Dutch "nicht", German
"not", is no longer a niece's word at all: ``persons``)."""


__all__ = [
    "AGE_WORDS",
    "ATTRIBUTE",
    "ATTRIBUTE_WORDS",
    "CONCEPTS",
    "CONCEPT_OF",
    "FAVOURITE",
    "FUNCTION",
    "GENERIC",
    "KINDS",
    "KIND_ASKERS",
    "KIND_WORDS",
    "NAME",
    "NUMBER",
    "OWN_CONCEPTS",
    "PLAIN",
    "POSSESSIVES",
    "QUESTION",
    "RELATIONS",
    "WHO",
]

"""What a forget's words and a person's rows are about, by meaning (#45): the data.

The local embedder (multilingual e5-small) squeezes the cosines of a person's short rows
into a narrow band (0.80-0.86), and a row that is near every question (a long one, one with
a reply as its context) comes first for many. Two fixed sets of sentences, in the five
languages, correct for that (``forget_meaning``):

- ``ANCHORS``: questions about a person that name nothing in particular; a row's mean cosine
  to them is how near it is to *any* question, taken off its cosine to the forget's words;
- ``KINDS``: for each kind of thing people tell about themselves, statements of that kind;
  the forget's words and each row are placed among the kinds by their nearest statement, and
  rows of the kind the words name go first ("a qué me dedico" and "For a living I repair
  wind turbines": both of the kind *work*, with no word in common).

Neither set names anything of a test set: they are the kinds of things a person tells.
"""

from __future__ import annotations

ANCHORS: tuple[str, ...] = (
    "What do you know about me?",
    "Tell me something about my life.",
    "What did I tell you?",
    "Was weißt du über mich?",
    "Was habe ich dir erzählt?",
    "Qu'est-ce que tu sais de moi ?",
    "Que t'ai-je raconté ?",
    "¿Qué sabes de mí?",
    "¿Qué te he contado?",
    "Wat weet je over mij?",
    "Wat heb ik je verteld?",
    "something about me",
    "etwas über mich",
    "quelque chose sur moi",
    "algo sobre mí",
    "iets over mij",
)
"""Questions that name nothing: a row near all of them is near every question."""

KINDS: dict[str, tuple[str, ...]] = {
    "home": (
        "I live in a small town.",
        "Ich wohne in einer Wohnung in der Stadt.",
        "Vivo en un piso en el centro.",
    ),
    "work": (
        "I work as an engineer.",
        "Ich arbeite als Lehrerin an einer Schule.",
        "Trabajo de enfermera en un hospital.",
    ),
    "vehicle": (
        "I drive an old car.",
        "Ma voiture est une petite citadine rouge.",
        "Ik rijd in een busje.",
    ),
    "health": (
        "I'm allergic to nuts.",
        "Ich bin allergisch gegen Katzen.",
        "Soy intolerante al gluten.",
    ),
    "animal": (
        "Our dog is called Max.",
        "Unsere Katze heißt Mimi.",
        "Tenemos un perro viejo.",
    ),
    "likes": (
        "My favourite meal is lasagne.",
        "Ich esse am liebsten Pizza.",
        "Me encanta la paella.",
    ),
    "dislikes": (
        "I hate broccoli.",
        "Ich mag keinen Fisch.",
        "No soporto el ajo.",
    ),
    "music": (
        "I play the guitar.",
        "Je joue de la flûte.",
        "Ik speel saxofoon.",
    ),
    "pastime": (
        "I go running on Saturdays.",
        "Ich spiele am Wochenende Tennis.",
        "Juego al fútbol los jueves.",
    ),
    "origin": (
        "I was born in Dublin.",
        "Ich bin in Köln geboren.",
        "Nací en Toledo.",
    ),
    "languages": (
        "I speak a little Italian.",
        "Je parle allemand.",
        "Ik spreek een beetje Spaans.",
    ),
    "studies": (
        "I studied law at university.",
        "Ich habe Physik studiert.",
        "Estudié arquitectura.",
    ),
    "family": (
        "My sister is called Anna.",
        "Mein Bruder heißt Paul.",
        "Mi hijo tiene diez años.",
    ),
    "feelings": (
        "I'm afraid of heights.",
        "J'ai peur du noir.",
        "Ik ben bang voor onweer.",
    ),
    "dates": (
        "My birthday is in May.",
        "Mon anniversaire est le 3 mars.",
        "Mijn verjaardag is in augustus.",
    ),
    "contact": (
        "My phone number is 555 1234.",
        "Meine Adresse ist Hauptstraße 5.",
        "Mi correo es el de siempre.",
    ),
}
"""Kinds of things people tell about themselves, each with three statements of it (more
measured no better, and each is embedded on a process's first forget)."""
JOB_WORDS = frozenset(
    (
        "dedico",
        "dedicas",
        "dedica",
        "dedicamos",
        "dedicarme",
        "curro",
        "curras",
        "boulot",
        "taf",
        "taff",
        "bosse",
        "chamba",
    )
)
"""How people say "work" without a word for it that ``grounding.CONCEPTS`` has ("¿A qué te
*dedicas*?", "mon *boulot*"): counted as the job concept's words when a forget's words are
matched to a row's."""

ASKED: dict[str, tuple[str, ...]] = {
    "home": (
        "Where do I live?",
        "Wo wohne ich?",
        "Où est-ce que j'habite ?",
        "¿Dónde vivo?",
        "Waar woon ik?",
    ),
    "work": (
        "What do I do for a living?",
        "Was mache ich beruflich?",
        "Quel est mon métier ?",
        "¿A qué me dedico?",
        "Wat voor werk doe ik?",
    ),
    "vehicle": (
        "What car do I drive?",
        "Welches Auto fahre ich?",
        "Quelle voiture est-ce que je conduis ?",
        "¿Qué coche tengo?",
        "In welke auto rijd ik?",
    ),
    "health": (
        "What am I allergic to?",
        "Welche Medikamente nehme ich?",
        "Quel est mon problème de santé ?",
        "¿A qué soy alérgico?",
        "Welke medicijnen neem ik?",
    ),
    "animal": (
        "What is my pet called?",
        "Wie heißt mein Haustier?",
        "Comment s'appelle mon animal ?",
        "¿Qué mascota tengo?",
        "Hoe heet mijn huisdier?",
    ),
    "likes": (
        "What is my favourite food?",
        "Was esse ich am liebsten?",
        "Quel est mon plat préféré ?",
        "¿Qué es lo que más me gusta?",
        "Wat is mijn lievelingseten?",
    ),
    "dislikes": (
        "What food do I hate?",
        "Was mag ich gar nicht?",
        "Qu'est-ce que je déteste manger ?",
        "¿Qué no soporto?",
        "Wat lust ik niet?",
    ),
    "music": (
        "Which instrument do I play?",
        "Welches Instrument spiele ich?",
        "De quel instrument est-ce que je joue ?",
        "¿Qué instrumento toco?",
        "Welk instrument bespeel ik?",
    ),
    "pastime": (
        "What do I do in my free time?",
        "Was mache ich am Wochenende?",
        "Quel sport est-ce que je pratique ?",
        "¿Qué hago los domingos?",
        "Wat doe ik in mijn vrije tijd?",
    ),
    "origin": (
        "Where was I born?",
        "Wo bin ich aufgewachsen?",
        "Où suis-je né ?",
        "¿De dónde soy?",
        "Waar ben ik geboren?",
    ),
    "languages": (
        "Which languages do I speak?",
        "Welche Sprachen spreche ich?",
        "Quelles langues est-ce que je parle ?",
        "¿Qué idiomas hablo?",
        "Welke talen spreek ik?",
    ),
    "studies": (
        "What did I study?",
        "Was habe ich studiert?",
        "Qu'est-ce que j'ai étudié ?",
        "¿Qué estudié?",
        "Wat heb ik gestudeerd?",
    ),
    "family": (
        "What is my sister's name?",
        "Wie heißt mein Bruder?",
        "Comment s'appelle ma femme ?",
        "¿Cuántos años tiene mi hijo?",
        "Hoe heet mijn vrouw?",
    ),
    "feelings": (
        "What am I afraid of?",
        "Wovor habe ich Angst?",
        "De quoi ai-je peur ?",
        "¿A qué le tengo miedo?",
        "Waar ben ik bang voor?",
    ),
    "dates": (
        "When is my birthday?",
        "Wann habe ich Geburtstag?",
        "Quand est mon anniversaire ?",
        "¿Cuándo es mi cumpleaños?",
        "Wanneer ben ik jarig?",
    ),
    "contact": (
        "What is my phone number?",
        "Wie ist meine Adresse?",
        "Quel est mon numéro de téléphone ?",
        "¿Cuál es mi correo?",
        "Wat is mijn telefoonnummer?",
    ),
}
"""The same kinds, as a person asks about them: the forget's words ("a qué me dedico") are
placed among the kinds by their nearest question (a question is nearer a question)."""


__all__ = ["ANCHORS", "ASKED", "JOB_WORDS", "KINDS"]

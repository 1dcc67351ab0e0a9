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
        "We moved into a new flat last year.",
        "Ich wohne in einer Wohnung in der Stadt.",
        "J'habite dans une maison à la campagne.",
        "Vivo en un piso en el centro.",
        "Ik woon in een dorp.",
    ),
    "work": (
        "I work as an engineer.",
        "For a living I fix machines.",
        "Ich arbeite als Lehrerin an einer Schule.",
        "Je travaille comme cuisinier dans un restaurant.",
        "Trabajo de enfermera en un hospital.",
        "Ik werk als monteur bij een bedrijf.",
    ),
    "vehicle": (
        "I drive an old car.",
        "Ich fahre einen Kombi.",
        "Ma voiture est une petite citadine rouge.",
        "Mi coche es un todoterreno.",
        "Ik rijd in een busje.",
    ),
    "health": (
        "I'm allergic to nuts.",
        "I take pills for my heart every day.",
        "Ich bin allergisch gegen Katzen.",
        "Je prends un traitement pour l'asthme.",
        "Soy intolerante al gluten.",
        "Ik slik medicijnen voor mijn rug.",
    ),
    "animal": (
        "Our dog is called Max.",
        "I have a cat.",
        "Unsere Katze heißt Mimi.",
        "Notre lapin s'appelle Caramel.",
        "Tenemos un perro viejo.",
        "Onze hamster heet Pip.",
    ),
    "likes": (
        "My favourite meal is lasagne.",
        "I love chocolate.",
        "Ich esse am liebsten Pizza.",
        "Mon plat préféré est la raclette.",
        "Me encanta la paella.",
        "Mijn lievelingseten is stamppot.",
    ),
    "dislikes": (
        "I hate broccoli.",
        "I can't stand garlic.",
        "Ich mag keinen Fisch.",
        "Je déteste les épinards.",
        "No soporto el ajo.",
        "Ik lust geen spruitjes.",
    ),
    "music": (
        "I play the guitar.",
        "Ich spiele Klavier in einer Band.",
        "Je joue de la flûte.",
        "Toco el violín.",
        "Ik speel saxofoon.",
        "I sing in a choir.",
    ),
    "pastime": (
        "I go running on Saturdays.",
        "Every evening I read for an hour.",
        "Ich spiele am Wochenende Tennis.",
        "Je fais du vélo le dimanche.",
        "Juego al fútbol los jueves.",
        "Ik zwem elke woensdag.",
    ),
    "origin": (
        "I was born in Dublin.",
        "I grew up by the sea.",
        "Ich bin in Köln geboren.",
        "Je suis né à Lille.",
        "Nací en Toledo.",
        "Ik ben geboren in Gent.",
    ),
    "languages": (
        "I speak a little Italian.",
        "Ich spreche fließend Französisch.",
        "Je parle allemand.",
        "Hablo inglés y portugués.",
        "Ik spreek een beetje Spaans.",
    ),
    "studies": (
        "I studied law at university.",
        "I have a degree in chemistry.",
        "Ich habe Physik studiert.",
        "J'ai fait des études de lettres.",
        "Estudié arquitectura.",
        "Ik heb economie gestudeerd.",
    ),
    "family": (
        "My sister is called Anna.",
        "My brother lives abroad.",
        "Mein Bruder heißt Paul.",
        "Ma femme s'appelle Claire.",
        "Mi hijo tiene diez años.",
        "Mijn vrouw heet Els.",
    ),
    "feelings": (
        "I'm afraid of heights.",
        "Ich habe Angst vor Hunden.",
        "J'ai peur du noir.",
        "Tengo miedo a volar.",
        "Ik ben bang voor onweer.",
    ),
    "dates": (
        "My birthday is in May.",
        "Mein Geburtstag ist im Juli.",
        "Mon anniversaire est le 3 mars.",
        "Mi cumpleaños es en enero.",
        "Mijn verjaardag is in augustus.",
    ),
    "contact": (
        "My phone number is 555 1234.",
        "My email address is on the card.",
        "Meine Adresse ist Hauptstraße 5.",
        "Mon numéro de téléphone a changé.",
        "Mi correo es el de siempre.",
        "Mijn telefoonnummer is nieuw.",
    ),
}
"""Kinds of things people tell about themselves, each with statements of it."""

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


__all__ = ["ANCHORS", "ASKED", "KINDS"]

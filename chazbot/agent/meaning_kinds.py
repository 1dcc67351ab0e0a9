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
        "On a acheté une maison à la campagne.",
        "Vivo en un piso en el centro.",
        "We zijn verhuisd naar een rijtjeshuis.",
    ),
    "work": (
        "I work as an engineer.",
        "Ich arbeite als Lehrerin an einer Schule.",
        "Je suis comptable dans une petite boîte.",
        "Trabajo de enfermera en un hospital.",
        "Ik ben sinds kort projectleider bij een bouwbedrijf.",
    ),
    "vehicle": (
        "I drive an old car.",
        "Ich habe mir einen gebrauchten Kombi gekauft.",
        "Ma voiture est une petite citadine rouge.",
        "Tengo una furgoneta blanca.",
        "Ik rijd in een busje.",
    ),
    "health": (
        "I'm allergic to nuts.",
        "Ich bin allergisch gegen Katzen.",
        "Je prends des comprimés pour la tension.",
        "Soy intolerante al gluten.",
        "Ik heb last van migraine.",
    ),
    "senses": (
        "I'm short-sighted and wear glasses.",
        "Ich bin auf einem Ohr fast taub.",
        "Je ne vois pas bien les couleurs.",
        "Llevo lentillas desde los quince años.",
        "Mijn ogen zijn slecht, ik zie bijna niets zonder bril.",
    ),
    "animal": (
        "Our dog is called Max.",
        "Unsere Katze heißt Mimi.",
        "On a un hamster et deux poissons rouges.",
        "Tenemos un perro viejo.",
        "Mijn konijn heet Snuffie.",
    ),
    "likes": (
        "My favourite meal is lasagne.",
        "Ich esse am liebsten Pizza.",
        "Mon plat préféré, c'est le couscous.",
        "Me encanta la paella.",
        "Ik ben gek op pannenkoeken.",
    ),
    "dislikes": (
        "I hate broccoli.",
        "Ich mag keinen Fisch.",
        "Je ne supporte pas les champignons.",
        "No soporto el ajo.",
        "Ik lust geen spruitjes.",
    ),
    "diet": (
        "I don't eat meat any more.",
        "Ich lebe seit einem Jahr vegan.",
        "Je ne bois plus d'alcool.",
        "Solo tomo té, nunca café.",
        "Ik drink elke ochtend een glas sap.",
    ),
    "music": (
        "I play the guitar.",
        "Ich spiele seit Jahren Klavier.",
        "Je joue de la flûte.",
        "Toco el violín en una orquesta.",
        "Ik speel saxofoon.",
    ),
    "pastime": (
        "I go running on Saturdays.",
        "Ich spiele am Wochenende Tennis.",
        "Le soir je fais du tricot.",
        "Juego al fútbol los jueves.",
        "Ik verzamel oude munten.",
    ),
    "fan": (
        "I'm a big Liverpool fan.",
        "Ich bin Fan von Borussia Dortmund.",
        "Je supporte l'OM depuis toujours.",
        "Soy del Betis de toda la vida.",
        "Ik ben voor Ajax.",
    ),
    "books": (
        "My favourite book is an old detective novel.",
        "Ich lese gerade einen dicken Roman.",
        "Mon livre préféré est un recueil de poèmes.",
        "Mi libro favorito es una novela de ciencia ficción.",
        "Ik lees elke avond een paar bladzijden.",
    ),
    "screen": (
        "My favourite film is an old western.",
        "Meine Lieblingsserie ist ein Krimi.",
        "Je regarde une série coréenne en ce moment.",
        "Mi película favorita es una comedia.",
        "Ik kijk graag naar oude films.",
    ),
    "travel": (
        "Last summer we went camping in Scotland.",
        "Im Urlaub fahren wir immer an die Ostsee.",
        "Cet été on part en vacances en Grèce.",
        "Hicimos un viaje por Marruecos en Semana Santa.",
        "We gaan elk jaar op wintersport.",
    ),
    "origin": (
        "I was born in Dublin.",
        "Ich bin in Köln geboren.",
        "Je viens de Bretagne.",
        "Nací en Toledo.",
        "Ik kom oorspronkelijk uit Groningen.",
    ),
    "languages": (
        "I speak a little Italian.",
        "Ich lerne gerade Spanisch.",
        "Je parle allemand.",
        "Hablo inglés y francés.",
        "Ik spreek een beetje Spaans.",
    ),
    "studies": (
        "I studied law at university.",
        "Ich habe Physik studiert.",
        "J'ai fait une licence d'histoire.",
        "Estudié arquitectura.",
        "Ik heb een opleiding tot kok gedaan.",
    ),
    "family": (
        "My sister is called Anna.",
        "Mein Bruder heißt Paul.",
        "Ma femme est professeure.",
        "Mi hijo tiene diez años.",
        "Mijn opa woont in een verzorgingshuis.",
    ),
    "friends": (
        "My neighbour Tom helps me in the garden.",
        "Meine Nachbarin gießt unsere Blumen.",
        "Ma copine d'enfance s'appelle Julie.",
        "Mi compañera de trabajo se llama Marta.",
        "Mijn vriendin Sanne woont in Utrecht.",
    ),
    "feelings": (
        "I'm afraid of heights.",
        "Ich habe Angst vor Hunden.",
        "J'ai peur du noir.",
        "Me dan miedo los aviones.",
        "Ik ben bang voor onweer.",
    ),
    "dates": (
        "My birthday is in May.",
        "Unser Hochzeitstag ist im Juli.",
        "Mon anniversaire est le 3 mars.",
        "Mi cumpleaños es el 2 de enero.",
        "Mijn verjaardag is in augustus.",
    ),
    "contact": (
        "My phone number is 555 1234.",
        "Meine Adresse ist Hauptstraße 5.",
        "Mon adresse mail finit par gmail.",
        "Mi correo es el de siempre.",
        "Mijn telefoonnummer begint met 06.",
    ),
    "body": (
        "I'm quite tall, almost two metres.",
        "Ich bin eher klein, knapp 1,60 m.",
        "Je fais du 40 en pantalon.",
        "Peso unos setenta kilos.",
        "Ik heb kort blond haar.",
    ),
    "habits": (
        "I get up at six every morning.",
        "Ich stehe am Wochenende spät auf.",
        "Je me couche tard le week-end.",
        "Desayuno siempre lo mismo.",
        "Ik slaap altijd met het raam open.",
    ),
}
"""Kinds of things people tell about themselves, each with a statement of it in each of the
five languages (each embedded once per embedder and kept: ``forget_meaning``)."""
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
    "senses": (
        "What is wrong with my eyes?",
        "Wie gut höre ich?",
        "Est-ce que je porte des lunettes ?",
        "¿Qué me pasa en la vista?",
        "Hoe zijn mijn ogen?",
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
        "¿Qué es lo que más me gusta comer?",
        "Wat is mijn lievelingseten?",
    ),
    "dislikes": (
        "What food do I hate?",
        "Was mag ich gar nicht essen?",
        "Qu'est-ce que je déteste manger ?",
        "¿Qué comida no soporto?",
        "Wat lust ik niet?",
    ),
    "diet": (
        "What is my diet?",
        "Was trinke ich gern?",
        "Qu'est-ce que je ne mange pas ?",
        "¿Qué bebo por las mañanas?",
        "Wat eet ik niet?",
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
        "Quel est mon passe-temps ?",
        "¿Qué hago los domingos?",
        "Wat is mijn hobby?",
    ),
    "fan": (
        "Which team do I support?",
        "Welchem Verein drücke ich die Daumen?",
        "Quelle équipe est-ce que je supporte ?",
        "¿De qué equipo soy?",
        "Van welke club ben ik fan?",
    ),
    "books": (
        "What is my favourite book?",
        "Welches Buch lese ich gern?",
        "Quel est mon livre préféré ?",
        "¿Qué libro me gusta?",
        "Welk boek heb ik het liefst gelezen?",
    ),
    "screen": (
        "What is my favourite film?",
        "Welche Serie schaue ich?",
        "Quel est mon film préféré ?",
        "¿Qué película me encanta?",
        "Naar welke serie kijk ik?",
    ),
    "travel": (
        "Where did I go on holiday?",
        "Wohin sind wir im Urlaub gefahren?",
        "Où est-ce que je suis parti en vacances ?",
        "¿Adónde fuimos de viaje?",
        "Waar gaan we op vakantie?",
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
    "friends": (
        "Who is my best friend?",
        "Wie heißt meine Nachbarin?",
        "Comment s'appelle ma copine ?",
        "¿Cómo se llama mi compañera de trabajo?",
        "Hoe heet mijn buurman?",
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
        "Wann ist unser Hochzeitstag?",
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
    "body": (
        "How tall am I?",
        "Wie groß bin ich?",
        "Quelle taille je fais ?",
        "¿Cuánto peso?",
        "Welke kleur haar heb ik?",
    ),
    "habits": (
        "When do I get up?",
        "Wann gehe ich ins Bett?",
        "À quelle heure je me couche ?",
        "¿Qué hago cada mañana?",
        "Wat doe ik elke ochtend?",
    ),
}
"""The same kinds, as a person asks about them: the forget's words ("a qué me dedico") are
placed among the kinds by their nearest question (a question is nearer a question)."""


__all__ = ["ANCHORS", "ASKED", "JOB_WORDS", "KINDS"]

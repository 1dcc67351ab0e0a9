"""Requests read whole (#45, helper forget): sentences in no data file, five languages.

Politeness, softeners and modal particles anywhere ("Kannst du bitte *einfach* vergessen …",
"Vergeet *maar gewoon* …", "*Honestly, just* forget …, *ok*?"), openings that ask ("*Would
you be so kind as to* forget", "*Sei so lieb und* vergiss", "*Merci d'*oublier"), a request
inside a longer message, "forget what I just said" said in other words, question-form
remember requests, intros after a greeting ("Hi all! …"); requests about the world never
change memory. On main 64 of these 90 were read as meant.
"""

from __future__ import annotations

import pytest

from chazbot.agent.words import intent, keep_out, worth_keeping

FORGETS = [
    ("Hey, could you maybe just forget where my brother works?", "brother"),
    ("Honestly, just forget my phone number, ok?", "phone number"),
    ("Please, please forget the name of my boss", "boss"),
    ("Would you be so kind as to forget my address?", "address"),
    ("I'd like you to forget what my wife's name is, thanks", "wife"),
    ("Can you forget about my knee surgery please?", "knee surgery"),
    ("You know what, forget what I said about my neighbour.", "neighbour"),
    ("Actually, please just forget that I smoke.", "smoke"),
    ("Vergiss doch bitte mal meine Telefonnummer.", "telefonnummer"),
    ("Kannst du bitte einfach vergessen, wo meine Schwester arbeitet?", "schwester"),
    ("Könntest du eventuell meine Adresse vergessen?", "adresse"),
    ("Sei so lieb und vergiss, wie alt mein Sohn ist.", "sohn"),
    ("Vergiss ruhig, was ich über meine Chefin gesagt habe.", "chefin"),
    ("Bitte vergiss halt einfach meinen Nachnamen.", "nachnamen"),
    ("Oublie donc mon numéro de téléphone, s'il te plaît.", "numéro"),
    ("Est-ce que tu peux oublier où travaille ma sœur ?", "sœur"),
    ("Tu veux bien oublier mon adresse ?", "adresse"),
    ("Merci d'oublier le prénom de mon chef.", "chef"),
    ("Oublie simplement ce que je t'ai dit sur mon voisin.", "voisin"),
    ("Olvida, porfa, mi número de teléfono.", "teléfono"),
    ("¿Puedes olvidar dónde trabaja mi hermana?", "hermana"),
    ("Oye, olvida por favor la edad de mi hijo.", "hijo"),
    ("Olvídate, por favor, de mi dirección.", "dirección"),
    ("¿Podrías olvidar lo que te conté de mi vecino?", "vecino"),
    ("Vergeet even alsjeblieft mijn telefoonnummer.", "telefoonnummer"),
    ("Kun je misschien vergeten waar mijn zus werkt?", "zus"),
    ("Wil je alsjeblieft mijn adres vergeten?", "adres"),
    ("Vergeet maar gewoon hoe oud mijn zoon is.", "zoon"),
    ("Zou je willen vergeten wat ik over mijn buurman zei?", "buurman"),
    ("I changed my mind about something. Please forget where my sister lives.", "sister"),
    ("Ich hab's mir anders überlegt. Vergiss bitte meinen Geburtstag.", "geburtstag"),
    ("J'ai changé d'avis. Oublie mon adresse, s'il te plaît.", "adresse"),
    ("He cambiado de opinión. Olvida mi dirección, por favor.", "dirección"),
    ("Ik ben van gedachten veranderd. Vergeet mijn adres alsjeblieft.", "adres"),
]
FORGET_LAST = [
    "Forget what I wrote a second ago.",
    "Please ignore and forget my last message",
    "Never mind that, forget what I just told you",
    "Forget the thing I just said, please.",
    "Oops, wrong chat, forget that last message.",
    "Vergiss bitte, was ich dir eben erzählt habe.",
    "Vergiss meine letzte Nachricht.",
    "Vergiss das, was ich gerade geschrieben hab.",
    "Oublie ce que je viens de te dire.",
    "Oublie mon dernier message, stp.",
    "Oublie ce que je t'ai écrit juste avant.",
    "Olvida lo que te acabo de escribir.",
    "Olvida mi último mensaje, porfa.",
    "Olvida lo que dije hace un momento.",
    "Vergeet wat ik je net vertelde.",
    "Vergeet mijn laatste bericht even.",
    "Vergeet wat ik zonet zei.",
]
REMEMBERS = [
    ("Could you remember that my son is vegetarian?", "vegetarian"),
    ("Can you please keep in mind that I'm diabetic?", "diabetic"),
    ("Would you remember that my wife's birthday is in June?", "june"),
    ("Könntest du dir merken, dass ich Vegetarier bin?", "vegetarier"),
    ("Kannst du dir bitte merken, dass meine Tochter Lena heißt?", "lena"),
    ("Tu peux retenir que je suis végétarien ?", "végétarien"),
    ("Peux-tu te souvenir que ma fille s'appelle Inès ?", "inès"),
    ("¿Puedes recordar que mi hija se llama Lucía?", "lucía"),
    ("¿Te puedes acordar de que soy vegetariano?", "vegetariano"),
    ("¿Podrías recordar que trabajo de noche?", "noche"),
    ("Kun je onthouden dat ik vegetariër ben?", "vegetariër"),
    ("Wil je onthouden dat mijn dochter Fenna heet?", "fenna"),
    ("Merk dir doch mal, dass mein Auto blau ist.", "blau"),
    ("Onthoud even dat mijn auto blauw is.", "blauw"),
    ("Just remember that my car is blue, ok?", "blue"),
]
INTROS = [
    "Hi everyone, I'm Tom, just joined. What can you do?",
    "Hello there! New here. What do you do?",
    "Hallo zusammen, ich bin Jan und neu hier. Was kannst du?",
    "Hi! Ich bin neu. Was kannst du alles?",
    "Bonjour à tous, je suis Léa, je viens d'arriver. Que peux-tu faire ?",
    "Hola a todos, soy Marta y soy nueva. ¿Qué puedes hacer?",
    "Hoi allemaal, ik ben Daan, net nieuw. Wat kun je?",
    "Hi all! What can you help me with?",
]
WORLD = [
    "Forget the meeting, it's cancelled.",
    "Remove the mushrooms from that recipe, please.",
    "Could you take the nuts out of the cake recipe?",
    "Forget the movie tonight, let's go bowling instead.",
    "Please delete the last line of my email draft.",
    "Vergiss das Meeting, es fällt aus.",
    "Nimm bitte die Pilze aus dem Rezept.",
    "Lösch mal bitte den zweiten Absatz aus meinem Brief.",
    "Oublie la réunion, elle est annulée.",
    "Enlève les champignons de la recette, s'il te plaît.",
    "Olvida la reunión, se ha cancelado.",
    "Quita las setas de la receta, por favor.",
    "Vergeet de vergadering, die gaat niet door.",
    "Haal de champignons even uit het recept.",
    "Don't forget the umbrella tomorrow!",
    "Vergiss nicht, morgen Milch zu kaufen.",
]


@pytest.mark.parametrize(("text", "what"), FORGETS)
def test_a_forget_is_read_past_its_politeness_and_particles(text: str, what: str) -> None:
    found = intent(text)
    assert found is not None and found.kind == "forget", (text, found)
    assert what in found.what.lower(), (text, found)


@pytest.mark.parametrize("text", FORGET_LAST)
def test_forget_what_i_just_said_in_other_words(text: str) -> None:
    found = intent(text)
    assert found is not None and found.kind == "forget_last", (text, found)


@pytest.mark.parametrize(("text", "what"), REMEMBERS)
def test_a_remember_asked_as_a_question_is_a_request(text: str, what: str) -> None:
    found = intent(text)
    assert found is not None and found.kind == "remember", (text, found)
    assert what in found.what.lower(), (text, found)
    assert worth_keeping(text)  # what the person wants kept is kept


@pytest.mark.parametrize("text", INTROS)
def test_an_intro_after_a_greeting_is_an_intro(text: str) -> None:
    found = intent(text)
    assert found is not None and found.kind == "intro", (text, found)
    assert not worth_keeping(text)


@pytest.mark.parametrize("text", WORLD)
def test_a_request_about_the_world_never_changes_memory(text: str) -> None:
    found = intent(text)
    assert found is None or found.kind not in ("forget", "forget_last", "remember"), (text, found)


def test_what_i_just_said_is_never_read_as_everything() -> None:
    """Particles are read past after "what I just said" is read: "forget what I said" with
    "just" dropped would have been a forget of everything."""
    for text in ("Forget what I just said.", "Please just forget what I just wrote, ok?"):
        found = intent(text)
        assert found is not None and found.kind == "forget_last", (text, found)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("👉 Vergiss bitte meine Adresse", "forget"),
        ("✨✨ olvida mi número de teléfono", "forget"),
        ("Deshaz lo que acabas de hacer.", "undo"),
        ("Undo what you just did, please", "undo"),
        ("Maak ongedaan wat je net deed", "undo"),
    ],
)
def test_marks_before_a_request_and_undo_in_other_words(text: str, kind: str) -> None:
    found = intent(text)
    assert found is not None and found.kind == kind, (text, found)


def test_off_the_record_in_other_words_and_not_a_place() -> None:
    assert keep_out("Between you and me: I'm looking for another job.")
    assert keep_out("Entre tú y yo, odio mi trabajo.")
    assert keep_out("Onder ons: ik zoek een andere baan.")
    assert not keep_out("Onder ons huis is een kelder.")  # "below our house"
    assert not keep_out("Between you and me and the dog, we ate it all.")

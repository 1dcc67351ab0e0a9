"""What is kept (#45, helper forget): a message that only asks the bot to do something, in
any of the five languages, is not kept as a thing the person said; questions are not kept;
what tells something of the person is. Sentences in no data file; on main 27 of the 37
requests were kept (and four LoCoMo turns that QA evidence names were dropped, read as
polite through the Dutch "even": politeness is now read in the message's own language).
"""

from __future__ import annotations

import pytest

from chazbot.agent.capture import only_questions
from chazbot.agent.imperative import command
from chazbot.agent.words import keep_out, worth_keeping


def kept(text: str, names: tuple[str, ...] = ("chaz",)) -> bool:
    """As capture decides (``capture._kept`` and ``only_questions``)."""
    return worth_keeping(text, names) and not keep_out(text) and not only_questions(text)


REQUESTS = [
    "Take the nuts out of the cake recipe.",
    "Translate this into French: good morning",
    "Write me a short poem about autumn.",
    "Nimm die Nüsse aus dem Rezept raus.",
    "Übersetz das bitte ins Englische.",
    "Fais-moi une liste de courses.",
    "Escríbeme un poema corto.",
    "Maak een boodschappenlijstje voor me.",
    "Give me three ideas for dinner.",
    "Set a timer for 10 minutes.",
    "Hey chaz, tell me a joke.",
    "Remove the mushrooms from that pasta recipe idea, please.",
    "Forget the meeting, it's cancelled.",
    "Vergiss das Meeting, es fällt aus.",
    "Oublie la réunion, elle est annulée.",
    "Olvida la reunión, se ha cancelado.",
    "Vergeet de vergadering, die gaat niet door.",
    "Could you take the nuts out of the cake recipe?",
    "Make the list shorter.",
    "Mach die Liste kürzer.",
    "Rends la liste plus courte.",
    "Haz la lista más corta.",
    "Maak de lijst korter.",
    "Erzähl mir einen Witz.",
    "Raconte-moi une blague.",
    "Cuéntame un chiste.",
    "Vertel me een mop.",
    "Don't forget the umbrella tomorrow!",
    "Hi all, Priya here, just joined. What are you able to help with?",
    "I'm new here. What can you do?",
    "Ok so what's the weather like in Paris?",
    "Plan a weekend in Lisbon for me.",
    "Plane mir ein Wochenende in Lissabon.",
    "Organise-moi un week-end à Lisbonne.",
    "Planéame un fin de semana en Lisboa.",
    "Plan een weekend in Lissabon voor me.",
    "¿Te puedes acordar del cumpleaños de Ana? Gracias.",
]
TOLD = [
    "I just moved to Berlin.",
    "My son Tim is really into dinosaurs.",
    "We're going to Spain in June, so excited!",
    "Honestly I hate mornings.",
    "Mein Bruder wohnt jetzt in Hamburg.",
    "Ma fille adore le piano.",
    "Mi perro se llama Toby.",
    "Ik werk sinds kort bij een bakkerij.",
    "Remember that my wife is allergic to cats.",
    "Take it from me, the new bakery is great.",
    "Let me tell you, my garden is full of tomatoes this year.",
    "Please note that I changed jobs last month.",
    "Take care! I'll call you after my exam on Friday.",
]


@pytest.mark.parametrize("text", REQUESTS)
def test_a_request_to_the_bot_is_not_kept(text: str) -> None:
    assert not kept(text), text


@pytest.mark.parametrize("text", TOLD)
def test_what_tells_something_is_kept(text: str) -> None:
    assert kept(text), text


def test_a_command_that_tells_of_the_person_is_no_bare_command() -> None:
    assert command("Write me a poem.")
    assert not command("Write down that my sister lives in Gent")  # a remember, read first
    assert not command("Take care!")  # conversation, not a task
    assert not command("Plan my week: I work Monday to Thursday.")

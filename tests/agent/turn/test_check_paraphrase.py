"""The answer check reads a composing model's reply claim by claim (#45, the answer check).

A right answer paraphrased or told in another language than its row stands when each of its
claims is held by one shown row about whom the question asks: by the row's words, their
forms, concepts and cognates, its names and numbers as themselves, or (with the local
embedder) by meaning; a value of the same kind that no such row holds is withheld, in the
five languages. Sentences of no question set.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

import chazbot
from chazbot.agent.grounding import about_whom, clauses, cognate, unsupported, value_words
from chazbot.memory.audience import room_audience
from chazbot.peer import Peer
from tests.agent.test_answers import _config, needs_embedder
from tests.support.standin_chat import OneAnswer

ANN = "@ann:example.org"

TOLD = {
    "brother": "My brother Jakob moved to Tromsø last spring.",
    "cat": "Notre chat s'appelle Moustache.",
    "dog": "Onze hond Bobbie is een dalmatiër.",
    "daughter": "My daughter Ines started medicine at Leiden University in September.",
    "car": "Ich fahre seit Mai einen gebrauchten Toyota Corolla.",
    "grandmother": "Mi abuela Rosario cumplió 88 años en marzo.",
}


@pytest.mark.parametrize(
    ("question", "row", "reply"),
    [
        (
            "Wo wohnt mein Bruder?",
            "brother",
            "Dein Bruder Jakob wohnt jetzt in Tromsø, soweit ich weiß.",
        ),
        ("Wat is de naam van mijn kat?", "cat", "Als ik me niet vergis, heet je kat Moustache."),
        ("What breed is my dog?", "dog", "Going by what you said, Bobbie is a Dalmatian."),
        ("Where does my daughter study?", "daughter", "She is studying medicine in Leiden."),
        ("¿Qué coche tengo?", "car", "Según me contaste, un Toyota Corolla."),
        ("Quel âge a ma grand-mère ?", "grandmother", "Si je me souviens bien : 88."),
    ],
)
def test_a_right_answer_in_other_words_or_another_language_stands(
    question: str, row: str, reply: str
) -> None:
    assert unsupported(question, reply, [TOLD[row]]) == []


@pytest.mark.parametrize(
    ("question", "row", "reply"),
    [  # the same answers with the value swapped for another of its kind
        ("Wo wohnt mein Bruder?", "brother", "Dein Bruder Jakob wohnt in Bergen, soweit ich weiß."),
        ("Wat is de naam van mijn kat?", "cat", "Als ik me niet vergis, heet je kat Minou."),
        ("What breed is my dog?", "dog", "Going by what you said, Bobbie is a poodle."),
        ("Where does my daughter study?", "daughter", "She is studying law in Leiden."),
        ("¿Qué coche tengo?", "car", "Según me contaste, un Honda Civic."),
        ("Quel âge a ma grand-mère ?", "grandmother", "Si je me souviens bien : 91."),
        # a true claim beside an invented one is still an invented claim
        ("Where does my daughter study?", "daughter", "Medicine in Leiden, and she rows too."),
    ],
)
def test_an_invented_value_is_refused(question: str, row: str, reply: str) -> None:
    assert unsupported(question, reply, [TOLD[row]]) != []


def test_filler_claims_nothing_in_the_five_languages() -> None:
    for frame in (
        "If I remember correctly, you told me so",
        "Soweit ich weiß, hast du es mir erzählt",
        "D'après ce que tu m'as dit, si je ne me trompe pas",
        "Según lo que me contaste, si no me equivoco",
        "Volgens wat je me vertelde, als ik het me goed herinner",
    ):
        assert all(not value_words("What?", c) for c in clauses(frame)), frame


def test_cognates_are_one_word_in_two_languages_but_not_two_names() -> None:
    assert cognate("Montréal", "montreal")
    assert cognate("Norwegen", "Noorwegen")
    assert cognate("octopus", "Oktopus")
    assert not cognate("Lena", "Lina")  # short: two names
    assert not cognate("Marius", "Darius")  # another first letter
    assert not cognate("Bergen", "Bremen")


def test_the_row_must_be_about_whom_the_question_asks() -> None:
    assert not about_whom("Where do I live?", "My sister lives in Oslo.")
    assert about_whom("Where do I live?", "I moved to Ghent in 2019.")
    assert not about_whom("What does Ben do?", "I repair boilers.", {"ben"})
    assert about_whom("What does Ben do?", "Ben bakes bread in Ulm.", {"ben"})
    assert not about_whom("Where does my daughter study?", "My son Bas studies law in Groningen.")
    assert about_whom("¿Cuál es mi plato favorito?", "Lo que más me gusta es la fondue.")
    # "our landlord's phone" is not "my phone"
    assert not about_whom("What is my phone number?", "Our landlord's phone number is 0612.")


Ask = Callable[[str, str, str], Awaitable[str]]


async def composing_asker(peer: Peer, facts: list[str]) -> Ask:
    """``facts`` told by Ann in a DM of ``peer``'s agent "chaz" (vectors written), and
    ``ask(question, reply, room)``: the text sent when a composing model replies ``reply``."""
    chaz = peer.agent("chaz")
    dm = room_audience("dm", [ANN], lambda u: True)
    memory = chaz.memory.within(peer.hearing(chaz, ANN, dm))
    for n, fact in enumerate(facts):
        await memory.remember(f"{ANN}/2026-12-08/f{n}", f"{ANN} (2026-12-08): {fact}")
    await peer.memory.wait_vectors(60)
    from chazbot.agent.turn import run_turn

    async def ask(text: str, reply: str, room: str) -> str:
        session = await peer.session(room)
        model = OneAnswer(reply, tools=True)
        return (await run_turn(peer, chaz, session, text, ANN, model, memory)).text

    return ask


@needs_embedder
async def test_a_composing_models_paraphrase_stands_and_its_invention_does_not(
    tmp_path: Path,
) -> None:
    """Through a turn (real SQLite, the local embedder): each right reply stands, each reply
    with a swapped value is withheld, in five languages; a question about someone a shown
    row tells of is checked though it asks no known attribute ("What did Oskar build?")."""
    facts = [
        "Mijn buurman Kees repareert fietsen.",
        "Mein Nachbar Oskar hat im Garten ein Baumhaus gebaut.",
        "Ma sœur Camille habite à Grenoble depuis 2021.",
        "Mi perro se llama Tango y tiene seis años.",
        "My son Felix plays the oboe.",
        "Dirk von nebenan arbeitet in Kassel.",
        "Je suis allergique aux kiwis.",
        "Le frère de Ben, Iker, est menuisier à Pau.",
    ]
    async with chazbot.open(tmp_path, _config(tmp_path, True)) as peer:
        ask = await composing_asker(peer, facts)
        right = [
            ("What does Kees do?", "Kees repairs bikes."),
            ("Was hat Oskar gebaut?", "Oskar hat ein Baumhaus im Garten gebaut."),
            ("Où habite ma sœur ?", "Ta sœur Camille vit à Grenoble."),
            ("¿Cómo se llama mi perro?", "Se llama Tango, si no me equivoco."),
            ("Welk instrument bespeelt mijn zoon?", "Felix speelt oboe."),
            ("Est-ce que j'ai une allergie ?", "Oui, aux kiwis."),
            ("Quel est le métier d'Iker ?", "Iker est menuisier, à Pau."),
        ]
        for n, (question, reply) in enumerate(right):
            assert await ask(question, reply, f"r{n}") == reply, question
        invented = [
            ("What does Kees do?", "Kees repairs cars."),
            ("Was hat Oskar gebaut?", "Oskar hat eine Garage gebaut."),
            ("Où habite ma sœur ?", "Ta sœur Camille vit à Annecy."),
            ("¿Cómo se llama mi perro?", "Se llama Rayo, si no me equivoco."),
            ("Welk instrument bespeelt mijn zoon?", "Felix speelt klarinet."),
            ("¿Cuántos años tiene mi perro?", "Tiene ocho años."),
            # French elisions: "j'ai" is the asker, "d'Iker" someone a row tells of
            ("Est-ce que j'ai une allergie ?", "Oui, aux arachides."),
            ("Quel est le métier d'Iker ?", "Iker est boulanger."),
        ]
        for n, (question, reply) in enumerate(invented):
            assert await ask(question, reply, f"i{n}") != reply, question
        # a place a row names is no one: the model's knowledge of it is not checked
        kassel = "Kassel liegt in Nordhessen."
        assert await ask("Wo liegt Kassel?", kassel, "k") == kassel
        # a request that names someone is the model's to answer
        poem = "Oskar, builder of tree houses, climbs up high."
        assert await ask("Can you write a short poem for Oskar?", poem, "p1") == poem

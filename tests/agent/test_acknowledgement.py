"""The acknowledgement of a told fact and of "remember that …" speaks the person's language
(#36): it was "Noted: …" in English whatever was said ("Meine Katze heißt Minus." got "Noted:
Meine Katze heißt Minus."), and facts told in another language got none at all."""

from __future__ import annotations

from pathlib import Path

import pytest

import chazbot
from chazbot.agent.asked import acknowledgement
from chazbot.agent.turn import run_turn
from chazbot.agent.words import language
from chazbot.config import AgentConfig, Config
from chazbot.memory.audience import room_audience

ALICE = "@alice:example.org"

TOLD = [
    ("My dog is Rex.", "Noted: your dog is Rex."),
    ("Meine Katze heißt Minus.", "Notiert: deine Katze heißt Minus."),
    ("Ich wohne in Hamburg.", "Notiert: „Ich wohne in Hamburg“."),
    ("Mon chien s'appelle Rex.", "C'est noté : ton chien s'appelle Rex."),
    ("J'habite à Lyon.", "C'est noté : « J'habite à Lyon »."),
    ("Mi perro se llama Rex.", "Anotado: tu perro se llama Rex."),
    ("Vivo en Sevilla.", "Anotado: «Vivo en Sevilla»."),
    ("Mijn hond heet Rex.", "Genoteerd: jouw hond heet Rex."),
]

NOT_TOLD = [
    "Wie heißt mein Hund?",
    "Kannst du mein Auto waschen.",
    "Mein Hund ist krank, bitte hilf mir.",
    "Schreib mir ein Gedicht über meinen Hund.",
    "Dis-moi une blague sur mon chat.",
    "¿Dónde vive mi hermana?",
    "Por favor, mi perro necesita un nombre.",
    "Kun je mijn hond een naam geven.",
    # main answered these "Noted: …" in English ("Noted: herinner you morgen …")
    "Entferne die Zwiebeln aus dem Rezept",
    "Quita las cebollas de la receta",
    "Ne retiens pas ça : je cherche un autre travail",
    "herinner me morgen om 9 uur aan de tandarts",
    "Vergiss es, ich mache es selbst",
]


@pytest.mark.parametrize(("text", "noted"), TOLD)
def test_a_told_fact_is_acknowledged_in_its_language(text: str, noted: str) -> None:
    assert acknowledgement(text, ("chaz",)) == noted


@pytest.mark.parametrize("text", NOT_TOLD)
def test_questions_and_requests_get_no_acknowledgement(text: str) -> None:
    assert acknowledgement(text, ("chaz",)) is None


def test_the_language_of_a_statement() -> None:
    assert [language(t) for t, _ in TOLD] == ["en", "de", "de", "fr", "fr", "es", "es", "nl"]
    assert language("The meeting is at 10 in Den Haag.") == "en"


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        # a name is no mark of a language ("Ben": Dutch "am"), the opening word leads a tie,
        # French sets "?" apart (#45: "Quelle voiture a Ben ?" was answered in English)
        ("Quelle voiture a Ben ?", "fr"),
        ("Quelle voiture a Ben?", "fr"),
        ("Quel âge a Winston ?", "fr"),
        ("Wat doet Ben?", "nl"),
        ("Ik ben moe", "nl"),
        ("Welches Auto hat Ben?", "de"),
        ("¿En qué trabaja Ben?", "es"),
        ("What car does Ben drive?", "en"),
        ("Ben is my brother", "en"),
        ("Is Jan home?", "en"),
    ],
)
def test_the_language_of_a_short_question_with_a_name(text: str, lang: str) -> None:
    assert language(text) == lang


async def test_remember_in_words_answers_in_the_persons_language(tmp_path: Path) -> None:
    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        dm = room_audience("dm", [ALICE], lambda u: False)
        alice = chaz.memory.within(peer.hearing(chaz, ALICE, dm))
        session = await peer.session("dm")
        said = await run_turn(
            peer, chaz, session, "Merk dir: mein Hund heißt Rex", ALICE, None, alice
        )
        assert said.text == "Notiert: dein Hund heißt Rex.", said.text
        said = await run_turn(
            peer, chaz, session, "Retiens que ma fille s'appelle Lina", ALICE, None, alice
        )
        assert said.text == "C'est noté : ta fille s'appelle Lina.", said.text
        values = " ".join(h.value for h in await chaz.recall(""))
        assert "mein Hund heißt Rex" in values and "ma fille s'appelle Lina" in values, values

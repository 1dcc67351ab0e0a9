"""Answers about a person that are right (#45): requests read whole, what is kept, the row
that answers chosen by meaning, forgetting by meaning, undo one by one.

Each finding of the issue is reproduced here: pure functions for the word rules, a real peer
(real SQLite; the local multilingual embedder where meaning is the point) and a stand-in
chat model that says the same fused answer whatever it is asked, as the embedded one did.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import chazbot
from chazbot.agent import answering
from chazbot.agent.answering import choose, fits, names, read_question
from chazbot.agent.capture import only_questions
from chazbot.agent.grounding import evidence, grounded, supports
from chazbot.agent.lexicon import LANGUAGES, Language
from chazbot.agent.undo import UndoSlots
from chazbot.agent.words import intent, polished, worth_keeping
from chazbot.config import AgentConfig, Config, EmbeddingConfig, local_embedder_installed
from chazbot.memory.audience import Provenance, room_audience
from chazbot.memory.rows import MemoryRow
from tests.support.standin_chat import OneAnswer

ANN, BEN = "@ann:example.org", "@ben:example.org"
FUSED = "Jonas works as a nurse at the city hospital."
"""What the embedded model said when asked what Jonas does (two rows fused)."""


# ---- requests read whole ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("Forget, please, that I hate olives", "olives"),
        ("Vergiss bitte, dass ich Oliven hasse", "Oliven"),
        ("Oublie, s'il te plaît, que je déteste les olives", "olives"),
        ("Olvida, por favor, dónde vivo", "vivo"),
        ("Vergeet alsjeblieft, dat ik een hond heb", "hond"),
        ("Could you please forget my email address?", "email"),
        ("Please, please forget my bank details", "bank"),
        ("Vergiss doch mal, dass ich Oliven hasse", "Oliven"),
        ("Oublie donc, je te prie, que je déteste les olives", "olives"),
        ("Kun je alsjeblieft vergeten dat ik een hond heb?", "hond"),
        ("Vergeet even mijn adres, graag", "adres"),
    ],
)
def test_politeness_anywhere_is_read_past(text: str, what: str) -> None:
    found = intent(text)
    assert found is not None and found.kind == "forget", text
    assert what in found.what and "please" not in found.what.lower(), found


def test_politeness_keeps_clauses_apart() -> None:
    assert polished("Forget, please, that I hate mushrooms", answering_lang("en")) == (
        "Forget, that I hate mushrooms"
    )
    assert polished("Remove the onions from the recipe, please.", answering_lang("en")) == (
        "Remove the onions from the recipe."
    )


def answering_lang(code: str) -> Language:
    return next(lang for lang in LANGUAGES if lang.code == code)


@pytest.mark.parametrize(
    "text",
    [
        "Hi! I'm Priya and I just joined. What can you do?",
        "Guten Tag! Ich heiße Lena. Was kannst du alles?",
        "Salut ! Je m'appelle Hugo. Que peux-tu faire ?",
        "¡Hola! Me llamo Marta. ¿Qué puedes hacer?",
        "Hallo! Ik heet Daan. Wat kun je allemaal?",
    ],
)
def test_an_intro_inside_a_longer_message(text: str) -> None:
    found = intent(text)
    assert found is not None and found.kind == "intro", text


def test_an_intro_beside_a_fact_of_someone_else_is_not_read_whole() -> None:
    assert intent("My sister moved to Lyon last year and loves it. What can you do?") is None


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("Kannst du dir merken, dass meine Katze Luna heißt?", "Luna"),
        ("Can you remember that my gym is on Elm Street?", "Elm"),
        ("¿Puedes recordar que mi tío se llama Pedro?", "Pedro"),
        ("Kun je onthouden dat mijn zus in Gent woont?", "Gent"),
        ("Peux-tu retenir que mon frère habite à Nantes ?", "Nantes"),
    ],
)
def test_a_request_in_question_form_is_a_request(text: str, what: str) -> None:
    found = intent(text)
    assert found is not None and found.kind == "remember" and what in found.what, text


@pytest.mark.parametrize(
    "text",
    [
        "Forget what I just told you",
        "Vergiss bitte, was ich eben gesagt habe",
        "Oublie ce que je viens d'écrire",
        "Olvida, por favor, lo que acabo de escribir",
        "Vergeet wat ik net gezegd heb",
        "Scratch that, forget what I've just told you",
        "Vergiss bitte das gerade Gesagte",
        "Olvida lo último que dije",
        "Vergeet het vorige bericht",
    ],
)
def test_forget_what_i_just_said(text: str) -> None:
    found = intent(text)
    assert found is not None and found.kind == "forget_last", text


@pytest.mark.parametrize(
    "text",
    [
        "Take the garlic out of that soup recipe, please.",
        "Lösch bitte den letzten Absatz aus dem Brief.",
        "Oublie la piscine demain, il va pleuvoir.",
        "Haal de uien uit de soep alsjeblieft.",
        "Can you remember when the library opens on Sundays?",
        "Quita la sal de la sopa, por favor.",
    ],
)
def test_requests_about_the_world_are_neither_read_nor_kept(text: str) -> None:
    found = intent(text)
    assert found is None or found.kind not in ("forget", "forget_last", "remember"), found
    assert not worth_keeping(text, ("chaz",)) or only_questions(text), text


def test_what_people_tell_is_still_kept() -> None:
    for text in (
        "We moved to Leipzig two years ago and I love it here.",
        "Mein Hund heißt Biscuit.",
        "Remember that epic block in Game 7? He chased him down.",
        "Please note that my flight is at 6.",
    ):
        assert worth_keeping(text, ("chaz",)), text


# ---- the row that answers -----------------------------------------------------------------


def row(text: str, speaker: str = ANN, n: int = 0) -> MemoryRow:
    return MemoryRow(
        doc=n,
        row_id=f"r{n}",
        key=f"{speaker}/2026-12-07/r{n}",
        value=f"{speaker} (2026-12-07): {text}",
        tags=(),
        ts=n,
        order=(n, "e", 0),
        author="agent",
        origin=Provenance("dm", speaker, (speaker,)),
    )


def test_the_subject_must_be_the_rows() -> None:
    jonas = row("My partner Jonas is a carpenter.", n=1)
    nurse = row("I work as a nurse at the city hospital, mostly night shifts.", n=2)
    rows = [(nurse, 0.86), (jonas, 0.84)]  # the asker's own row is nearer by meaning
    assert (
        choose(read_question("What does Jonas do for work?"), rows, answering.AnswerTuning())
        is jonas
    )
    assert choose(read_question("What's my job?"), rows, answering.AnswerTuning()) is nurse


def test_an_untold_attribute_of_a_named_person_is_not_answered() -> None:
    sam = row("My best friend Sam lives in Dublin.")
    tomas = row("Mein Bruder Tomas wohnt in Hamburg und ist Fährkapitän.", n=1)
    for question, only in [
        ("What is Sam's job?", sam),
        ("How old is Tomas?", tomas),
        ("Where does Kees live?", sam),
        ("What is my father's name?", tomas),
    ]:
        assert not fits(evidence(only), read_question(question)), question
    assert fits(
        evidence(tomas), read_question("And what does he do?", "Where does my brother live?")
    )


def test_a_row_of_another_kind_does_not_answer_a_which_kind_question() -> None:
    judo = row("Mon fils Léo fait du judo le mercredi.")
    assert not fits(evidence(judo), read_question("Which school does Léo go to?"))
    assert fits(evidence(judo), read_question("Quel sport fait Léo ?"))
    assert fits(evidence(judo), read_question("Et quel jour ?", "Quel sport fait Léo ?"))


def test_a_which_kind_question_is_not_answered_by_a_row_of_nothing_of_that_kind() -> None:
    born = row("Nací en Bilbao, aunque crecí en Madrid.")
    assert not supports(evidence(born), "Which bank am I with?")
    q = read_question("Which bank am I with?")
    assert (
        choose(q, [(born, 0.9), (row("I drink tea.", n=1), 0.5)], answering.AnswerTuning()) is None
    )


def test_a_favourite_needs_a_row_that_tells_one() -> None:
    raj = row("My husband Raj teaches chemistry at a secondary school.")
    assert not fits(evidence(raj), read_question("What's Raj's favourite band?"))
    film = row("Mon film préféré est Amélie.")
    assert fits(evidence(film), read_question("Was ist mein Lieblingsfilm?"))
    green = row("Me encanta el color verde.")
    assert fits(evidence(green), read_question("¿Cuál es mi color favorito?"))


def test_a_value_of_the_kind_asked_answers_without_the_questions_verb() -> None:
    padel = row("Los sábados juego al pádel con mis amigas.")
    q = read_question("Which sport do I play on Saturdays?")
    assert choose(q, [(padel, 0.5)], answering.AnswerTuning()) is padel
    assert supports(evidence(padel), "¿Qué deporte practico?")
    assert not supports(
        evidence(row("Mi hija juega al pádel.")), "Which sport do I play on Saturdays?"
    )


@pytest.mark.parametrize(
    ("question", "told", "said"),
    [  # right answers a composing model gives in words of its own (#45, the paraphraser)
        ("What does my husband do?", "Mijn man Pieter werkt als buschauffeur.", "A buschauffeur."),
        ("En hoe heet hij? — my man", "Mijn man Pieter werkt als buschauffeur.", "Pieter."),
        ("Et quel jour ? — Léo", "Mon fils Léo fait du judo le mercredi.", "Le mercredi."),
        ("Which sport do I play?", "Los sábados juego al pádel con mis amigas.", "Pádel."),
    ],
)
def test_the_check_keeps_a_right_answer_in_other_words(question: str, told: str, said: str) -> None:
    assert grounded(question, said, [told])


def test_words_alone_do_not_hold_a_value_told_in_another_language() -> None:
    """ "A bus driver." for "buschauffeur": "driver" is held by no word of the row; by words
    alone (no embedder) it is refused, as "A bus mechanic." is: only meaning could tell them
    apart, and the local embedder's does not (docs/measured.md, the answer check by
    meaning). The person is then told the row itself (``asked.unsupported``)."""
    told = ["Mijn man Pieter werkt als buschauffeur."]
    assert not grounded("What does my husband do?", "A bus driver.", told)
    assert not grounded("What does my husband do?", "A bus mechanic.", told)


@pytest.mark.parametrize(
    ("question", "told", "said"),
    [
        ("What is my son's name?", "My son plays the trumpet in the school band.", "Max."),
        ("What does my husband do?", "Mijn man Pieter werkt als buschauffeur.", "A pilot."),
        ("Which sport do I play?", "My daughter plays tennis.", "Tennis."),
        ("What is Sam's job?", "My best friend Sam lives in Dublin.", "Sam works in Dublin."),
    ],
)
def test_the_check_still_refuses_what_no_row_says(question: str, told: str, said: str) -> None:
    assert not grounded(question, said, [told])


def test_spanish_is_told_by_its_opening_marks() -> None:
    from chazbot.agent.words import language

    assert language("¿En qué trabaja Ben?") == "es"
    assert language("En wat doet Ben?") == "nl"


def test_names_are_told_apart_from_nouns() -> None:
    assert names("Comment s'appelle la femme de Ben ?") == {"ben"}
    assert names("Where was I born?") == set()
    assert names("Was ist mein Lieblingsfilm?") == set()
    assert names("Welches Instrument spielt Mia?") == {"mia"}
    assert names("Wo wohnt Ben?") == {"ben"}  # "ben" is a Dutch word, not a German one
    assert names("Wie heißt Ihr Hund?") == set()
    for role in (
        "Where does the admin live?",
        "Was ist das Hobby vom Admin?",
        "In welke auto rijdt de admin?",
        "¿Dónde vive el administrador?",
        "Quel âge a l'admin ?",
    ):
        assert "admin" in names(role), role
    assert names("How do I become an admin?") == set()


needs_embedder = pytest.mark.skipif(
    not local_embedder_installed(), reason="the local multilingual embedder is not installed"
)


def _config(tmp_path: Path, embedder: bool) -> Config:
    return Config(
        state_dir=tmp_path,
        agents=[AgentConfig(name="chaz", capture="messages")],
        embedding=EmbeddingConfig(backend="local") if embedder else None,
    )


@needs_embedder
async def test_one_row_answers_across_languages_never_a_fused_one(tmp_path: Path) -> None:
    async with chazbot.open(tmp_path, _config(tmp_path, True)) as peer:
        model = OneAnswer(FUSED, composes=False)  # as the embedded model declares

        async def say(text: str, room: str, who: str = ANN) -> str:
            audience = room_audience(room, [who], lambda u: True)
            session = await peer.session(room)
            chaz = peer.agent("chaz")
            memory = chaz.memory.within(peer.hearing(chaz, who, audience))
            from chazbot.agent.turn import run_turn

            result = await run_turn(peer, chaz, session, text, who, model, memory)
            return result.text

        chaz = peer.agent("chaz")
        for n, (fact, who) in enumerate(
            [
                ("My partner Jonas is a carpenter.", ANN),
                ("I work as a nurse at the city hospital, mostly night shifts.", ANN),
                ("We moved to Leipzig two years ago and I love it here.", ANN),
                ("Mein Bruder Tomas wohnt in Hamburg und ist Fährkapitän.", ANN),
                ("My dog is called Jack.", BEN),
            ]
        ):
            audience = room_audience(f"tell-{who}", [who], lambda u: True)
            told = chaz.memory.within(peer.hearing(chaz, who, audience))
            await told.remember(f"{who}/2026-12-07/f{n}", f"{who} (2026-12-07): {fact}")
        await peer.memory.wait_vectors(60)
        jonas = await say("What does Jonas do for work?", "ask1")
        assert "carpenter" in jonas and "nurse" not in jonas, jonas
        assert "Leipzig" in await say("Wo wohne ich?", "ask2")
        await say("Where does my brother live?", "ask4")
        follow = await say("And what does he do for a living?", "ask4")
        assert "Fährkapitän" in follow, follow
        for question in (
            "What is Ben's dog called?",
            "How old is Tomas?",
            "What car does Jonas drive?",
            # the admin by role and another member by name: the same honesty, never the
            # model's guess (#45: "The admin's dog is named Jack", invented)
            "Where does the admin live?",
            "Does the admin have a dog, and what's it called?",
        ):
            assert "don't know" in await say(question, "ask5"), question
        for question in ("Wo wohnt Ben?", "Was ist das Hobby vom Admin?"):
            assert "weiß ich nicht" in await say(question, "ask7"), question
        assert not model.seen  # the model was never asked to compose an answer about a person
        # a question about the world that names a place is the model's
        assert await say("What is the capital of Italy?", "ask6") == FUSED


# ---- forgetting ---------------------------------------------------------------------------


def test_every_forget_of_the_window_comes_back_one_by_one() -> None:
    now = [0.0]
    slots = UndoSlots(clock=lambda: now[0])
    first, second = row("a", n=1), row("b", n=2)
    slots.put(ANN, "db", [first])
    slots.put(ANN, "db", [second])
    newest = slots.take(ANN)
    assert newest is not None and newest.rows_in("db") == (second,)
    older = slots.take(ANN)
    assert older is not None and older.rows_in("db") == (first,)
    assert slots.take(ANN) is None
    slots.put(ANN, "db", [first])
    now[0] = 11 * 60.0
    assert slots.take(ANN) is None  # past the window


@needs_embedder
async def test_a_forget_finds_its_row_by_meaning_across_languages(tmp_path: Path) -> None:
    async with chazbot.open(tmp_path, _config(tmp_path, True)) as peer:
        chaz = peer.agent("chaz")
        dm = room_audience("dm", [ANN], lambda u: True)
        memory = chaz.memory.within(peer.hearing(chaz, ANN, dm))
        facts = [
            "My dog is called Biscuit.",
            "We moved to Leipzig two years ago and I love it here.",
            "Honestly I can't stand mushrooms.",
            "I work as a nurse at the city hospital.",
        ]
        for n, fact in enumerate(facts):
            await memory.remember(f"{ANN}/2026-12-07/f{n}", f"{ANN} (2026-12-07): {fact}")
        await peer.memory.wait_vectors(60)

        async def rows() -> list[str]:
            view = await peer.memory.view(chaz.db)
            return sorted(r.value for r in view.visible.values())

        before = await rows()
        reply = (
            await peer.chat(
                "Bitte vergiss, wie mein Hund heißt.", session="dm", sender=ANN, audience=dm
            )
        ).text
        if "1." in reply:  # listed: the person picks
            number = next(line[0] for line in reply.splitlines() if "Biscuit" in line)
            reply = (await peer.chat(number, session="dm", sender=ANN, audience=dm)).text
        after = await rows()
        gone = [r for r in before if r not in after]
        assert len(gone) == 1 and "Biscuit" in gone[0], reply
        reply = (
            await peer.chat(
                "S'il te plaît, oublie où j'habite.", session="dm", sender=ANN, audience=dm
            )
        ).text
        assert "Leipzig" in reply and not any("Leipzig" in r for r in await rows()), reply
        await peer.chat("undo", session="dm", sender=ANN, audience=dm)
        await peer.chat("undo", session="dm", sender=ANN, audience=dm)
        assert await rows() == before


async def test_forget_what_i_just_said_takes_the_previous_message(tmp_path: Path) -> None:
    async with chazbot.open(tmp_path, _config(tmp_path, False)) as peer:
        dm = room_audience("dm", [ANN], lambda u: True)
        await peer.chat("My cat is called Miso.", session="dm", sender=ANN, audience=dm)
        await peer.chat("My locker code is 5520.", session="dm", sender=ANN, audience=dm)
        await peer.wait_captures()
        chaz = peer.agent("chaz")
        reply = (
            await peer.chat(
                "Olvida, por favor, lo que acabo de escribir", session="dm", sender=ANN, audience=dm
            )
        ).text
        view = await peer.memory.view(chaz.db)
        kept = [r.value for r in view.visible.values()]
        assert any("Miso" in v for v in kept) and not any("5520" in v for v in kept), reply
        assert reply.startswith("Olvidado"), reply


async def test_the_bots_own_text_is_in_the_persons_language(tmp_path: Path) -> None:
    async with chazbot.open(tmp_path, _config(tmp_path, False)) as peer:
        dm = room_audience("dm", [ANN], lambda u: True)

        async def say(text: str) -> str:
            return (await peer.chat(text, session="dm", sender=ANN, audience=dm)).text

        assert (await say("Guten Tag! Ich heiße Lena. Was kannst du alles?")).startswith("Ich bin")
        assert (await say("¿Qué sabes de mí?")).startswith("No me has dicho nada")
        assert (await say("Salut ! Je m'appelle Hugo. Que peux-tu faire ?")).startswith("Je suis")


def test_a_follow_up_reaches_the_row_that_names_the_subject() -> None:
    """ "What's my sister's name?" then "And where does she live?": "Ada lives in Porto" is
    about the sister through "My sister is called Ada"; the row that answered the first
    question does not answer the second."""
    named, lives = row("My sister is called Ada.", n=1), row("Ada lives in Porto.", n=2)
    landlord = row("Our landlord's phone number is 0612 555 019.", n=3)
    q = read_question("And where does she live?", "What's my sister's name?")
    q = replace(q, aliases=answering.aliases_of(q, [named, lives]))
    pairs = [(named, 0.0), (lives, 0.0), (landlord, 0.0)]
    assert choose(q, pairs, answering.AnswerTuning(), answered=named) is lives
    assert not fits(evidence(landlord), read_question("What is my phone number?"))


async def test_a_composing_models_answer_about_someone_named_is_checked(tmp_path: Path) -> None:
    """A model that composes keeps answering, but its reply about a person it names must stand
    on a row too: "Kees lives in Amsterdam" was never told."""
    async with chazbot.open(tmp_path, _config(tmp_path, False)) as peer:
        chaz = peer.agent("chaz")
        dm = room_audience("dm", [ANN], lambda u: True)
        memory = chaz.memory.within(peer.hearing(chaz, ANN, dm))
        await memory.remember(
            f"{ANN}/f1", f"{ANN} (2026-12-07): Mijn buurman Kees repareert fietsen."
        )
        session = await peer.session("dm")
        from chazbot.agent.turn import run_turn

        async def ask(text: str, reply: str) -> str:
            model = OneAnswer(reply, tools=True)
            return (await run_turn(peer, chaz, session, text, ANN, model, memory)).text

        assert "don't know" in await ask("Where does Kees live?", "Kees lives in Amsterdam.")
        assert await ask("What does Kees do?", "Kees repairs fietsen.") == "Kees repairs fietsen."
        # "bikes" no word of the row holds: without an embedder the row itself is told
        bikes = await ask("What does Kees do?", "Kees repairs bikes.")
        assert "fietsen" in bikes and "don't know" not in bikes, bikes
        assert await ask("What is the capital of Italy?", "Rome.") == "Rome."
        # someone nobody here told of is the world's: a model that composes knows Einstein
        einstein = "Albert Einstein was the physicist of relativity."
        assert await ask("Who is Einstein?", einstein) == einstein
        assert "don't know" in await ask("How old is Kees?", "Kees is 41.")
        # another member's job is not answered by the asker's own ("For a living I …")
        await memory.remember(f"{ANN}/f2", f"{ANN} (2026-12-07): For a living I fix turbines.")
        ben_dm = room_audience("dm-ben", [BEN], lambda u: True)
        bens = chaz.memory.within(peer.hearing(chaz, BEN, ben_dm))
        await bens.remember(f"{BEN}/f1", f"{BEN} (2026-12-07): I'm a trained pastry chef.")
        job = await ask("What does Ben do for a living?", "He fixes turbines, for a living.")
        assert "don't know" in job and "turbines" not in job, job

"""The row that answers, chosen by meaning, and the answer check that reads it (#45, third pass).

The second blind set's misses by class, each reproduced with sentences of no question set:
a named person's only row answering a question of another attribute (a trap), a row by meaning
held back by a nearer row that could never answer, "where … living" read as a job, a "which
*kind*" question answered by a row that only names whom it asks about, and a composing model's
right answer refused because its row shares no word with the question's predicate. Pure
functions where the rule is lexical; a real peer (real SQLite, the local multilingual
embedder) where meaning is the point.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import chazbot
from chazbot.agent.answering import AnswerTuning, aliases_of, choose, fits, read_question
from chazbot.agent.grounding import evidence, supports
from chazbot.config import AgentConfig, Config, EmbeddingConfig
from chazbot.memory.audience import room_audience
from tests.agent.test_answers import needs_embedder, row
from tests.agent.turn.test_check_paraphrase import composing_asker
from tests.support.standin_chat import OneAnswer

ANN = "@ann:example.org"


def test_a_which_kind_question_is_not_answered_by_a_row_that_only_names_whom_it_asks() -> None:
    nephews = row("My nephews, Tom and Max, both turned ten in May.")
    for question in ("Which school do Tom and Max go to?", "Which club do Tom and Max go to?"):
        assert not supports(evidence(nephews), question), question
        assert choose(read_question(question), [(nephews, 0.86)], AnswerTuning()) is None
    school = row("Tom and Max go to the Montessori school in Delft.", n=1)
    q = read_question("Which school do Tom and Max go to?")
    assert choose(q, [(nephews, 0.86), (school, 0.84)], AnswerTuning()) is school


def test_where_living_asks_a_place_not_a_job() -> None:
    boilers = row("For a living I repair boilers in old houses.")
    assert not fits(evidence(boilers), read_question("Where am I living these days?"))
    assert fits(evidence(boilers), read_question("What do I do for a living?"))
    assert fits(evidence(row("I live in Porto now.")), read_question("Where am I living now?"))


def test_a_row_by_meaning_is_not_held_back_by_a_row_that_could_never_answer() -> None:
    """ "What did I study at university?": the asker's own row is the nearest of those that
    could answer (the brother's row is nearer but about someone else)."""
    geology = row("Back in 2012 I graduated in geology in Bergen.", n=1)
    brother = row("My brother studied law in Leiden.", n=2)
    chess = row("I play chess on Tuesdays.", n=3)
    q = read_question("What did I study at university?")
    assert not fits(evidence(brother), q)
    ranked = [(brother, 0.83), (geology, 0.82), (chess, 0.78)]
    assert choose(q, ranked, AnswerTuning()) is geology
    # two rows of the asker's as near as each other: none is the clear one
    choir = row("I sing in a choir on Fridays.", n=4)
    assert choose(q, [(geology, 0.82), (choir, 0.81)], AnswerTuning()) is None


def test_a_named_persons_only_row_answers_only_when_it_holds_what_is_asked() -> None:
    """The trap rule by meaning (``AnswerTuning.gain``): the row about Inès is nearer her bare
    name than the question when the question asks what the row does not say."""
    ines = row("Ma collègue Inès fait de l'escalade le dimanche.")
    q = read_question("Where does Inès study?")
    assert fits(evidence(ines), q)  # by its words the row could answer: meaning decides
    ident = ines.ident
    tuning = AnswerTuning()
    assert choose(q, [(ines, 0.80)], tuning, bare={ident: 0.85}) is None
    assert choose(q, [(ines, 0.85)], tuning, bare={ident: 0.84}) is ines
    assert choose(q, [(ines, 0.80)], tuning, bare=None) is ines  # no vectors: as before


def _config(tmp_path: Path) -> Config:
    return Config(
        state_dir=tmp_path,
        agents=[AgentConfig(name="chaz", capture="messages")],
        embedding=EmbeddingConfig(backend="local"),
    )


@needs_embedder
async def test_traps_about_a_named_persons_only_row_by_meaning(tmp_path: Path) -> None:
    async with chazbot.open(tmp_path, _config(tmp_path)) as peer:
        chaz = peer.agent("chaz")
        tell = room_audience("tell", [ANN], lambda u: True)
        told = chaz.memory.within(peer.hearing(chaz, ANN, tell))
        facts = [
            "Ma collègue Inès fait de l'escalade le dimanche.",
            "Mein Neffe Jonas spielt Trompete in einer Blaskapelle.",
            "I drink my coffee with oat milk.",
        ]
        for n, fact in enumerate(facts):
            await told.remember(f"{ANN}/2026-12-08/f{n}", f"{ANN} (2026-12-08): {fact}")
        await peer.memory.wait_vectors(60)
        model = OneAnswer("Inès studies in Lyon.", composes=False)
        from chazbot.agent.turn import run_turn

        async def ask(text: str, room: str) -> str:
            session = await peer.session(room)
            audience = room_audience(room, [ANN], lambda u: True)
            memory = chaz.memory.within(peer.hearing(chaz, ANN, audience))
            return (await run_turn(peer, chaz, session, text, ANN, model, memory)).text

        for n, trap in enumerate(["Where does Inès study?", "¿Dónde estudia Jonas?"]):
            reply = await ask(trap, f"trap{n}")
            assert "don't know" in reply or "No lo sé" in reply, (trap, reply)
        assert "escalade" in await ask("Que fait Inès le dimanche ?", "told1")
        assert "Trompete" in await ask("Welches Instrument spielt Jonas?", "told2")
        assert not model.seen


@needs_embedder
async def test_the_check_keeps_a_right_answer_its_row_gives_by_meaning(tmp_path: Path) -> None:
    """A composing model's right answer stands on the row chosen by subject and meaning,
    though that row shares no word with the question's predicate ("unterrichtet" beside
    "teaches"); a value the row does not hold is still withheld."""
    facts = [
        "My wife Ada teaches biology at a high school in Utrecht.",
        "I drink my coffee with oat milk.",
        "Mon frère Paul habite à Rennes.",
    ]
    async with chazbot.open(tmp_path, _config(tmp_path)) as peer:
        ask = await composing_asker(peer, facts)
        right = "Sie unterrichtet Biology, soweit ich weiß."
        assert await ask("Was unterrichtet meine Frau?", right, "a1") == right
        wrong = "Sie unterrichtet Geschichte."
        assert await ask("Was unterrichtet meine Frau?", wrong, "a2") != wrong
        invented = "Paul teaches biology."  # the value is in a row, but not in Paul's
        assert await ask("What does my brother teach?", invented, "a3") != invented


@pytest.mark.parametrize(
    ("question", "told", "right"),
    [
        ("Where does my mother-in-law live?", "Mijn schoonmoeder Ria woont in Utrecht.", True),
        ("Où habite mon beau-père ?", "Mein Schwiegervater wohnt in Linz.", True),
        ("Where does my father-in-law live?", "Mon beau-père Alain vit à Brest.", True),
        ("Où habite ma grand-mère ?", "Mi abuela vive en Cádiz.", True),
        ("Where does my mother-in-law live?", "Ma mère habite à Lyon.", False),
        ("Where does my mother live?", "Mijn schoonmoeder Ria woont in Utrecht.", False),
    ],
)
def test_a_relative_named_by_a_compound_is_one_in_any_language(
    question: str, told: str, right: bool
) -> None:
    assert fits(evidence(row(told)), read_question(question)) is right


def test_what_someone_is_like_is_no_job() -> None:
    """ "Meine Schwester Jana ist sehr hilfsbereit" tells no job: neither words nor meaning
    (its cosine gain was above the trap rule's, measured) may make it answer one."""
    for told, question in [
        ("Meine Schwester Jana ist sehr hilfsbereit.", "Was macht meine Schwester beruflich?"),
        ("Onze buurvrouw Els is gek op katten.", "Wat voor werk doet onze buurvrouw?"),
        ("My best friend Sam lives in Dublin.", "What is Sam's job?"),
    ]:
        assert not fits(evidence(row(told)), read_question(question)), question


def test_the_place_one_goes_to_work_is_no_job() -> None:
    train = row("Ik neem elke dag de trein naar mijn werk in Den Haag.")
    for question in ("Wat is mijn beroep?", "What's my job?"):
        assert not fits(evidence(train), read_question(question)), question
        assert not supports(evidence(train), question), question
    run = row("Salgo a correr cada mañana antes del trabajo.")
    assert not fits(evidence(run), read_question("Wat is mijn beroep?"))
    cook = row("Ich arbeite als Koch in einem Hotel.")
    assert supports(evidence(cook), "Was ist mein Beruf?")


def test_a_follow_up_whats_is_no_name() -> None:
    """ "And what's her job?" after "Where does Anke live?": "what's" owns nothing, so the
    follow-up is about Anke."""
    q = read_question("And what's her job?", "Where does Anke live?")
    assert q.follow_up and q.names == {"anke"}, q
    anke = row("Meine Schwester Anke lebt in Graz und arbeitet als Apothekerin.")
    assert fits(evidence(anke), q)


def test_no_job_is_read_from_a_relative_a_possessive_or_the_name_asked_about() -> None:
    maya = row("My stepdaughter Maya studies law in Glasgow.")
    assert not fits(evidence(maya), read_question("Where does my stepdaughter work?"))
    oliver = row("My grandson Oliver is learning to swim.")
    assert not fits(evidence(oliver), read_question("What does Oliver do for a living?"))
    miner = row("Mein Opa Heinrich war Bergmann im Ruhrgebiet.")
    q = read_question("What did my grandfather do for work?")
    assert fits(evidence(miner), q)  # a German noun is capitalised: "Bergmann" is no name
    assert fits(evidence(miner), replace(q, aliases=aliases_of(q, [miner])))
    uwe = row("Mein Schwager Uwe arbeitet als Tischler in Kassel.")
    assert fits(evidence(uwe), read_question("Was macht Uwe beruflich?"))

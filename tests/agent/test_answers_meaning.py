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

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import chazbot
from chazbot.agent.answering import AnswerTuning, aliases_of, choose, fits, read_question
from chazbot.agent.grounding import evidence, lacks_kind, supports
from chazbot.agent.row_kinds import KIND_NAMES, Kinds, warmed
from chazbot.config import AgentConfig, Config, EmbeddingConfig
from chazbot.memory.audience import room_audience
from chazbot.memory.rows import MemoryRow
from chazbot.peer import Peer
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


async def _told(
    peer: Peer, facts: list[str], model: OneAnswer
) -> Callable[[str, str], Awaitable[str]]:
    """``facts`` kept as Ann's rows (with their vectors); a function asking in a new room of
    hers, answered by ``model`` or from one row."""
    from chazbot.agent.turn import run_turn

    chaz = peer.agent("chaz")
    tell = room_audience("tell", [ANN], lambda u: True)
    told = chaz.memory.within(peer.hearing(chaz, ANN, tell))
    for n, fact in enumerate(facts):
        await told.remember(f"{ANN}/2026-12-08/f{n}", f"{ANN} (2026-12-08): {fact}")
    await peer.memory.wait_vectors(60)
    assert peer.memory.embedder is not None
    assert await warmed(peer.memory.embedder)  # the fixed sentences, as after a first message

    async def ask(text: str, room: str) -> str:
        session = await peer.session(room)
        audience = room_audience(room, [ANN], lambda u: True)
        memory = chaz.memory.within(peer.hearing(chaz, ANN, audience))
        return (await run_turn(peer, chaz, session, text, ANN, model, memory)).text

    return ask


@needs_embedder
async def test_traps_about_a_named_persons_only_row_by_meaning(tmp_path: Path) -> None:
    async with chazbot.open(tmp_path, _config(tmp_path)) as peer:
        facts = [
            "Ma collègue Inès fait de l'escalade le dimanche.",
            "Mein Neffe Jonas spielt Trompete in einer Blaskapelle.",
            "I drink my coffee with oat milk.",
        ]
        model = OneAnswer("Inès studies in Lyon.", composes=False)
        ask = await _told(peer, facts, model)
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


def _row(text: str, n: int) -> MemoryRow:
    return replace(row(text, n=n), row_id=f"k{n}")


@pytest.mark.parametrize(
    ("question", "told", "kind"),
    [
        ("Where do I live these days?", "We bought an old farmhouse near Ghent.", "home"),
        ("Wo wohne ich?", "Since March I rent an attic flat by the harbour.", "home"),
        ("What does my wife do for a living?", "My wife Mira is a midwife.", "work"),
        ("Was arbeitet mein Bruder?", "Mijn broer Sem repareert cv-ketels.", "work"),
        ("¿Cuál es el trabajo de mi hermana?", "Ma sœur Léa est kiné à Nantes.", "work"),
        ("Quel est le métier de Piet ?", "Piet repairs roofs in Delft.", "work"),
    ],
)
def test_a_known_attribute_without_its_words_is_held_by_meaning(
    question: str, told: str, kind: str
) -> None:
    """A row telling a home or a job in words no list has ("farmhouse", "loodgieter", "kiné")
    answers when it tells that kind of thing by meaning (``row_kinds``), not otherwise."""
    q = read_question(question)
    told_row = _row(told, 1)
    of_kind = Kinds({told_row.ident: _profile(kind)})
    other = Kinds({told_row.ident: _profile("pastime")})
    tuning = AnswerTuning()
    assert choose(q, [(told_row, 0.84)], tuning, kinds=of_kind) is told_row
    assert choose(q, [(told_row, 0.84)], tuning, kinds=other) is None


def _profile(kind: str) -> np.ndarray:
    out = np.full(len(KIND_NAMES), -0.01, np.float32)
    out[KIND_NAMES.index(kind)] = 0.02
    return out


def test_within_the_margin_the_kind_asked_and_the_corrected_cosine_decide() -> None:
    """Two of the asker's rows 0.009 apart by cosine: the nearer answers when it tells the kind
    asked and leads by ``hub_lead`` once each row's nearness to any question is taken off;
    not when it tells another kind, nor when the other row leads once corrected."""
    home = _row("Nous avons acheté une petite maison à Hoorn.", 1)
    diet = _row("Sinds vorige maand eet ik geen vlees meer.", 2)
    q = read_question("Where's home for me these days?")
    ranked = [(home, 0.842), (diet, 0.833)]
    tuning = AnswerTuning()
    assert choose(q, ranked, tuning) is None  # no vectors: the margin alone, as before
    rows = {home.ident: _profile("home"), diet.ident: _profile("dislikes")}
    hubs = {home.ident: 0.79, diet.ident: 0.82}  # corrected: 0.052 and 0.013
    kinds = Kinds(rows, _profile("home"), hub=hubs)
    assert choose(q, ranked, tuning, kinds=kinds) is home
    assert choose(q, ranked, tuning, kinds=replace(kinds, asked=_profile("music"))) is None
    near_all = {home.ident: 0.83, diet.ident: 0.80}  # corrected: 0.012 and 0.033
    assert choose(q, ranked, tuning, kinds=replace(kinds, hub=near_all)) is None
    close = {home.ident: 0.80, diet.ident: 0.80}  # corrected: 0.042 and 0.033
    assert choose(q, ranked, tuning, kinds=replace(kinds, hub=close)) is None


@pytest.mark.parametrize(
    ("question", "told", "lacks"),
    [
        ("In welke plaats woon ik tegenwoordig?", "We kochten een huisje in Hoorn.", False),
        ("In which town do I live now?", "Nos mudamos a una casa en Tarifa.", False),
        ("Dans quelle ville habite ma sœur ?", "Meine Schwester zog nach Graz.", False),
        ("In welchem Stockwerk wohne ich?", "We kochten een huisje in Hoorn.", True),
        ("Which floor do I live on?", "Nos mudamos a una casa en Tarifa.", True),
        ("In welke plaats woon ik?", "Ik woon al jaren op een woonboot.", True),
    ],
)
def test_a_which_place_question_is_answered_by_a_place_named(
    question: str, told: str, lacks: bool
) -> None:
    """ "Which town/city/plaats" asks a place, which a row names by a capital after "in",
    "nach", "en"…; a floor is no place, and a row with no place named is none."""
    assert lacks_kind(question, told) is lacks


@pytest.mark.parametrize(
    ("question", "told", "held"),
    [
        ("¿Qué edad tiene mi abuela?", "Meine Oma ist 93 und schwimmt jeden Morgen.", True),
        ("Welches Alter hat mein Opa?", "Mi abuelo cumplió 88 el martes.", True),
        ("Quel âge a mon voisin ?", "Mon voisin est un ancien prof de maths.", False),
        ("How old is my neighbour?", "Mijn buurman is een gepensioneerde visser.", False),
    ],
)
def test_an_age_is_a_number_not_a_kind(question: str, told: str, held: bool) -> None:
    """ "Which age" asks a number ("ist 93", "turned 88"), not a kind of thing whose word the
    row lacks; an article ("un", "een") is no number."""
    assert fits(evidence(row(told)), read_question(question)) is held


@needs_embedder
async def test_a_home_a_job_an_age_told_without_their_words_answer_by_meaning(
    tmp_path: Path,
) -> None:
    """Facts told in five languages in words no list links to what is asked (a cottage, an
    ambulance, "cumplió 91", a house bought): each answers its question in another language;
    untold attributes of the same people stay "I don't know", and an article is no age."""
    async with chazbot.open(tmp_path, _config(tmp_path)) as peer:
        facts = [
            "Since spring I've been renting a tiny cottage outside Galway.",
            "Meine Frau Anke fährt Krankenwagen beim Roten Kreuz.",
            "Mon frère Yann répare des bateaux au port de Brest.",
            "Mi abuelo Paco cumplió 91 en marzo.",
            "Mijn zus Lotte heeft een rijtjeshuis in Zwolle gekocht.",
            "I drink my coffee black, no sugar.",
            "Ich spiele am Wochenende Tennis mit Freunden.",
        ]
        model = OneAnswer("Lotte is 34 and drives a Fiat.", composes=False)
        ask = await _told(peer, facts, model)
        right = {
            "Wo wohne ich?": "Galway",
            "Where's home for me now?": "Galway",
            "Hoe oud is mijn opa?": "91",
            "Wo wohnt meine Schwester?": "Zwolle",
        }
        for n, (question, value) in enumerate(right.items()):
            assert value in await ask(question, f"told{n}"), question
        # a job told as the vehicle one drives: since the kinds grew for forgets (travel,
        # screen…), e5-small places "fährt Krankenwagen" a vehicle before a job by 0.01; the
        # reply may be "I don't know", never another row's value (docs/measured.md, #45)
        reply = await ask("Quel est le métier de ma femme ?", "job")
        assert "Krankenwagen" in reply or "ne le sais pas" in reply, reply
        traps = ["Quel âge a Yann ?", "Welches Auto fährt Lotte?", "How old is my sister?"]
        traps += ["Which floor do I live on?", "What's Paco's job?"]
        for n, trap in enumerate(traps):
            reply = await ask(trap, f"trap{n}")
            assert any(w in reply for w in ("don't know", "weiß ich nicht", "ne le sais")), trap
        assert not model.seen


@pytest.mark.parametrize(
    ("question", "told", "right"),
    [
        ("How old is my grandmother?", "My grandad Ted turned 88 last week.", False),
        ("Hoe oud is mijn opa?", "My grandad Ted turned 88 last week.", True),
        ("¿Qué edad tiene mi abuela?", "Mein Opa ist 90.", False),
        ("Is there anything I can't digest?", "Milch vertrage ich gar nicht.", True),
        ("Was vertrage ich nicht?", "Ich esse keine Nüsse, die vertrage ich nicht.", True),
    ],
)
def test_two_known_relatives_are_not_one_and_nicht_is_none(
    question: str, told: str, right: bool
) -> None:
    """Words of two known concepts are two things, however they start ("grandad" is no
    "grandmother"); German "nicht" is not Dutch "nicht" (a niece) in a row of the asker's."""
    assert fits(evidence(row(told)), read_question(question)) is right


@pytest.mark.parametrize(
    ("question", "right", "other"),
    [
        ("Do I play any music?", "Toco el ukelele desde hace un año.", "I hate coffee."),
        ("Wat drink ik tegenwoordig?", "Ich trinke nur noch grünen Tee.", "Ik ben vegan."),
        ("Qu'est-ce que je bois le matin ?", "I drink oat milk lattes.", "Je suis daltonien."),
    ],
)
def test_within_the_margin_the_only_row_with_a_word_of_what_is_asked_answers(
    question: str, right: str, other: str
) -> None:
    """Rows 0.016 apart by cosine: the one that alone has a word of what is asked (in any of
    the five languages: "play"/"toco", "drink"/"trinke"/"bois") answers, nearest or not;
    when both have one, or neither, none is clear."""
    q = read_question(question)
    told, near = _row(right, 1), _row(other, 2)
    tuning = AnswerTuning()
    assert choose(q, [(near, 0.821), (told, 0.805)], tuning) is told
    twice = _row(right.replace("un año", "dos años"), 3)
    assert choose(q, [(told, 0.821), (twice, 0.815)], tuning) is None


def test_the_kind_asked_goes_before_a_word_another_row_has() -> None:
    """ "Is there any food I really don't like?": the nearest row tells a dislike and leads
    once corrected; a row 0.024 behind it with the only word of "food" (a favourite dish)
    does not take its place."""
    mushrooms = _row("Honestly I can't stand mushrooms.", 1)
    stamppot = _row("Mijn lievelingseten is stamppot.", 2)
    q = read_question("Is there any food I really don't like?")
    ranked = [(mushrooms, 0.864), (stamppot, 0.840)]
    tuning = AnswerTuning()
    rows = {mushrooms.ident: _profile("dislikes"), stamppot.ident: _profile("likes")}
    kinds = Kinds(rows, _profile("dislikes"), hub={mushrooms.ident: 0.786, stamppot.ident: 0.82})
    assert choose(q, ranked, tuning, kinds=kinds) is mushrooms


class _SlowEmbedder:
    """An embedder whose every query takes a while (the local one under load)."""

    name = "test/slow"
    dim: int | None = 4

    def __init__(self) -> None:
        self.calls = 0
        self.gate = asyncio.Event()

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 4), np.float32) / 2

    async def embed_query(self, text: str) -> np.ndarray:
        await self.gate.wait()
        self.calls += 1
        return np.ones(4, np.float32) / 2

    async def aclose(self) -> None:
        return None


async def test_the_kinds_sentences_are_embedded_once_in_the_background() -> None:
    """A question does not wait past ``KindTuning.wait_s`` for the fixed sentences: it is
    answered without kinds while they are embedded, once, for the questions after it."""
    slow = _SlowEmbedder()
    assert not await warmed(slow, 0.05)
    assert not await warmed(slow, 0.05)  # still under way: not started twice
    slow.gate.set()
    assert await warmed(slow)
    made = slow.calls
    assert made > 100
    assert await warmed(slow, 0.0)
    assert slow.calls == made


def test_a_place_named_is_no_answer_by_itself() -> None:
    """ "In which city did I get married?" is not supported by "I was born in London": a
    place named only says a "which city" question could be answered by the row."""
    born = evidence(row("I was born in London."))
    assert not supports(born, "In which city did I get married?")
    assert not lacks_kind("In which city did I get married?", born)

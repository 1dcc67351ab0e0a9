"""Red team of #36's promise: words that act only when meant, honest answers on unseen questions.

A new sentence set (``tests/data/words_rt.json``) and a new honesty set
(``tests/data/honesty_rt.json``) were written before reading how the code handles them, in
English, German, French, Spanish and Dutch, and split into dev and held-out halves before
scoring. On the dev half the intent step misread 22 of 64: "Vergiss nicht, den Müll
rauszubringen" (a thing to do) was kept as a fact, "Forget about the cinema, let's stay in"
forgot the person's best-matching rows, "I'd rather you didn't remember my address" and
"remeber that my car is a red skoda" were not understood. The honesty half showed a reply
about the person standing on a row about someone else ("Where do I live?" -> "Raj lives in
Leicester.") and right rows never recalled across languages ("What is my dentist's name?"
beside "Mein Zahnarzt heißt Dr. Keller."). Each class is tested here with sentences that are
in neither half; the held-out halves are scored by ``bench/honesty.py``, once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chazbot
from chazbot.agent.asked import acknowledgement
from chazbot.agent.grounding import equivalents, grounded, supports
from chazbot.agent.turn import run_turn
from chazbot.agent.words import intent, told
from chazbot.config import AgentConfig, Config
from chazbot.memory.audience import room_audience
from tests.agent.test_words import understood
from tests.support.paths import DATA
from tests.support.standin_chat import OneAnswer

ALICE, BOB = "@alice:example.org", "@bob:example.org"
SENTENCES = json.loads((DATA / "words_rt.json").read_text())


@pytest.mark.parametrize(("lang", "text", "kind", "what"), SENTENCES["dev"])
def test_red_team_words_act_only_when_meant(lang: str, text: str, kind: str, what: str) -> None:
    """The dev half of the red team's set (the held-out half: bench/honesty.py --words-set
    words_rt --half held, once). A question is never kept as a told fact either."""
    assert understood(kind, text, what), (lang, kind, text, intent(text))
    if kind == "question":
        assert told(text) is None, text


@pytest.mark.parametrize(
    "text",
    [
        "Remember to feed the cat tonight",
        "please don't forget to lock the door",
        "Vergiss nicht, die Blumen zu gießen",
        "Denk daran, den Arzt anzurufen",
        "N'oublie pas de le rappeler demain",
        "No olvides sacar la basura",
        "Vergeet niet de vuilnis buiten te zetten",
        "Onthoud om de rekening te betalen",
    ],
)
def test_a_thing_to_do_is_no_fact_to_keep(text: str) -> None:
    """ "remember to …" and its kin in five languages ask for a reminder, not a fact: nothing is
    kept as the person's row and nothing is acknowledged as told."""
    found = intent(text)
    assert found is None or found.kind not in ("forget", "remember"), (text, found)
    assert acknowledgement(text) is None, text


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("Remember that I need to renew my passport", "renew my passport"),
        ("Vergiss nicht: ich muss zu Hause bleiben", "zu Hause bleiben"),
        ("Merk dir, dass ich zu Fuß zur Arbeit gehe", "zu Fuß"),
        ("N'oublie pas que j'adore danser", "danser"),
        ("Recuerda que prefiero viajar en tren", "tren"),
        ("Onthoud dat ik om zeven uur begin", "zeven uur"),
    ],
)
def test_a_fact_that_mentions_a_thing_to_do_is_still_kept(text: str, what: str) -> None:
    found = intent(text)
    assert found is not None and found.kind == "remember" and what in found.what, (text, found)


def test_forget_names_something_of_the_person_or_is_about_the_world() -> None:
    for world in (
        "Forget the onions, we're out",
        "forget about the party, it's cancelled",
        "Vergiss das Kino, wir bleiben zu Hause",
        "Oublie la réunion, elle est annulée",
        "Olvida la fiesta, se canceló",
        "Vergeet het feest, het gaat niet door",
    ):
        found = intent(world)
        assert found is None or found.kind != "forget", (world, found)
    for meant, what in (
        ("Forget my gym locker code", "locker"),
        ("forget what I said about the party", "party"),
        ("Vergiss meinen Geburtstag", "geburtstag"),
        ("Oublie ce que tu sais sur la fête", "fête"),
        ("Olvida mi número de socio", "socio"),
        ("Vergeet ons adres", "adres"),
        ("Forget everything", ""),
    ):
        found = intent(meant)
        assert found is not None and found.kind == "forget", (meant, found)
        assert what in found.what.lower() if what else found.what == "", (meant, found)


def test_a_wish_not_to_be_remembered_is_a_forget_in_five_languages() -> None:
    for text, what in (
        ("I don't want you to remember my salary", "salary"),
        ("Please stop remembering my old phone number", "phone"),
        ("Ich will nicht, dass du dir mein Gehalt merkst", "gehalt"),
        ("Je ne veux pas que tu retiennes mon salaire", "salaire"),
        ("No quiero que recuerdes mi sueldo", "sueldo"),
        ("Ik wil niet dat je mijn salaris onthoudt", "salaris"),
    ):
        found = intent(text)
        assert found is not None and found.kind == "forget", (text, found)
        assert what in found.what.lower() and "merkst" not in found.what, (text, found)
        assert "onthoudt" not in found.what, (text, found)


def test_polite_forms_in_five_languages_and_the_verb_last() -> None:
    """Found by probing beyond both halves: German and Dutch ask politely with the verb last
    ("Kannst du meine Adresse vergessen?"), English with "I need you to", "would you mind";
    "forget I said anything" forgets nothing; "mach das bitte rückgängig" is an undo."""
    for text, what in (
        ("Kannst du meine Adresse vergessen?", "adresse"),
        ("Könntest du bitte meine Telefonnummer vergessen?", "telefonnummer"),
        ("Kannst du meine Adresse aus deinem Gedächtnis löschen?", "adresse"),
        ("Kun je mijn adres vergeten?", "adres"),
        ("Zou je mijn telefoonnummer uit je geheugen willen wissen?", "telefoonnummer"),
        ("I need you to forget my address", "address"),
        ("Would you mind forgetting my address?", "address"),
        ("can u forget my number", "number"),
    ):
        found = intent(text)
        assert found is not None and found.kind == "forget", (text, found)
        assert what in found.what.lower() and "vergessen" not in found.what, (text, found)
    for not_meant in (
        "Kannst du mir helfen?",
        "Kannst du den Termin löschen?",
        "Kannst du mir helfen, das zu vergessen?",
        "Kannst du meinen Geburtstag nicht vergessen?",
        "Kun je me helpen mijn ex te vergeten?",
        "Kun je de afspraak verwijderen?",
        "Hast du meinen Namen vergessen?",
        "Forget I said anything",
    ):
        found = intent(not_meant)
        assert found is None or found.kind != "forget", (not_meant, found)
    undo = intent("Mach das bitte rückgängig")
    assert undo is not None and undo.kind == "undo"


def test_one_slip_of_the_keyboard_in_the_verb_is_understood_and_no_more() -> None:
    for text, kind in (
        ("froget my salary", "forget"),
        ("remmember that my bike is green", "remember"),
        ("vergis mein Passwort", "forget"),
        ("onthod dat mijn fiets groen is", "remember"),
    ):
        found = intent(text)
        assert found is not None and found.kind == kind, (text, found)
    for other in ("Forgot my salary slip at home", "Forge my signature", "forgets my name"):
        found = intent(other)
        assert found is None or found.kind != "forget", (other, found)


def test_a_row_about_someone_named_does_not_answer_about_the_person() -> None:
    key = "alice example org 2026 f1"
    raj, kees = f"{key} Raj lives in Leicester.", f"{key} Kees werkt als bakker."
    assert not supports(raj, "Where do I live?")
    assert not grounded("Where do I live?", "You live in Leicester.", [raj])
    assert not supports(kees, "Was ist mein Beruf?")
    assert not supports(f"{key} Lena arbeitet als Ärztin.", "What is my job?")
    # the person's own words, in any person and language, still answer
    assert supports(f"{key} Ich arbeite als Krankenpfleger.", "Was ist mein Beruf?")
    assert supports(f"{key} Vivo en Madrid.", "Where do I live?")
    assert supports("alice example org job Alice works as a nurse", "What is my job?")
    assert supports(f"{key} My sister Ada lives in Lyon.", "Where does my sister live?")


def test_a_name_the_rows_never_had_is_not_an_answer() -> None:
    """Seen on honesty_unseen's held half (already scored): "Which university do I go to?"
    beside "I study chemistry at university" got "You study chemistry at Harvard University."
    and passed, since one of its words stood on the row. Names are checked as numbers are."""
    key = "alice example org 2026 f1"
    uni = [f"{key} I study chemistry at university."]
    question = "Which university do I go to?"
    assert not grounded(question, "You study chemistry at Harvard University.", uni)
    assert grounded(question, "You study chemistry at university.", uni)
    dune = [f"{key} My favourite book is Dune."]
    assert grounded("What is my favourite book?", "Your favourite book is Dune.", dune)
    assert grounded("What is my favourite book?", "Dune.", dune)
    assert not grounded("What is my favourite book?", "It is Dune by Frank Herbert.", dune)
    graz = [f"{key} Mein Bruder wohnt in Graz."]
    assert grounded("Wo wohnt mein Bruder?", "Dein Bruder wohnt in Graz.", graz)


def test_the_subject_is_searched_in_the_other_languages() -> None:
    assert {"zahnarzt", "tandarts", "dentiste"} <= set(equivalents("What is my dentist's name?"))
    assert "arbeite" in equivalents("Was ist mein Beruf?")
    # attribute words would find every row: a name is asked of everything
    assert not {"name", "nom", "heißt", "called"} & set(equivalents("What is my cat's name?"))
    # friends joined the table with #45 ("Où habite mon meilleur ami ?")
    assert {"ami", "freund", "vriend"} <= set(equivalents("Where does my best friend live?"))


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])


async def test_a_refused_paraphrase_gives_way_to_the_persons_own_row(
    tmp_path: Path, cfg: Config
) -> None:
    """The embedded model answered "What is my father's job?" beside "My father works as a
    carpenter." with "His job is to make furniture.": the check rightly refused words the row
    does not have, and the person got "I don't know" for a fact they had told."""
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        group = room_audience("group", [ALICE, BOB], lambda u: False)
        alice = chaz.memory.within(peer.hearing(chaz, ALICE, group, "!chaz "))
        bob = chaz.memory.within(peer.hearing(chaz, BOB, group, "!chaz "))
        await alice.remember("a/1", "My father works as a carpenter.")
        await bob.remember("b/1", "My mother works as a pilot.")
        model = OneAnswer("His job is to make furniture.")
        session = await peer.session("group")
        result = await run_turn(
            peer, chaz, session, "What is my father's job?", ALICE, model, alice
        )
        assert result.withheld == "His job is to make furniture."
        assert result.text == "You told me: your father works as a carpenter.", result.text
        # Bob's row answers Bob's question, never Alice's: hers is "I don't know"
        model.reply = "Your mother flies planes."
        asked_bob = await run_turn(peer, chaz, session, "What is my mother's job?", BOB, model, bob)
        assert asked_bob.text == "You told me: your mother works as a pilot.", asked_bob.text
        asked = await run_turn(peer, chaz, session, "What is my mother's job?", ALICE, model, alice)
        assert "don't know" in asked.text, asked.text


async def test_a_fact_told_in_one_language_is_found_when_asked_in_another(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        dm = room_audience("dm", [ALICE], lambda u: False)
        alice = chaz.memory.within(peer.hearing(chaz, ALICE, dm, "!chaz "))
        await alice.remember("a/1", "Mein Zahnarzt heißt Dr. Keller.")
        await alice.remember("a/2", "Raj lives in Leicester.")
        model = OneAnswer("Dr. Keller.")
        session = await peer.session("dm")
        result = await run_turn(
            peer, chaz, session, "What is my dentist's name?", ALICE, model, alice
        )
        assert result.text == "Dr. Keller.", result.text
        assert any("Zahnarzt" in str(m.get("content")) for m in model.seen[-1])
        model.reply = "You live in Leicester."
        where = await run_turn(peer, chaz, session, "Where do I live?", ALICE, model, alice)
        assert "don't know" in where.text and where.withheld == "You live in Leicester."

"""A first conversation in words (#17): intents, what is worth keeping, honest answers.

Found by a new user with the embedded model: "Please forget my manager's name." got an
apology and was itself stored; "Hello!" was stored; "What is my cat's name?" got the dog's
name; "What can you do?" got "You can say hello!". Each is reproduced here against a real
peer (real SQLite); the model is a stand-in that calls no tools, as the embedded one.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

import chazbot
from chazbot.agent.capture import capture_turn
from chazbot.agent.turn import run_turn
from chazbot.agent.words import (
    Intent,
    as_said_to_them,
    asks,
    intent,
    keep_out,
    personal,
    worth_keeping,
)
from chazbot.config import AgentConfig, Config
from chazbot.memory.audience import room_audience
from tests.support.paths import DATA
from tests.support.standin_chat import OneAnswer

ALICE, BOB = "@alice:example.org", "@bob:example.org"


def intent_of(text: str) -> Intent:
    found = intent(text)
    assert found is not None, text
    return found


def test_intents_and_what_is_kept() -> None:
    assert intent_of("Please forget my manager's name.").what == "my manager's name"
    assert intent_of("forget everything about me").what == ""
    assert intent_of("What can you do?").kind == "intro"
    assert intent_of("help").kind == "intro"
    assert intent_of("what do you know about me?").kind == "about_me"
    assert intent_of("Remember that my dog is Rex").what == "my dog is Rex"
    for ordinary in ("help me plan a trip", "My dog is Rex.", "What is my dog called?"):
        assert intent(ordinary) is None, ordinary
    for not_kept in ("Hello!", "thanks a lot, chaz", "Please forget my manager's name.", "help"):
        assert not worth_keeping(not_kept, ("chaz",)), not_kept
    for kept in ("My dog is Rex.", "Remember that my dog is Rex", "hello, I moved to Leeds"):
        assert worth_keeping(kept, ("chaz",)), kept
    assert as_said_to_them("My dog is Biscuit and I am allergic to it.") == (
        "Your dog is Biscuit and you are allergic to it."
    )
    assert asks("What is my cat's name?") and personal("What is my cat's name?")
    assert not personal("What is the capital of France?")


async def test_greetings_and_requests_are_not_captured(tmp_path: Path) -> None:
    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="messages")])
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        session = await peer.session("s")
        for text in ("Hello!", "Please forget my manager's name.", "thanks!", "My dog is Rex."):
            await session.add_message("user", text, ALICE)
            await capture_turn(chaz, session, None, "messages", text, ALICE, "ok")
        assert [h.value.split(": ", 1)[1] for h in await chaz.recall("")] == ["My dog is Rex."]


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])


async def test_forget_in_words_takes_only_the_persons_matching_rows(
    tmp_path: Path, cfg: Config
) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        dm = room_audience("dm-alice", [ALICE], lambda u: False)
        group = room_audience("group", [ALICE, BOB], lambda u: False)
        alice = chaz.memory.within(peer.hearing(chaz, ALICE, dm, "!chaz "))
        bob = chaz.memory.within(peer.hearing(chaz, BOB, group, "!chaz "))
        await alice.remember("a/1", "My manager is called Priya.")
        await alice.remember("a/2", "My sister's name is Ada.")
        await bob.remember("b/1", "My manager is called Zed.")
        model = OneAnswer()
        session = await peer.session("dm-alice")

        async def say(text: str) -> str:
            result = await run_turn(peer, chaz, session, text, ALICE, model, alice)
            return result.text

        reply = await say("Please forget my manager's name.")
        assert reply.startswith('Forgotten: "My manager is called Priya.". Say “undo”'), reply
        values = {h.value for h in await chaz.recall("")}
        assert values == {"My sister's name is Ada.", "My manager is called Zed."}  # Bob's stays
        about = await say("What do you know about me?")
        assert "Ada" in about and "Priya" not in about and "Zed" not in about
        intro = await say("What can you do?")
        assert "forget" in intro and "!chaz memory mine" in intro and "!chaz help" in intro
        assert "group room" in intro
        # asked about what was never told, with nothing recalled: no invented answer
        dont = await say("What is my cat's name?")
        assert "don't know" in dont and model.seen == []
        assert await say("Remember that I drive a blue Volvo") == "Noted: You drive a blue Volvo."
        assert any("blue Volvo" in h.value for h in await alice.recall("Volvo"))
        everything = await say("forget everything")
        assert everything.startswith("Forgotten:") and "Ada" in everything, everything
        assert "Volvo" in everything
        assert "haven't told me" in await say("what do you know about me?")
        assert [h.value for h in await chaz.recall("")] == ["My manager is called Zed."]


async def test_forget_in_words_matches_what_a_row_says_not_its_teller_or_day(
    tmp_path: Path, cfg: Config
) -> None:
    """Recall finds a row written during a turn by its teller and the day it was told
    (``view.indexed_tokens``); forgetting by words must not: "forget what I told you about
    <this month>" or "about alice" hides only rows that say so, not every row Alice told this
    month."""
    month = datetime.now(UTC).strftime("%B")
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        dm = room_audience("dm-alice", [ALICE], lambda u: False)
        alice = chaz.memory.within(peer.hearing(chaz, ALICE, dm, "!chaz "))
        await alice.remember("trip", f"My {month} trip is to Lisbon.")
        await alice.remember("pet", "My cat is called Mo.")
        await alice.remember("nick", "Everyone calls me Ali, not Alice.")
        await alice.remember("car", "I drive a blue Volvo.")
        assert {h.key for h in await alice.recall(month)} >= {"trip", "pet", "car"}
        session = await peer.session("dm-alice")

        async def say(text: str) -> str:
            return (await run_turn(peer, chaz, session, text, ALICE, OneAnswer(), alice)).text

        reply = await say(f"Please forget what I told you about {month}.")
        assert "Lisbon" in reply and "called Mo" not in reply and "Volvo" not in reply, reply
        reply = await say("Forget what I said about Alice.")
        assert "Ali, not Alice" in reply and "Volvo" not in reply, reply
        assert {h.key for h in await chaz.recall("")} == {"pet", "car"}


async def test_help_says_how_to_address_the_bot_in_a_group(tmp_path: Path, cfg: Config) -> None:
    async with chazbot.open(tmp_path, cfg) as peer:
        reply = await peer.command("help", prefix="!chaz ")
        assert "In a group room, start a message with !chaz or mention the bot" in reply.text
        assert "a DM (a room of just you and the bot)" in reply.text


SENTENCES = json.loads((DATA / "words_intents.json").read_text())


def understood(kind: str, text: str, what: str) -> bool:
    """Whether ``intent`` reads a labelled sentence as it was meant (bench/words.py scores
    both halves the same way)."""
    got = intent(text)
    if kind == "dont_keep":
        return keep_out(text) and (got is None or got.kind not in ("forget", "remember"))
    if kind in ("world", "question"):
        return got is None or got.kind not in ("forget", "remember")
    if got is None or got.kind != kind:
        return False
    if kind == "forget" and not what:
        return got.what == ""
    return what in got.what.lower()


@pytest.mark.parametrize(("lang", "text", "kind", "what"), SENTENCES["dev"])
def test_words_act_only_when_meant_in_five_languages(
    lang: str, text: str, kind: str, what: str
) -> None:
    """#36: the dev half of the sentence set (the held-out half is scored by bench/words.py,
    once): requests about the world forget nothing, questions are not stored, "forget",
    "remember", "don't keep this" and "undo" in English, German, French, Spanish and Dutch."""
    assert understood(kind, text, what), (lang, kind, text, intent(text))


async def test_a_misread_forget_is_undone_and_the_world_keeps_its_onions(
    tmp_path: Path, cfg: Config
) -> None:
    """#36: "Remove the onions from the recipe please" and three other world requests hid the
    person's best-matching rows at once, with no way back; "Remember when we went to Paris?"
    was stored as a fact; "Vergiss mein WLAN-Passwort" was kept as a memory."""
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        dm = room_audience("dm-alice", [ALICE], lambda u: False)
        alice = chaz.memory.within(peer.hearing(chaz, ALICE, dm, "!chaz "))
        await alice.remember("a/1", "My onion soup recipe uses three onions.")
        await alice.remember("a/2", "The team meeting is on my calendar for Monday.")
        await alice.remember("a/3", "Mein WLAN-Passwort ist tulip-42.")
        await alice.remember("a/4", "My friend Ines moved to Porto.")
        model = OneAnswer()
        session = await peer.session("dm-alice")

        async def say(text: str) -> str:
            result = await run_turn(peer, chaz, session, text, ALICE, model, alice)
            return result.text

        for text in (
            "Remove the onions from the recipe please",
            "Delete the meeting from my calendar",
            "Forget it, I'll do it myself",
            "Drop me a line when you are free",
            "Remember when we went to Paris?",
        ):
            await say(text)
        assert len(await chaz.recall("")) == 4  # nothing forgotten, nothing stored
        german = await say("Vergiss mein WLAN-Passwort")
        assert german.startswith("Vergessen:") and "rückgängig" in german, german
        assert "tulip-42" not in {h.value for h in await chaz.recall("")}
        # "undo" in words brings it back, once; in French too for the next one
        assert (await say("Mach das rückgängig")).startswith("Zurückgeholt")
        assert any("tulip-42" in h.value for h in await chaz.recall("WLAN"))
        assert "nichts" in await say("rückgängig")
        french = await say("Oublie ce que je t'ai dit sur Ines")
        assert french.startswith("Oublié") and "Porto" in french, french
        assert (await say("annule")).startswith("Retrouvé")
        assert len(await chaz.recall("")) == 4
        # another person cannot undo Alice's forget
        await say("vergiss mein WLAN-Passwort")
        bob = room_audience("dm-alice", [BOB], lambda u: False)
        as_bob = chaz.memory.within(peer.hearing(chaz, BOB, bob, "!chaz "))
        result = await run_turn(peer, chaz, session, "undo", BOB, model, as_bob)
        assert "nothing" in result.text
        assert not any("tulip-42" in h.value for h in await chaz.recall("WLAN"))


async def test_dont_keep_this_is_not_captured(tmp_path: Path) -> None:
    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="messages")])
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        session = await peer.session("s")
        for text in (
            "Don't keep this: I'm thinking of quitting my job",
            "Merk dir das nicht: ich suche eine neue Stelle",
            "Off the record, my boss is awful",
            "Remember when we went to Paris?",
            "My cat is called Miso",
        ):
            await session.add_message("user", text, ALICE)
            await capture_turn(chaz, session, None, "messages", text, ALICE, "ok")
        values = " ".join(h.value for h in await chaz.recall(""))
        assert "Miso" in values, values
        for kept_out in ("quitting", "Stelle", "boss", "Paris"):
            assert kept_out not in values, values


def test_an_answer_about_the_person_stands_on_a_row_about_it() -> None:
    """#36: five never-told questions after five facts were told got invented answers: "What
    is my son's name?" -> "Lina's son's name is Lina." (Lina is the daughter), "What is my
    phone number?" -> the landlord's. Checked after the model answers, for every model."""
    from chazbot.agent.grounding import grounded

    shown = [
        "My daughter is called Lina.",
        "Our landlord's phone number is 0612 555 019.",
        "I was born in London.",
        "My son goes to Hillside Primary.",
        "I play the cello in an orchestra.",
    ]
    invented = [
        ("What is my son's name?", "Lina's son's name is Lina."),
        ("What is my son's name?", "My son's name is Hillside Primary."),
        ("What is my favourite film?", 'Lina\'s favorite film is "The Godfather".'),
        ("In which city did I get married?", "You got married in London."),
        ("What is my phone number?", "My phone number is 0612 555 019."),
        ("How old is my daughter?", "Lina is 12 years old."),
        ("What is my wife's job?", "Your wife plays the cello."),
    ]
    for question, reply in invented:
        assert not grounded(question, reply, shown), (question, reply)
    right = [
        ("What is my daughter's name?", "Your daughter is called Lina."),
        ("Which school does my son go to?", "Hillside Primary."),
        ("Where was I born?", "You were born in London."),
        ("Which instrument do I play?", "The cello."),
        ("What is the landlord's number?", "0612 555 019"),
    ]
    for question, reply in right:
        assert grounded(question, reply, shown), (question, reply)
    assert not grounded("What is my daughter's name?", "Lina.", [])  # nothing shown


async def test_forget_mine_is_undone_like_a_forget_in_words(tmp_path: Path, cfg: Config) -> None:
    """#36: one rule for forgetting by command, in words and on the page: it hides at once and
    can be brought back for 10 minutes (by command or by saying undo)."""
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        dm = room_audience("dm-alice", [ALICE], lambda u: False)
        alice = chaz.memory.within(peer.hearing(chaz, ALICE, dm, "!chaz "))
        await alice.remember("a/1", "My wifi password is tulip-42.")

        async def cmd(text: str, who: str = ALICE) -> str:
            heard = room_audience("dm-alice", [who], lambda u: False)
            reply = await peer.command(text, session="dm-alice", sender=who, audience=heard)
            return reply.text

        forgot = await cmd("/memory forget-mine all")
        assert "Undo within 10 minutes" in forgot and "/memory undo" in forgot, forgot
        assert await chaz.recall("wifi") == []
        assert "nothing of yours" in await cmd("/memory undo", who=BOB)
        assert "Brought back 1 row" in await cmd("/memory undo")
        assert [h.value for h in await chaz.recall("wifi")] == ["My wifi password is tulip-42."]
        assert "nothing of yours" in await cmd("/memory undo")  # once


async def test_the_prefix_travels_in_the_hearing_from_chat_to_the_answer(
    tmp_path: Path, cfg: Config
) -> None:
    """``peer.chat(prefix=…)`` puts the prefix in the turn's ``Hearing``; the answer in words
    names commands as they are written there (no loose parameter down the turn)."""
    async with chazbot.open(tmp_path, cfg) as peer:
        matrix = await peer.chat("What can you do?", session="m", sender=ALICE, prefix="!chaz ")
        assert "!chaz help" in matrix.text and "/help" not in matrix.text, matrix.text
        terminal = await peer.chat("What can you do?", session="t")
        assert "/help" in terminal.text and "!chaz" not in terminal.text, terminal.text
        chaz = peer.agent("chaz")
        assert peer.hearing(chaz, ALICE, None, "!chaz ").prefix == "!chaz "

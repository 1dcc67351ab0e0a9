"""A row is always forgettable by its key (issue #47): a key of a Unicode digit (``²``) made
``forget-mine`` raise (``isdigit()`` then ``int()``: a 500 with a traceback on the memory
page), and a key of plain digits (``5``) was read as a list number, so its Forget button could
not remove it. Now a key is taken for a list number only when it is plain ASCII digits within
the person's last list; ``forget-mine key <key>`` and the page's button always name a key; in
words, "forget 5 from your memory" finds the row keyed ``5``. Every other ``isdigit()`` that
fed ``int()`` answers such text with one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import chazbot
from chazbot.agent.turn import run_turn
from chazbot.config import AgentConfig, Config
from chazbot.memory.audience import room_audience
from chazbot.peer import Peer
from tests.support.standin_chat import OneAnswer
from tests.support.web import ALICE, BOB, browser_session, my_page_csrf, said, serving, web_config

DM = room_audience("dm-alice", {ALICE}, lambda u: False)
DIGIT_KEYS = ["²", "5", "٣", "0", "٣٤", "12"]
"""Keys that read as digits one way or another: a superscript, plain ASCII, Arabic-Indic."""


async def alice(peer: Peer, text: str) -> tuple[bool, str]:
    reply = await peer.command(text, sender=ALICE, session="dm-alice", audience=DM, prefix="!chaz ")
    assert "Traceback" not in reply.text, reply.text
    assert reply.ok or "\n" not in reply.text, reply.text  # an error is one line
    return reply.ok, reply.text


async def keys_of(peer: Peer, person: str = ALICE) -> set[str]:
    chaz = peer.agent("chaz")
    return {
        r.key
        for r in await chaz.memory.within(peer.hearing(chaz, person, DM)).said_by(person, True)
    }


@pytest.mark.parametrize("key", DIGIT_KEYS)
async def test_forget_mine_takes_any_digit_key_without_a_list(tmp_path: Path, key: str) -> None:
    """No ``mine`` was run: nothing can be a list number, so the words are a key."""
    async with chazbot.open(tmp_path / "s", web_config(tmp_path / "s")) as peer:
        await said(peer, ALICE, key, f"the row keyed {key}")
        await said(peer, ALICE, "other", "another row")
        await said(peer, BOB, key, "Bob's row of the same key", room="matrix:!bob:example.org")
        ok, text = await alice(peer, f"/memory forget-mine {key}")
        assert ok and text.startswith(f"Forgot {key!r} (1 row)."), text
        assert await keys_of(peer) == {"other"}
        assert await keys_of(peer, BOB) == {key}  # never anyone else's


async def test_a_number_is_a_number_only_in_ascii_and_within_the_list(tmp_path: Path) -> None:
    async with chazbot.open(tmp_path / "s", web_config(tmp_path / "s")) as peer:
        for i in range(3):
            await said(peer, ALICE, f"note{i}", f"note number {i}")
        for key in ("5", "²", "all"):
            await said(peer, ALICE, key, f"the row keyed {key}")
        ok, text = await alice(peer, "/memory mine")
        assert ok and "6 rows you said" in text, text
        listed = [line for line in text.splitlines() if re.match(r"[0-9]+\. ", line)]
        # "5" is within the list of 6: the row shown as 5
        shown_fifth = listed[4].split(". ", 1)[1].split(" (chaz", 1)[0]
        ok, text = await alice(peer, "/memory forget-mine 5")
        assert ok and text.startswith(f"Forgot 5: {shown_fifth}"), text
        # "²" is no ASCII digit: always its key, whatever the list holds
        ok, text = await alice(peer, "/memory forget-mine ²")
        assert ok and text.startswith("Forgot '²' (1 row)."), text
        # "key 5" and "key all" name keys, whatever a number or "all" would mean
        if "5" in await keys_of(peer):
            ok, text = await alice(peer, "/memory forget-mine key 5")
            assert ok and text.startswith("Forgot '5' (1 row)."), text
        ok, text = await alice(peer, "/memory forget-mine key all")
        assert ok and text.startswith("Forgot 'all' (1 row)."), text
        assert "5" not in await keys_of(peer) and "all" not in await keys_of(peer)
        assert len(await keys_of(peer)) >= 2  # the notes not named stay
        # digits past the list that are no key: the list's bounds, as before
        ok, text = await alice(peer, "/memory forget-mine 99")
        assert not ok and "your last list has rows 1 to 6, not 99" in text, text
        ok, text = await alice(peer, "/memory forget-mine keys 5")
        assert not ok and "forget-mine key <key>" in text, text


async def test_the_pages_forget_button_removes_a_row_of_any_key(tmp_path: Path) -> None:
    """Real HTTP: the Forget button of rows keyed ``5``, ``²`` and ``all`` (a list of more
    than five rows shown first), and ``?page=²``: each answered, never a 500."""
    async with serving(tmp_path) as (peer, base):
        keys = ["5", "²", "all", "٣"]
        for i in range(6):
            await said(peer, ALICE, f"note{i}", f"note number {i}")
        for key in keys:
            await said(peer, ALICE, key, f"the row keyed {key}")
        await alice(peer, "/memory mine")  # a list in which 5 is a number
        async with browser_session() as client:
            csrf = await my_page_csrf(client, peer, base, ALICE)
            async with client.get(f"{base}/ui/me", params={"page": "²"}) as page:
                assert page.status == 200 and "Traceback" not in await page.text()
            for key in keys:
                async with client.post(
                    f"{base}/ui/me/forget", data={"csrf": csrf, "key": key, "back": "/ui/me"}
                ) as page:
                    assert page.status == 200, (key, page.status)
                    text = await page.text()
                    assert "Traceback" not in text
                    assert "(1 row)" in text, (key, text)
                assert key not in await keys_of(peer)
        assert await keys_of(peer) == {f"note{i}" for i in range(6)}


@pytest.mark.parametrize("key", ["5", "²", "42"])
async def test_a_row_is_forgotten_by_its_key_in_words(tmp_path: Path, key: str) -> None:
    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        memory = chaz.memory.within(peer.hearing(chaz, ALICE, DM, "!chaz "))
        await memory.remember(key, "the locker code is tulip")
        await memory.remember("pet", "My cat is called Miso.")
        session = await peer.session("dm-alice")
        result = await run_turn(
            peer, chaz, session, f"forget {key} from your memory", ALICE, OneAnswer(), memory
        )
        assert result.text.startswith('Forgotten: "the locker code is tulip"'), result.text
        assert [r.key for r in await memory.said_by(ALICE)] == ["pet"]


@pytest.mark.parametrize("text", ["²", "٣", "¹²", "5²"])
async def test_commands_taking_a_number_answer_any_digit_in_one_line(
    tmp_path: Path, text: str
) -> None:
    """Every command whose argument went through ``isdigit()`` then ``int()``."""
    async with chazbot.open(tmp_path / "s", web_config(tmp_path / "s")) as peer:
        for line, why in [
            (f"/reminders cancel {text}", "no reminder"),
            (f"/sharing approve {text}", "a request id is a number"),
            (f"/sharing reject {text}", "a request id is a number"),
            (f"/memory config set max_entries {text}", "max_entries takes a whole number"),
        ]:
            reply = await peer.command(line)
            assert not reply.ok and why in reply.text, (line, reply.text)
            assert "Traceback" not in reply.text and "\n" not in reply.text, reply.text

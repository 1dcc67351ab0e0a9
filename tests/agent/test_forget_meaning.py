"""Forgetting by meaning (#45, helper forget): a forget finds the person's row by meaning and
across languages, with no word in common ("Vergiss bitte, wo wir wohnen" and "Nous habitons
dans un petit village près de Grenoble"); when it is not clear it lists the near rows,
numbered, in the person's language, and a number answers; nothing else is forgotten; "nothing
kept" is never said while a row is near by meaning; every forget of the window comes back,
one "undo" each.

A real peer (real SQLite, the local multilingual embedder); the facts and forgets are
``tests/data/forget_meaning.json``, written before the scorer was tuned. On main 13 of its 18
forgets forgot the fact and nothing else (four were not read as forgets: "wo *wir* wohnen",
"qué instrumento *toco*"; one forgot the wrong row); here 18, 11 of them without a list.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import chazbot
from chazbot.agent.forget_meaning import ranked
from chazbot.agent.words import intent
from chazbot.config import AgentConfig, Config, EmbeddingConfig, local_embedder_installed
from chazbot.memory.audience import room_audience
from chazbot.memory.rows import MemoryRow
from chazbot.peer import Peer

ANN = "@ann:example.org"
SET = json.loads((Path(__file__).parents[1] / "data" / "forget_meaning.json").read_text())
UNDO = {"en": "undo", "de": "rückgängig", "fr": "annule", "es": "deshacer", "nl": "herstel"}
WHICH = {
    "en": ("Which one", "Do you mean this?"),
    "de": ("Welches meinst", "Meinst du das?"),
    "fr": ("Lequel", "C'est bien ceci ?"),
    "es": ("¿Cuál", "¿Te refieres a esto?"),
    "nl": ("Welke bedoel", "Bedoel je dit?"),
}
needs_embedder = pytest.mark.skipif(
    not local_embedder_installed(), reason="the local multilingual embedder is not installed"
)


def _config(tmp_path: Path, embedder: bool = True) -> Config:
    return Config(
        state_dir=tmp_path,
        agents=[AgentConfig(name="chaz", capture="messages")],
        embedding=EmbeddingConfig(backend="local") if embedder else None,
    )


def test_every_forget_of_the_set_is_read_as_a_forget() -> None:
    for lang, text, _ in SET["forgets"]:
        found = intent(text)
        assert found is not None and found.kind == "forget" and found.what, (text, found)
        assert found.lang == lang, (text, found)


async def _told(peer: Peer) -> None:
    """The set's facts as Ann's rows in her DM, with their vectors."""
    chaz = peer.agent("chaz")
    dm = room_audience("dm", [ANN], lambda u: True)
    memory = chaz.memory.within(peer.hearing(chaz, ANN, dm))
    for n, (_, fact) in enumerate(SET["facts"]):
        await memory.remember(f"{ANN}/2026-12-07/m{n}", f"{ANN} (2026-12-07): {fact}")
    await peer.memory.wait_vectors(120)


@needs_embedder
async def test_a_forget_finds_its_row_by_meaning_and_forgets_nothing_else(tmp_path: Path) -> None:
    async with chazbot.open(tmp_path, _config(tmp_path)) as peer:
        await _told(peer)
        chaz = peer.agent("chaz")
        dm = room_audience("dm", [ANN], lambda u: True)
        facts = [text for _, text in SET["facts"]]

        async def rows() -> list[str]:
            view = await peer.memory.view(chaz.db)
            return sorted(r.value for r in view.visible.values())

        async def say(text: str) -> str:
            return (await peer.chat(text, session="dm", sender=ANN, audience=dm)).text

        told = await rows()
        right, alone, missed = 0, 0, []
        for lang, request, index in SET["forgets"]:
            fact = facts[index]
            before = await rows()
            reply = await say(request)
            assert "nothing" not in reply.lower() and "nichts" not in reply.lower(), reply
            listed = re.findall(r"^(\d+)\. (.+)$", reply, re.MULTILINE)
            if listed:
                assert reply.startswith(WHICH[lang]), reply  # asked in the person's language
                pick = [n for n, line in listed if line == fact]
                reply = await say(pick[0] if pick else "1")
            else:
                alone += 1
            gone = [r for r in before if r not in await rows()]
            if len(gone) == 1 and gone[0].endswith(fact):
                right += 1
            else:
                missed.append((request, reply))
            assert len(gone) <= 1, (request, gone)  # nothing else forgotten
        assert right >= 17, missed  # 13 of 18 on main
        assert alone >= 6  # a clear match is forgotten without asking
        for lang, _, _ in reversed(SET["forgets"]):
            await say(UNDO[lang])
        assert await rows() == told  # every forget of the window, one undo each


@needs_embedder
async def test_a_forget_of_something_never_told_forgets_nothing(tmp_path: Path) -> None:
    async with chazbot.open(tmp_path, _config(tmp_path)) as peer:
        await _told(peer)
        chaz = peer.agent("chaz")
        dm = room_audience("dm", [ANN], lambda u: True)
        view = await peer.memory.view(chaz.db)
        before = len(view.visible)
        for text in ("Vergiss bitte meine Schuhgröße.", "Forget which bank I'm with."):
            await peer.chat(text, session="dm", sender=ANN, audience=dm)
            view = await peer.memory.view(chaz.db)
            assert len(view.visible) == before, text


async def test_without_an_embedder_the_words_still_find_the_row(tmp_path: Path) -> None:
    async with chazbot.open(tmp_path, _config(tmp_path, embedder=False)) as peer:
        dm = room_audience("dm", [ANN], lambda u: True)
        for text in ("My dog is called Biscuit.", "Mijn zus woont in Gent."):
            await peer.chat(text, session="dm", sender=ANN, audience=dm)
        await peer.wait_captures()
        reply = (
            await peer.chat("Please forget my dog's name.", session="dm", sender=ANN, audience=dm)
        ).text
        assert reply.startswith("Forgotten") and "Biscuit" in reply, reply
        view = await peer.memory.view(peer.agent("chaz").db)
        assert [r.value for r in view.visible.values() if "Gent" in r.value]


def _row(n: int, text: str) -> MemoryRow:
    return MemoryRow(
        n, f"r{n}", f"ann/2026-12-07/{n:08x}", f"ann (2026-12-07): {text}", (), n, (n, "e", 0), "a"
    )


async def test_whom_the_words_name_counts_without_an_embedder() -> None:
    rows = [_row(1, "Ma mère habite à Lyon."), _row(2, "Mon père vit à Nantes.")]
    best = (await ranked(None, rows, "wo mein Vater wohnt"))[0][0]
    assert best.doc == 2

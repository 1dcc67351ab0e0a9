"""Forgets by meaning, the classes the third question set showed (#45, helper forget): a
favourite of another kind is not the one named ("my favourite book" is not the favourite
film); a row about someone of the person's is not their own ("what I do for work" is not the
colleague's job); when no row is clear, several are listed and none is forgotten until the
person answers. Sentences of no question set; a real peer and the local embedder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import chazbot
from chazbot.agent.forget_meaning import of_someone
from chazbot.config import AgentConfig, Config, EmbeddingConfig, local_embedder_installed
from chazbot.memory.audience import room_audience

ANN = "@ann:example.org"
needs_embedder = pytest.mark.skipif(
    not local_embedder_installed(), reason="the local multilingual embedder is not installed"
)
TOLD = [
    "Mi película favorita es Casablanca, la he visto veinte veces.",
    "Mein Kollege Tim arbeitet als Koch in einem Hotel am Hafen.",
    "Ik geef les op een basisschool in Zwolle, groep zes.",
    "We've got a tortoise called Dolores who is older than me.",
    "Je me lève tous les jours à cinq heures pour courir.",
    "Meine Lieblingsfarbe ist Dunkelgrün.",
]


def test_a_row_about_someone_of_the_persons_is_told_apart() -> None:
    assert of_someone("Mein Kollege Tim arbeitet als Koch in einem Hotel am Hafen.")
    assert of_someone("Anyway, so my aunt Rosa finally retired from the post office.")
    assert not of_someone("Ik geef les op een basisschool in Zwolle, groep zes.")
    assert not of_someone("My favourite colour is green.")
    assert not of_someone("I moved in with my brother last year.")  # the person first


@needs_embedder
async def test_a_favourite_of_another_kind_is_never_forgotten_alone(tmp_path: Path) -> None:
    cfg = Config(
        state_dir=tmp_path,
        agents=[AgentConfig(name="chaz", capture="messages")],
        embedding=EmbeddingConfig(backend="local"),
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        dm = room_audience("dm", [ANN], lambda u: True)

        async def say(text: str) -> str:
            return (await peer.chat(text, session="dm", sender=ANN, audience=dm)).text

        for fact in TOLD:
            await say(fact)
        await peer.wait_captures()
        await peer.memory.wait_vectors(120)

        async def count() -> int:
            return len((await peer.memory.view(peer.agent("chaz").db)).visible)

        before = await count()
        for never in (
            "Forget my favourite book.",
            "Vergeet mijn lievelingsboek.",
            "Olvida mi canción favorita.",
        ):
            reply = await say(never)
            assert await count() == before, (never, reply)  # nothing forgotten
        reply = await say("Forget what I do for work.")  # told in Dutch; a colleague's in German
        listed = re.findall(r"^(\d+)\. (.+)$", reply, re.MULTILINE)
        assert await count() == before, reply  # Tim's job is not forgotten as the person's
        assert len(listed) >= 2, reply  # asked which: several, the right one among them
        pick = next(n for n, line in listed if "basisschool" in line)
        reply = await say(pick)
        assert "basisschool" in reply and await count() == before - 1, reply

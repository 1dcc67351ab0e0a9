"""A message taken back takes its captured rows with it (SPEC §5c), through the peer: real
SQLite files and the stand-in LLM. Only its speaker (or, for a redaction, someone the room
lets redact) takes it back, only in its own room, and only rows still as captured go: a key
rewritten since by another message stays. The Matrix side is ``test_matrix_redaction``.
"""

from __future__ import annotations

from pathlib import Path

import chazbot
from chazbot.ledger.entry import Entry
from chazbot.peer import Peer
from tests.agent.test_capture import ALICE, BOB, captured, config
from tests.support.standin_llm import StandinLLM


async def tell(peer: Peer, text: str, session: str, message_id: str, sender: str = ALICE) -> None:
    result = await peer.chat(text, session=session, sender=sender, message_id=message_id)
    assert result.ok, result.text
    await peer.wait_captures()


async def values(peer: Peer) -> list[str]:
    return sorted(h.value for h in await captured(peer))


async def test_only_the_speaker_in_the_same_room_takes_a_message_back(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm, capture="facts")) as peer:
        await tell(peer, "my locker is L-1", "room-a", "$one")
        await tell(peer, "my bike is red", "room-a", "$two")
        assert len(await values(peer)) == 2

        assert await peer.unsay("room-b", "$one", ALICE) == 0  # another room's message
        assert await peer.unsay("room-a", "$one", BOB) == 0  # not Bob's to take back
        assert await peer.resay("room-a", "$one", "my locker is HACKED", BOB) == 0
        assert await peer.resay("room-b", "$one", "my locker is HACKED", ALICE) == 0
        assert await peer.unsay("room-a", "$unknown", ALICE) == 0
        assert any("L-1" in v for v in await values(peer))

        # A moderator's redaction, or the speaker's own: the row goes, in a signed entry.
        db = peer.agent("chaz").db
        before = len(await peer.ledger.entries(db))
        assert await peer.unsay("room-a", "$one", BOB, may_redact_others=True) == 1
        assert not any("L-1" in v for v in await values(peer))
        raw = await peer.ledger.entries(db)
        assert len(raw) == before + 1
        last = Entry.decode(raw[-1][1])
        assert last.author == peer.agent("chaz").memory.key.public
        assert all(op["row"].get("forget") is True for op in last.ops["memory"])
        assert await peer.unsay("room-a", "$one", ALICE) == 0  # gone already
        # The message and the reply to it left the history the model is shown.
        seen = [m.content for m in await (await peer.session("room-a")).history()]
        assert "my locker is L-1" not in seen and len(seen) == 2, seen  # bike and its reply
        assert seen[0] == "my bike is red"

        # An edit by the speaker replaces the rows; empty new words only forget.
        assert await peer.resay("room-a", "$two", "my bike is blue", ALICE) == 1
        shown = await values(peer)
        assert any("blue" in v for v in shown) and not any("red" in v for v in shown), shown
        seen = [m.content for m in await (await peer.session("room-a")).history()]
        assert "my bike is blue" in seen and "my bike is red" not in seen, seen
        assert await peer.resay("room-a", "$two", "", ALICE) == 0
        assert await values(peer) == []

    async with chazbot.open(tmp_path, config(tmp_path, standin_llm, capture="facts")) as peer:
        await tell(peer, "my city is Lyon", "room-a", "$three")
        await tell(peer, "my city is Paris", "room-a", "$four")  # the same key, rewritten
        assert await peer.unsay("room-a", "$three", ALICE) == 0  # its row was replaced
        assert any("Paris" in v for v in await values(peer))
        assert await peer.unsay("room-a", "$four", ALICE) == 1
        assert await values(peer) == []


async def test_with_capture_off_a_redaction_still_leaves_the_history(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm, capture="facts")) as peer:
        assert (await peer.command("/memory capture off", session="quiet")).ok
        await tell(peer, "my pin is P-1", "quiet", "$pin")
        await tell(peer, "my dog is Rex", "quiet", "$dog")
        assert await values(peer) == []  # nothing captured
        assert await peer.unsay("quiet", "$pin", ALICE) == 0
        seen = [m.content for m in await (await peer.session("quiet")).history()]
        assert not any("P-1" in text for text in seen), seen
        assert seen[0] == "my dog is Rex"


async def test_messages_capture_an_edit_keeps_the_key_with_the_new_words(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm, capture="messages")) as peer:
        await tell(peer, "My sister Ada lives in Lyon.", "room-a", "$ada")
        [before] = await captured(peer)
        assert await peer.resay("room-a", "$ada", "My sister Ada lives in Nantes.", ALICE) == 1
        [after] = await captured(peer)
        assert after.key == before.key and after.value.endswith("Nantes.")
        found = await peer.command("/memory search self Lyon", session="room-a")
        assert "Lyon" not in found.text
        assert await peer.unsay("room-a", "$ada", ALICE) == 1
        assert await captured(peer) == []

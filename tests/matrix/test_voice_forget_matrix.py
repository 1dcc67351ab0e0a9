"""#47 over a real Synapse: a transcript was acted on like typed words, so a misheard or
hostile "forget everything" in a voice note hid all of the person's rows at once. Now the bot
says what it heard and asks; the rows stay until the person types "yes"; "no" keeps them, and
so does any other message."""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable

import pytest

from tests.support.standin_llm import StandinLLM
from tests.support.standin_speech import StandinSpeech
from tests.support.synapse import ChazbotProcess, Human, User, requires_synapse

pytestmark = [requires_synapse, pytest.mark.timeout(300)]

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]
OGG = b"OggS\x00\x02" + bytes(400)


async def send_voice(human: Human, room: str) -> str:
    from nio import RoomSendResponse, UploadResponse

    uploaded, _ = await human.client.upload(
        lambda *_: io.BytesIO(OGG), "audio/ogg", "voice.ogg", filesize=len(OGG)
    )
    assert isinstance(uploaded, UploadResponse), uploaded
    content = {
        "msgtype": "m.audio",
        "body": "voice.ogg",
        "url": uploaded.content_uri,
        "info": {"mimetype": "audio/ogg", "size": len(OGG), "duration": 2000},
    }
    sent = await human.client.room_send(room, "m.room.message", content)
    assert isinstance(sent, RoomSendResponse), sent
    return str(sent.event_id)


async def test_a_forget_heard_in_a_voice_note_waits_for_a_typed_yes(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM, standin_speech: StandinSpeech
) -> None:
    alice = await humans("alice")
    top = {
        "agents": [{"name": "chaz", "capture": "off", "allowed_tools": []}],
        "speech": {"api_base": standin_speech.url, "api_key": "test", "max_retries": 0},
    }
    proc, bot = await chazbot(standin_llm.url, [alice.user_id], [], top=top)
    room = await alice.create_room([bot.user_id], direct=True)
    await alice.wait_member(room, bot.user_id)
    kept = await alice.ask(room, "remember that my locker code is 3141", timeout=30)
    assert "3141" in kept.body, kept.body

    async def mine() -> str:
        return (await alice.ask(room, "!chaz memory mine", timeout=30)).body

    assert "3141" in await mine()

    async def heard(said: str) -> str:
        standin_speech.said = said
        event = await send_voice(alice, room)
        return (await alice.wait_reply(event, 30))[0].body

    asked = await heard("forget everything")
    assert asked.startswith("Heard: “forget everything”") and "“yes”" in asked, asked
    assert "3141" in await mine()  # nothing hidden yet (a command leaves the question open)
    said_no = await alice.ask(room, "no", timeout=30)
    assert "nothing forgotten" in said_no.body, said_no.body
    assert "3141" in await mine()
    # anything else typed drops the question: a later "yes" is just a message
    await heard("forget everything")
    await alice.ask(room, "how are you?", timeout=30)
    assert "Forgotten" not in (await alice.ask(room, "yes", timeout=30)).body
    assert "3141" in await mine()
    # asked again: a typed yes does it, as if typed, and undo is offered as ever
    await heard("forget everything")
    done = await alice.ask(room, "yes", timeout=30)
    assert done.body.startswith("Heard: “forget everything”"), done.body
    assert "Forgotten" in done.body and "3141" in done.body, done.body
    assert "3141" not in await mine()
    assert "Traceback" not in proc.log()

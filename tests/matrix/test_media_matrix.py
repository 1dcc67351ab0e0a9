"""#39 over a real Synapse, in an encrypted room: a voice note (a small OGG file made here)
reaches a stand-in transcription server and the bot answers its transcript as typed words;
a photo with a caption reaches a stand-in vision model as image content; oversized and
undecryptable media, a speech server that fails and a model without vision each get one
line, and the next turn is fine. Media are fetched from the homeserver and decrypted in
memory only."""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.support.standin_llm import StandinLLM
from tests.support.standin_speech import StandinSpeech
from tests.support.synapse import ChazbotProcess, Human, User, requires_synapse
from tests.support.waits import wait_until

pytestmark = [requires_synapse, pytest.mark.timeout(300)]

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]
OGG = b"OggS\x00\x02" + bytes(400)  # a stand-in only reads that it got bytes
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + bytes(100)


async def send_media(
    human: Human, room: str, data: bytes, msgtype: str, mime: str, filename: str, **extra: Any
) -> str:
    from nio import RoomSendResponse, UploadResponse

    uploaded, keys = await human.client.upload(
        lambda *_: io.BytesIO(data), mime, filename, encrypt=True, filesize=len(data)
    )
    assert isinstance(uploaded, UploadResponse) and keys is not None, uploaded
    mxc = extra.pop("mxc", uploaded.content_uri)
    content: dict[str, Any] = {
        "msgtype": msgtype,
        "body": extra.pop("body", filename),
        "filename": filename,
        "info": {"mimetype": mime, "size": len(data), **extra.pop("info", {})},
        "file": {**keys, "url": mxc},
        **extra,
    }
    sent = await human.client.room_send(
        room, "m.room.message", content, ignore_unverified_devices=True
    )
    assert isinstance(sent, RoomSendResponse), sent
    return str(sent.event_id)


async def test_voice_and_pictures_in_an_encrypted_room(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM, standin_speech: StandinSpeech
) -> None:
    alice = await humans("alice", encrypted=True)
    top = {
        "agents": [{"name": "chaz", "capture": "off"}],
        "speech": {"api_base": standin_speech.url, "api_key": "test", "max_retries": 0},
        "media": {"image_max_mb": 0.01},
        "timezone": "Europe/Berlin",
    }
    top["llm"] = {
        "backend": "openai",
        "api_base": standin_llm.url,
        "api_key": "test",
        "model": "stand-in",
        "max_retries": 1,
        "vision": True,
    }
    proc, bot = await chazbot(standin_llm.url, [alice.user_id], [], top=top, encryption=True)
    room = await alice.create_room([bot.user_id], direct=True, encrypted=True)
    await alice.wait_member(room, bot.user_id)
    await wait_until(
        lambda: any(alice.client.device_store.active_user_devices(bot.user_id)),
        what="the bot's device keys",
    )
    assert (await alice.ask(room, "hello in secret")).body == "You said: hello in secret"

    async def reply_to(event_id: str) -> str:
        return (await alice.wait_reply(event_id, 30))[0].body

    # a voice note: transcribed, then handled as if typed (here: a reminder in words)
    voice = await send_media(
        alice, room, OGG, "m.audio", "audio/ogg", "voice.ogg", info={"duration": 3000}
    )
    heard = await reply_to(voice)
    assert heard.startswith("Heard: “remind me tomorrow at 9 to call Ines”"), heard
    assert "OK, I'll remind you here on" in heard and "call Ines" in heard
    _, kind, data = standin_speech.uploads[-1]["file"]
    assert data == OGG and kind == "audio/ogg"  # decrypted in memory, as sent

    # a photo with a caption: to the model that sees, as image content beside the caption
    photo = await send_media(
        alice, room, PNG, "m.image", "image/png", "kitchen.png", body="our new kitchen"
    )
    await reply_to(photo)
    users = [m for m in standin_llm.last_request["messages"] if m["role"] == "user"]
    parts = users[-1]["content"]
    assert parts[0] == {"type": "text", "text": "our new kitchen"}, parts
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")

    # refusals: one line each, and the next turn is fine
    big = await send_media(alice, room, PNG + bytes(20_000), "m.image", "image/png", "big.png")
    assert "MB; I take up to" in await reply_to(big)
    # #47: one that says it is small is cut at the limit while it streams; an address
    # outside the spec reaches no endpoint of the homeserver
    liar = await send_media(
        alice, room, PNG + bytes(20_000), "m.image", "image/png", "liar.png", info={"size": 1234}
    )
    assert "MB; I take up to" in await reply_to(liar)
    for bad in ("mxc://../preview_url", "mxc://localhost/../../v3/config"):
        odd = await send_media(alice, room, PNG, "m.image", "image/png", "odd.png", mxc=bad)
        line = await reply_to(odd)
        assert "mxc://" in line and "\n" not in line, line
    standin_speech.fail(1, 500)
    failing = await send_media(alice, room, OGG, "m.audio", "audio/ogg", "voice.ogg")
    assert "speech server" in await reply_to(failing)
    long = await send_media(
        alice, room, OGG, "m.audio", "audio/ogg", "long.ogg", info={"duration": 3_600_000}
    )
    assert "long; I take up to" in await reply_to(long)
    assert (await alice.ask(room, "still there?")).body == "You said: still there?"
    assert "Traceback" not in proc.log()

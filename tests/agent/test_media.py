"""Voice and pictures, below the transport (#39): the transcription client against a
stand-in speech server, and pictures to a model that sees (as image content) or not (a plain
"I can't see pictures"). The Matrix side is in ``test_media_matrix.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

import chazbot
from chazbot.agent.pictures import CANNOT_SEE, Picture
from chazbot.backends.speech import Transcriber
from chazbot.config import AgentConfig, Config
from chazbot.errors import BackendError, InputError
from tests.support.standin_llm import StandinLLM
from tests.support.standin_speech import StandinSpeech

OGG = b"OggS" + bytes(200)
PNG = bytes.fromhex("89504e470d0a1a0a") + bytes(64)


async def test_a_voice_message_becomes_its_text_and_failures_are_one_line(
    standin_speech: StandinSpeech,
) -> None:
    speech = Transcriber(standin_speech.config(max_mb=0.001))
    try:
        assert await speech.transcribe(OGG, "voice.ogg", "audio/ogg") == standin_speech.said
        name, kind, data = standin_speech.uploads[-1]["file"]
        assert (name, kind, data) == ("voice.ogg", "audio/ogg", OGG)
        assert standin_speech.uploads[-1]["model"] == "whisper-1"
        with pytest.raises(InputError, match="voice message is"):
            await speech.transcribe(bytes(4096), "big.ogg", "audio/ogg")
        with pytest.raises(InputError, match="long"):
            speech.check(10, 3600)
        standin_speech.fail(2, 500)
        with pytest.raises(BackendError) as failed:
            await speech.transcribe(OGG, "voice.ogg", "audio/ogg")
        assert "\n" not in str(failed.value) and "test" not in str(failed.value)
        standin_speech.malformed(1, '{"no": "text"}')
        with pytest.raises(BackendError, match="text"):
            await speech.transcribe(OGG, "voice.ogg", "audio/ogg")
        standin_speech.said = "   "
        with pytest.raises(BackendError, match="words"):
            await speech.transcribe(OGG, "voice.ogg", "audio/ogg")
    finally:
        await speech.aclose()
    unreachable = Transcriber(
        standin_speech.config(api_base="http://127.0.0.1:9/v1", max_retries=0)
    )
    with pytest.raises(BackendError):
        await unreachable.transcribe(OGG, "voice.ogg", "audio/ogg")
    await unreachable.aclose()


@pytest.mark.parametrize("vision", [True, False])
async def test_a_picture_goes_to_a_model_that_sees_and_others_say_so(
    tmp_path: Path, standin_llm: StandinLLM, vision: bool
) -> None:
    cfg = Config(
        state_dir=tmp_path,
        llm=standin_llm.config(vision=vision),
        agents=[AgentConfig(name="chaz", capture="messages")],
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        turn = await peer.chat("our new kitchen", pictures=[Picture(PNG, "image/png")])
        assert turn.ok
        users = [m for m in standin_llm.last_request["messages"] if m["role"] == "user"]
        content = users[-1]["content"]
        if vision:
            assert isinstance(content, list) and content[0]["text"] == "our new kitchen"
            url = content[1]["image_url"]["url"]
            assert url.startswith("data:image/png;base64,")
            assert not turn.text.startswith(CANNOT_SEE)
        else:
            assert content == "our new kitchen"  # the model is told nothing of the picture
            assert turn.text.startswith(CANNOT_SEE), turn.text
        await peer.captures.wait()
        kept = " ".join(h.value for h in await peer.agent("chaz").recall(""))
        assert "kitchen" in kept and "base64" not in kept
        assert repr(Picture(PNG, "image/png")) == "Picture(image/png, 72 bytes)"

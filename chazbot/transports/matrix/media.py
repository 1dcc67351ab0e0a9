"""Voice messages and pictures from Matrix (#39): fetched from the homeserver only, decrypted
in memory, bounded, never written to disk, dropped after the turn.

A voice message becomes its transcript (``backends.speech``), which the turn handles as if
the person had typed it (words, reminders, capture with the person as speaker, the audience
rule); the reply starts with what was heard. A picture goes to the turn with its caption
(``agent.pictures``). Every refusal is one line to the room.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from nio import DownloadResponse
from nio.crypto.attachments import decrypt_attachment

from chazbot.agent.pictures import IMAGE_TYPES, Picture
from chazbot.backends.speech import Transcriber
from chazbot.config import Config
from chazbot.errors import BackendError, ChazError, InputError

log = logging.getLogger("chazbot.transports.matrix")

NO_SPEECH = (
    "I can't listen to voice messages here (no speech server is configured); please type it."
)
MIB = 1024 * 1024


@dataclass(frozen=True)
class Heard:
    """What a media message brings to a turn: its text and pictures, and the line that says
    what was heard (a voice message's transcript)."""

    text: str
    pictures: tuple[Picture, ...] = ()
    heard: str = ""


class Media:
    """Fetches and reads the media of one bot account's jobs."""

    def __init__(self, client: Any, cfg: Config) -> None:
        self.client = client
        self.cfg = cfg
        self.speech = Transcriber(cfg.speech) if cfg.speech is not None else None

    async def aclose(self) -> None:
        if self.speech is not None:
            await self.speech.aclose()

    async def take(
        self, kind: str, content: dict[str, Any], caption: str, event_id: str
    ) -> Heard | str:
        """``read``, or the one line that refuses the media (logged with the event id)."""
        try:
            return await self.read(kind, content, caption)
        except ChazError as exc:
            log.info("matrix: %s %s not taken: %s", kind, event_id, exc)
            return str(exc)

    async def read(self, kind: str, content: dict[str, Any], caption: str) -> Heard:
        """The turn's input for a ``voice`` or ``picture`` job; InputError or BackendError
        (one line) for what cannot be taken."""
        found = content.get("info")
        info: dict[str, Any] = found if isinstance(found, dict) else {}
        mime = str(info.get("mimetype") or "")
        if kind == "voice":
            if self.speech is None:
                raise InputError(NO_SPEECH)
            duration = info.get("duration")
            seconds = duration / 1000 if isinstance(duration, int | float) else None
            limit = int(self.speech.cfg.max_mb * MIB)
            self.speech.check(_size(info), seconds)
            audio = await self._fetch(content, limit, "voice message")
            self.speech.check(len(audio), seconds)
            said = await self.speech.transcribe(audio, _name(content, "voice.ogg"), mime)
            return Heard(said, (), said)
        limit = int(self.cfg.media.image_max_mb * MIB)
        if _size(info) > limit:
            raise InputError(_too_big("picture", _size(info), limit))
        data = await self._fetch(content, limit, "picture")
        kind_of = mime if mime in IMAGE_TYPES else _sniff(data)
        if kind_of is None:
            raise InputError("I can only look at JPEG, PNG, GIF or WebP pictures")
        return Heard(caption, (Picture(data, kind_of),))

    async def _fetch(self, content: dict[str, Any], limit: int, what: str) -> bytes:
        """The media's bytes from the homeserver (decrypted in memory for an encrypted
        room), at most ``limit``."""
        held = content.get("file")
        file: dict[str, Any] | None = held if isinstance(held, dict) else None
        url = (file or content).get("url")
        if not isinstance(url, str) or not url.startswith("mxc://"):
            raise InputError(f"that {what} has no mxc:// address on the homeserver")
        try:
            answer = await self.client.download(url)
        except Exception as exc:  # nio raises transport errors as they come
            raise BackendError(f"could not fetch the {what} from the homeserver: {exc}") from exc
        if not isinstance(answer, DownloadResponse) or not isinstance(answer.body, bytes):
            raise BackendError(f"the homeserver did not give the {what}: {answer}")
        data = answer.body
        if len(data) > limit:
            raise InputError(_too_big(what, len(data), limit))
        if file is None:
            return data
        try:
            key, iv = file["key"]["k"], file["iv"]
            return bytes(decrypt_attachment(data, key, file["hashes"]["sha256"], iv))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"that {what} could not be decrypted ({type(exc).__name__})") from exc
        except Exception as exc:  # nio's EncryptionError: a hash that does not match
            raise InputError(f"that {what} could not be decrypted: {exc}") from exc


def _size(info: dict[str, Any]) -> int:
    size = info.get("size")
    return size if isinstance(size, int) and size >= 0 else 0


def _name(content: dict[str, Any], default: str) -> str:
    name = content.get("filename") or content.get("body")
    return name[:100] if isinstance(name, str) and name else default


def _too_big(what: str, size: int, limit: int) -> str:
    return f"that {what} is {size / MIB:.1f} MB; I take up to {limit / MIB:.1f} MB"


def _sniff(data: bytes) -> str | None:
    """The type of a picture by its first bytes (a client that sent no mimetype)."""
    for magic, kind in (
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF8", "image/gif"),
    ):
        if data.startswith(magic):
            return kind
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def heard_line(heard: Heard, answer: str) -> str:
    """The reply to a voice message: what was heard, then the answer."""
    return f"Heard: “{heard.heard}”\n\n{answer}" if heard.heard else answer


__all__ = ["NO_SPEECH", "Heard", "Media", "heard_line"]

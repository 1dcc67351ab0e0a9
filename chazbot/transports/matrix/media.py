"""Voice messages and pictures from Matrix (#39): fetched from the homeserver only, decrypted
in memory, bounded, never written to disk, dropped after the turn.

Fetching (#47): an ``mxc://`` address is taken only as the Matrix spec writes it (a server
name by its grammar, a media ID of ``[A-Za-z0-9_-]``), so no address reaches another endpoint
of the homeserver with the bot's token (``mxc://../preview_url``); the bytes are streamed from
the media repository's authenticated download endpoint, the token in a header (never sent on
to another origin), and cut at the configured limit whatever ``info.size`` says, all within
``media.fetch_timeout_s``.

A voice message becomes its transcript (``backends.speech``), which the turn handles as if
the person had typed it (words, reminders, capture with the person as speaker, the audience
rule); the reply starts with what was heard. A request to forget that was only heard is asked
about first and done on the person's typed "yes" (``agent.spoken``, #47). A picture goes to
the turn with its caption (``agent.pictures``). Every refusal is one line to the room.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp
from nio.crypto.attachments import decrypt_attachment

from chazbot.agent.pictures import IMAGE_TYPES, Picture
from chazbot.agent.spoken import SpokenForgets, asks_to_forget
from chazbot.backends.capped import read_capped
from chazbot.backends.speech import Transcriber
from chazbot.config import Config
from chazbot.errors import BackendError, ChazError, InputError

if TYPE_CHECKING:
    from chazbot.transports.matrix.routing import Job

log = logging.getLogger("chazbot.transports.matrix")

NO_SPEECH = (
    "I can't listen to voice messages here (no speech server is configured); please type it."
)
MIB = 1024 * 1024
DOWNLOAD_PATH = "/_matrix/client/v1/media/download/"
"""The authenticated media download endpoint (Matrix 1.11), what nio calls too."""
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_SERVER_NAME = re.compile(
    rf"(?:\[[0-9A-Fa-f:.]{{2,45}}\]|{_LABEL}(?:\.{_LABEL})*)(?::[0-9]{{1,5}})?", re.ASCII
)
"""The spec's server name: an IPv6 literal, or a DNS name or IPv4 address (dot-separated
labels, so no ``..``), and a port of 1-5 digits."""
MAX_REDIRECTS = 3
"""A homeserver may send a download elsewhere (Matrix 1.11: a 307 to its storage); aiohttp
drops the Authorization header when a redirect changes the origin."""
_MEDIA_ID = re.compile(r"[A-Za-z0-9_-]{1,255}", re.ASCII)


def parse_mxc(url: str) -> tuple[str, str] | None:
    """``(server name, media ID)`` of ``mxc://<server-name>/<media-id>`` as the Matrix spec
    writes it, or None for anything else (a path, a query, ``..``, another character)."""
    if not url.startswith("mxc://"):
        return None
    server, slash, media_id = url.removeprefix("mxc://").partition("/")
    if not slash or len(server) > 255:
        return None
    if not _SERVER_NAME.fullmatch(server) or not _MEDIA_ID.fullmatch(media_id):
        return None
    return server, media_id


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
        self._http: aiohttp.ClientSession | None = None
        self.spoken = SpokenForgets()

    async def aclose(self) -> None:
        if self.speech is not None:
            await self.speech.aclose()
        http, self._http = self._http, None
        if http is not None and not http.closed:
            await http.close()

    async def of(self, job: Job) -> Heard | str | None:
        """What ``job`` brings to its turn: a voice message's or a picture's (``take``), or
        for typed words the forget they answer (``typed``); None: the words as typed."""
        if job.kind in ("voice", "picture"):
            return await self.take(
                job.kind, job.content, job.text, job.event_id, job.room_id, job.sender
            )
        return self.typed(job.room_id, job.sender, job.text)

    async def take(
        self,
        kind: str,
        content: dict[str, Any],
        caption: str,
        event_id: str,
        room_id: str = "",
        sender: str = "",
    ) -> Heard | str:
        """``read``, or the one line that refuses the media (logged with the event id); a
        voice message from ``sender`` in ``room_id`` that asks to forget gets what was heard
        and a question instead (``typed`` takes the answer)."""
        try:
            heard = await self.read(kind, content, caption)
        except ChazError as exc:
            log.info("matrix: %s %s not taken: %s", kind, event_id, exc)
            return str(exc)
        if kind != "voice":
            return heard
        found = await asyncio.to_thread(asks_to_forget, heard.text)
        asked = self.spoken.ask(room_id, sender, heard.text, found)
        if asked is None:
            return heard
        log.info("matrix: voice %s asks to forget; held for a typed yes", event_id)
        return heard_line(heard, asked)

    def typed(self, room_id: str, sender: str, text: str) -> Heard | str | None:
        """A typed message as the answer to a forget heard before: the transcript to act on
        (as heard: the reply says so), the line that says nothing was forgotten, or None (the
        message is the person's next turn)."""
        found = self.spoken.answer(room_id, sender, text)
        if found is None:
            return None
        what, said = found
        return Heard(said, (), said) if what == "yes" else said

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
        where = parse_mxc(url) if isinstance(url, str) else None
        if where is None:
            raise InputError(f"that {what} has no mxc:// address as Matrix writes them")
        data = await self._download(*where, limit, what)
        if file is None:
            return data
        try:
            key, iv = file["key"]["k"], file["iv"]
            return bytes(decrypt_attachment(data, key, file["hashes"]["sha256"], iv))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"that {what} could not be decrypted ({type(exc).__name__})") from exc
        except Exception as exc:  # nio's EncryptionError: a hash that does not match
            raise InputError(f"that {what} could not be decrypted: {exc}") from exc

    async def _download(self, server: str, media_id: str, limit: int, what: str) -> bytes:
        """The media's bytes, streamed: at most ``limit`` (InputError past it), all within
        ``media.fetch_timeout_s`` (BackendError after it)."""
        deadline = self.cfg.media.fetch_timeout_s
        base = str(self.client.homeserver).rstrip("/")
        headers = {"Authorization": f"Bearer {self.client.access_token}"}
        extra: dict[str, Any] = {}
        if getattr(self.client, "ssl", None) is not None:
            extra["ssl"] = self.client.ssl  # as nio reaches the homeserver
        try:
            async with asyncio.timeout(deadline):
                async with self._session().get(
                    f"{base}{DOWNLOAD_PATH}{server}/{media_id}",
                    headers=headers,
                    max_redirects=MAX_REDIRECTS,  # the token never leaves the homeserver's origin
                    **extra,
                ) as resp:
                    if resp.status != 200:
                        raise BackendError(
                            f"the homeserver did not give the {what} (HTTP {resp.status})"
                        )
                    data = await read_capped(resp, limit)
        except TimeoutError as exc:
            raise BackendError(
                f"the homeserver did not give the {what} within {deadline:g} s"
            ) from exc
        except aiohttp.ClientError as exc:
            raise BackendError(
                f"could not fetch the {what} from the homeserver ({type(exc).__name__})"
            ) from exc
        if data is None:
            raise InputError(_too_big(what, None, limit))
        return data

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(headers={"User-Agent": "chazbot"})
        return self._http


def _size(info: dict[str, Any]) -> int:
    size = info.get("size")
    return size if isinstance(size, int) and size >= 0 else 0


def _name(content: dict[str, Any], default: str) -> str:
    name = content.get("filename") or content.get("body")
    return name[:100] if isinstance(name, str) and name else default


def _too_big(what: str, size: int | None, limit: int) -> str:
    """The refusal of media past ``limit`` (``size`` None: found while reading)."""
    took = f"{limit / MIB:.3g} MB"
    if size is None:
        return f"that {what} is over {took}; I take up to {took}"
    return f"that {what} is {size / MIB:.1f} MB; I take up to {took}"


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


__all__ = ["NO_SPEECH", "Heard", "Media", "heard_line", "parse_mxc"]

"""Voice messages to text (#39): an OpenAI-compatible ``/audio/transcriptions`` endpoint.

The bytes arrive from the Matrix transport (fetched from the homeserver, decrypted in memory)
and leave only to the configured speech server; nothing is written to disk. Failures are one
line (``BackendError``), retried as the chat model's are.
"""

from __future__ import annotations

import time

from chazbot import metrics
from chazbot.backends.openai_compat import DEFAULT_BACKOFF, OpenAICompatClient
from chazbot.config import SpeechConfig
from chazbot.errors import BackendError, InputError

MAX_TRANSCRIPT_CHARS = 8000
MAX_ANSWER_BYTES = 1024 * 1024
"""The speech server's answer is read up to this, never more (#47): a transcript is cut to
``MAX_TRANSCRIPT_CHARS`` anyway, and a 50 MB answer read whole added 373 MB of memory."""


class Transcriber:
    """One speech endpoint, over one lazily opened session."""

    def __init__(self, cfg: SpeechConfig) -> None:
        self.cfg = cfg
        self._http = OpenAICompatClient.for_endpoint(
            cfg, "speech server", "speech", DEFAULT_BACKOFF, None, MAX_ANSWER_BYTES
        )

    def check(self, size: int, seconds: float | None) -> None:
        """InputError (one line) for a voice message over the configured bounds."""
        if size > self.cfg.max_mb * 1024 * 1024:
            mb = size / 1048576
            raise InputError(
                f"that voice message is {mb:.1f} MB; I take up to {self.cfg.max_mb:g} MB"
            )
        if seconds is not None and seconds > self.cfg.max_seconds:
            raise InputError(
                f"that voice message is {seconds:.0f} s long; I take up to {self.cfg.max_seconds} s"
            )

    async def transcribe(self, audio: bytes, name: str, mime: str) -> str:
        """The text said in ``audio``; BackendError when the server fails or says nothing."""
        self.check(len(audio), None)
        started = time.perf_counter()
        data = await self._http.post_form(
            "/audio/transcriptions",
            {"model": self.cfg.model, "response_format": "json"},
            (name or "voice.ogg", audio, mime or "audio/ogg"),
            model=self.cfg.model,
        )
        metrics.TRANSCRIPTIONS.inc()
        metrics.TRANSCRIPTION_SECONDS.observe(time.perf_counter() - started)
        text = data.get("text") if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise self._http.malformed("no 'text' in the transcription")
        text = " ".join(text.split())[:MAX_TRANSCRIPT_CHARS]
        if not text:
            raise BackendError("I could not make out any words in that voice message")
        return text

    async def aclose(self) -> None:
        await self._http.aclose()


__all__ = ["Transcriber"]

"""The sections of ``config.yaml`` but the tools': chat model, speech, media, embedding,
Matrix, agents, logging and the memory page."""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from chazbot.config.base import (
    LOCAL_DEFAULT_MODEL,
    MEMORY_TOOLS,
    NAME_PATTERN,
    QUIET_BUILTINS,
    REMINDER_TOOLS,
    CaptureMode,
    ConfigModel,
    e2e_installed,
)


class LLMConfig(ConfigModel):
    """The chat model. ``openai`` is any OpenAI-compatible endpoint; ``local`` the embedded one.

    With ``backend: local``, ``model`` is ``embedded`` (the default: the best built-in model
    that is installed), a built-in name (``qwen2.5-coder-0.5b``, ``smollm2-135m``), a path to any
    GGUF file, or an https URL of one (http only with ``model_sha256``), fetched once into
    ``state_dir/models``.
    """

    backend: Literal["openai", "local"] = "openai"
    api_base: str = "https://api.openai.com/v1"
    api_key: str | None = None
    model: str = "gpt-4o-mini"
    timeout_s: float = Field(default=60.0, gt=0, le=600)
    max_retries: int = Field(default=3, ge=0, le=10)
    max_tokens: int | None = Field(default=None, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    context_tokens: int = Field(default=2048, ge=512, le=131_072)
    download_max_mb: int = Field(default=16_384, ge=1, le=1_048_576)
    model_sha256: str | None = None
    """The sha256 (64 hex digits) a ``model`` URL or GGUF path must have: checked when it is
    fetched and at every load; needed for a plain ``http://`` URL."""
    vision: bool = False
    """The model accepts pictures (OpenAI's image content parts): people's photos go to it
    with their caption. Without it the bot says plainly it cannot see pictures (#39)."""
    chat_models: dict[str, str] = Field(default_factory=dict)
    """With ``backend: local``, the models chat admins may give an agent (``/agent set … model
    NAME``): a name and where its GGUF comes from (a built-in, a file path, an https URL). Chat
    may also name an installed built-in, or a ``.gguf`` file in ``state_dir/models`` by its
    file name; never a URL or another path (only config.yaml names those)."""

    @model_validator(mode="before")
    @classmethod
    def _local_default_model(cls, data: Any) -> Any:
        """``backend: local`` without a model means the embedded default, not gpt-4o-mini."""
        if isinstance(data, dict) and data.get("backend") == "local" and not data.get("model"):
            return {**data, "model": LOCAL_DEFAULT_MODEL}
        return data

    @field_validator("chat_models")
    @classmethod
    def _chat_models(cls, value: dict[str, str]) -> dict[str, str]:
        for name, source in value.items():
            if not re.fullmatch(NAME_PATTERN, name) or name.lower().endswith(".gguf"):
                raise ValueError(
                    f"chat_models: bad name {name[:64]!r}: 1-64 letters, digits, '_', '.', '-' "
                    "(not ending in .gguf: those are the models directory's files)"
                )
            if not source.strip():
                raise ValueError(f"chat_models: {name} needs a built-in, a path or an https URL")
            if source.lower().startswith("http://"):
                raise ValueError(f"chat_models: {name} is plain http; use an https URL")
        return value

    @field_validator("model_sha256")
    @classmethod
    def _sha256_hex(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip().lower()
        if not re.fullmatch(r"[0-9a-f]{64}", value):
            raise ValueError("must be a sha256: 64 hex digits")
        return value


class SpeechConfig(ConfigModel):
    """Voice messages to text: an OpenAI-compatible ``/audio/transcriptions`` endpoint (a
    whisper server such as faster-whisper or vLLM, or OpenAI)."""

    api_base: str = "https://api.openai.com/v1"
    api_key: str | None = None
    model: str = "whisper-1"
    timeout_s: float = Field(default=60.0, gt=0, le=600)
    max_retries: int = Field(default=2, ge=0, le=10)
    max_mb: float = Field(default=10.0, gt=0, le=100)
    """Voice messages larger than this are refused with one line (never fetched whole)."""
    max_seconds: int = Field(default=300, ge=1, le=3600)
    """Voice messages longer than this (as the message says) are refused with one line."""


class MediaConfig(ConfigModel):
    """Pictures and voice from Matrix: what is fetched, and how much."""

    image_max_mb: float = Field(default=8.0, gt=0, le=50)
    """Pictures larger than this are refused with one line. Media are held in memory only
    (decrypted there), never written to disk, and dropped when the turn ends."""
    fetch_timeout_s: float = Field(default=30.0, gt=0, le=600)
    """A picture or voice message not fetched whole within this is refused with one line."""


class EmbeddingConfig(ConfigModel):
    """The embedder. Vectors are stored under ``embeddings:<provider>/<model>``."""

    backend: Literal["openai", "local"] = "local"
    provider: str | None = None
    model: str | None = None
    api_base: str = "https://api.openai.com/v1"
    api_key: str | None = None
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    max_retries: int = Field(default=3, ge=0, le=10)
    batch_size: int = Field(default=64, ge=1, le=2048)


class MatrixConfig(ConfigModel):
    """The Matrix account of the bot and who may talk to it."""

    homeserver_url: str
    user_id: str
    password: str | None = None
    access_token: str | None = None
    device_name: str = "chazbot"
    allow_list: list[str] = Field(default_factory=list)
    admins: list[str] = Field(default_factory=list)
    encryption: bool | None = None
    trust_unverified_devices: bool = True
    command_prefix: str = "!chaz"
    room_agents: dict[str, list[str]] = Field(default_factory=dict)
    audience_list_max: int = Field(default=50, ge=1, le=50)  # ≤ memory.audience.MAX_AUDIENCE

    @field_validator("room_agents")
    @classmethod
    def _room_agents(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for glob, names in value.items():
            if not glob or not names:
                raise ValueError(f"room_agents: {glob!r} needs a room id glob and 1+ agents")
        return value

    def agents_for_room(self, room_id: str) -> list[str] | None:
        """The agents a room may use (first is its default), or None for any agent.

        ``room_agents`` maps room id globs (``!abc:example.org``, ``*``) to agent names;
        the first glob that matches decides.
        """
        for glob, names in self.room_agents.items():
            if fnmatch.fnmatchcase(room_id, glob):
                return list(names)
        return None

    @field_validator("user_id")
    @classmethod
    def _mxid(cls, value: str) -> str:
        if not re.fullmatch(r"@[^:\s]+:\S+", value):
            raise ValueError(f"not a Matrix user id (like @bot:example.org): {value!r}")
        return value

    @property
    def use_encryption(self) -> bool:
        """``encryption``, or when it is left out (null): whether the e2e extra is installed."""
        return self.encryption if self.encryption is not None else e2e_installed()


class AgentConfig(ConfigModel):
    """One agent: a persona with its own key and its own agent DB."""

    name: str = Field(pattern=NAME_PATTERN)
    system_prompt: str = "You are chaz, a helpful assistant with a long-term memory."
    model: str | None = None
    allowed_tools: list[str] = Field(
        default_factory=lambda: list(MEMORY_TOOLS + REMINDER_TOOLS + QUIET_BUILTINS)
    )
    default_memory_banks: list[str] = Field(default_factory=list)
    max_iterations: int = Field(default=6, ge=1, le=50)
    capture: CaptureMode = "auto"
    memory_audience: Literal["room", "agent"] = "room"
    """``room``: a row is told only where everyone present heard it (SPEC §5c); ``agent``:
    the seed's one memory for all rooms, for a peer with one person."""

    @field_validator("capture", mode="before")
    @classmethod
    def _capture_yaml_bool(cls, value: Any) -> Any:
        # YAML 1.1 reads a bare ``off`` as false (and ``on`` as true).
        if value is False:
            return "off"
        if value is True:
            return "auto"
        return value

    @field_validator("default_memory_banks")
    @classmethod
    def _bank_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.fullmatch(NAME_PATTERN, name):
                raise ValueError(f"bad bank name {name!r}: letters, digits, '_', '.', '-'")
        return value


class LoggingConfig(ConfigModel):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["text", "json"] = "text"


class WebConfig(ConfigModel):
    """The memory page (``/ui/`` on ``http_listen``, SPEC §10): off unless ``enabled``."""

    enabled: bool = False
    public_url: str = ""
    """The address people open (``https://chaz.example.org``, the web_public_url; no path:
    a reverse proxy forwards ``/ui/`` as it is): sign-in links point there; ``https://``
    marks the session cookie Secure. Empty: the ``http_listen`` address (a local run)."""
    session_hours: float = Field(default=12.0, gt=0, le=24 * 30)
    """How long a sign-in lasts; signing out ends it sooner."""

    @field_validator("public_url")
    @classmethod
    def _web_url(cls, value: str) -> str:
        if value and not re.fullmatch(r"https?://[A-Za-z0-9.\-\[\]:]+(?::\d{1,5})?/?", value):
            raise ValueError(
                f"expected http(s)://host[:port] (pages live under /ui/), got {value!r}"
            )
        return value.rstrip("/")

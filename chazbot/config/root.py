"""The whole configuration of one peer (``Config``), made of the sections."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from chazbot.config.base import MATRIX_SESSION_PREFIX, ConfigModel, check_unique
from chazbot.config.sections import (
    AgentConfig,
    EmbeddingConfig,
    LLMConfig,
    LoggingConfig,
    MatrixConfig,
    MediaConfig,
    SpeechConfig,
    WebConfig,
)
from chazbot.config.tools import ApprovalsConfig, MCPServerConfig, ToolsConfig
from chazbot.config.zones import host_zone, is_zone
from chazbot.errors import ConfigError


class Config(ConfigModel):
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
        check_unique("mcp server", [s.name for s in value])
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        """The zone reminders are read in for people who set none (``tz``): an IANA name;
        left out, the host's (``host_zone``)."""
        if not is_zone(value):
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
        check_unique("agent", [a.name for a in value])
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

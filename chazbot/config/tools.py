"""The tools' sections of ``config.yaml``: built-in tools and their approval policies,
approvals, MCP servers (SPEC §12, docs/tools.md)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from chazbot.config.base import ConfigModel

ApprovalPolicy = Literal["never", "ask", "always"]
TOOL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
SERVER_NAME_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_[A-Za-z0-9-]){0,31}$"
"""An MCP server's name: its tools are offered as ``<server>__<tool>``, so no ``__`` in it."""
MXID_PATTERN = r"^@[^:\s]+:\S+$"


class ToolsConfig(ConfigModel):
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


def _tool_ref(name: str) -> None:
    """A tool name or an MCP server's ``<server>__*``, else ValueError."""
    server, sep, rest = name.partition("__")
    if sep and (rest == "*" or re.fullmatch(TOOL_NAME_PATTERN, rest)):
        if re.fullmatch(SERVER_NAME_PATTERN, server):
            return
    elif re.fullmatch(TOOL_NAME_PATTERN, name):
        return
    raise ValueError(f"not a tool name or <server>__* : {name[:80]!r}")


class ApprovalsConfig(ConfigModel):
    """Calls that need a person's yes (SPEC §12)."""

    timeout_s: float = Field(default=300.0, ge=1, le=86_400)
    """Unanswered this long, a call is denied and the room is told."""


class MCPServerConfig(ConfigModel):
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

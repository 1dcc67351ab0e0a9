"""Which tools an agent may call and which calls need a person's yes (SPEC §12). Pure.

An agent's ``allowed_tools`` names tools, and an MCP server's ``<server>__*`` stands for all
its tools. Each tool has a policy: ``never`` (runs without asking), ``ask`` (asks, unless the
operator lists it in ``tools.auto_approved_tools``), ``always`` (asks every time). The
defaults: memory and reminder tools, ``get_time`` and ``calculate`` never; ``web_fetch``,
``web_search`` and every MCP tool ask; ``tools.policies`` sets any of them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Literal

from chazbot.config import MEMORY_TOOLS, QUIET_BUILTINS, REMINDER_TOOLS

Policy = Literal["never", "ask", "always"]
SEPARATOR = "__"
QUIET = frozenset({*MEMORY_TOOLS, *REMINDER_TOOLS, *QUIET_BUILTINS})
"""Tools that run without asking unless the operator says otherwise."""


def server_of(name: str) -> str | None:
    """The MCP server an offered name belongs to (``notes__search`` → ``notes``)."""
    server, sep, tool = name.partition(SEPARATOR)
    return server if sep and server and tool else None


def _named(name: str, names: Collection[str]) -> bool:
    server = server_of(name)
    return name in names or (server is not None and f"{server}{SEPARATOR}*" in names)


def allowed(name: str, allowed_tools: Collection[str]) -> bool:
    """Whether an agent whose ``allowed_tools`` is given may call ``name``."""
    return _named(name, allowed_tools)


def policy_of(name: str, policies: Mapping[str, Policy]) -> Policy:
    found = policies.get(name)
    server = server_of(name)
    if found is None and server is not None:
        found = policies.get(f"{server}{SEPARATOR}*")
    if found is not None:
        return found
    return "never" if name in QUIET else "ask"


def needs_approval(name: str, policies: Mapping[str, Policy], auto: Collection[str]) -> bool:
    policy = policy_of(name, policies)
    return policy == "always" or (policy == "ask" and not _named(name, auto))


__all__ = ["QUIET", "SEPARATOR", "Policy", "allowed", "needs_approval", "policy_of", "server_of"]

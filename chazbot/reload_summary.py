"""What a config reload changed, in one paragraph for the admin who asked and the log
(``Hosting.reload_config``: ``/agent reload`` and SIGHUP)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from chazbot.agent.definition import Definition, changed_keys

if TYPE_CHECKING:
    from chazbot.config import AgentConfig, Config


class Agent(Protocol):
    """What the summary reads of a hosted agent (``peer_hosting.Agent``)."""

    @property
    def name(self) -> str: ...
    @property
    def config(self) -> AgentConfig: ...
    @property
    def definition(self) -> Definition | None: ...


APPLIED_ON_RELOAD = ("tools", "approvals", "mcp_servers")
"""Top-level config sections a reload applies at once, besides the agents (the peer's tools
part: ``ToolBox.reload``, run by ``Hosting.reload_config``)."""


def reload_summary(
    old_config: Config,
    new_config: Config,
    old: Mapping[str, Agent],
    new: Mapping[str, Agent],
    granted: list[str],
) -> str:
    """What a reload changed, for the admin who asked (and the log)."""
    parts: list[str] = []
    added = [a.name for k, a in new.items() if k not in old]
    removed = [a.name for k, a in old.items() if k not in new]
    updated = []
    for k, agent in new.items():
        if k in old:
            keys = changed_keys(old[k].config, agent.config)
            if keys:
                updated.append(f"{agent.name} ({', '.join(keys)})")
    if added:
        parts.append("added " + ", ".join(added))
    if updated:
        parts.append("updated " + "; ".join(updated))
    if removed:
        parts.append("no longer hosted " + ", ".join(removed) + " (their DBs are kept)")
    if granted:
        parts.append("default banks granted " + ", ".join(granted))
    kept = [
        f"{a.name}.{k}"
        for a in new.values()
        if a.definition is not None
        for k in a.definition.overridden
    ]
    if kept:
        parts.append("chat settings still win over config.yaml for " + ", ".join(kept))
    a, b = old_config.model_dump(), new_config.model_dump()
    others = [k for k in b if k not in ("agents", "state_dir") and a.get(k) != b.get(k)]
    now = [k for k in others if k in APPLIED_ON_RELOAD]
    later = [k for k in others if k not in APPLIED_ON_RELOAD]
    if now:
        parts.append("applied " + ", ".join(now))
    if later:
        parts.append(
            "also changed " + ", ".join(later) + " (matrix.room_agents applies now; the rest "
            "at the next start)"
        )
    head = f"Config reloaded: {len(new)} agent{'s' if len(new) != 1 else ''}"
    return head + ("; " + "; ".join(parts) if parts else "; nothing changed") + "."


__all__ = ["APPLIED_ON_RELOAD", "reload_summary"]

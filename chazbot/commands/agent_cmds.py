"""Agents from chat (admins): ``/agent new``, ``/agent set``, ``/agent reset``, ``/agent show``,
``/agent delete`` and ``/agent reload``.

A definition made or changed here is stored in the agent's own DB (``agent.definition``), so
it survives restarts and travels with the DB; where config.yaml defines the same key, the
DB's value wins, and ``/agent show`` says which applies. Every verb checks its whole input
before it writes anything: a bad key, value or model is one line and changes nothing.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from chazbot.agent.definition import (
    MAX_PROMPT_CHARS,
    SETTINGS,
    check_key,
    check_new_name,
    parse_settings,
    parse_value,
)
from chazbot.agent.model_check import check_model
from chazbot.commands.context import Context
from chazbot.commands.tree import Arg, CommandTree, Reply, UsageError

if TYPE_CHECKING:
    from chazbot.agent.host import AgentHandle


def origin_of(agent: AgentHandle) -> str:
    definition = agent.definition
    return definition.origin if definition is not None else "config.yaml"


def model_of(ctx: Context, agent: AgentHandle) -> str:
    """The agent's model, or the chat backend's default as such."""
    if agent.config.model:
        return agent.config.model
    llm = ctx.agents.config.llm
    return f"{llm.model} (the backend's default)" if llm is not None else "the embedded default"


COMMANDS = CommandTree()
command = COMMANDS.command
KEYS = "|".join(SETTINGS)


@command(
    "agent new",
    (Arg("name"), Arg("settings", optional=True, rest=True, raw=True, shown="key=value")),
    f"make an agent, stored in its own DB ({KEYS})",
    admin=True,
)
async def new(ctx: Context, name: str, settings: str = "") -> Reply:
    checked = check_new_name(name)
    try:
        words = shlex.split(settings)
    except ValueError as exc:
        raise UsageError(
            f"cannot parse the settings: {exc}; quote a value with spaces: "
            'system_prompt="You are …"'
        ) from None
    parsed = parse_settings(words)
    note = ""
    if "model" in parsed:
        note = await check_model(ctx.models.llm, parsed["model"])
    made = await ctx.agents.new_agent(checked, parsed, ctx.sender)
    return Reply(
        True,
        f"Made agent {made.name}, model {model_of(ctx, made)}{note}; its definition is "
        f"in its own DB. Use it here: {ctx.prefix}agent {made.name}",
    )


@command(
    "agent set",
    (Arg("agent"), Arg("key", choices=tuple(SETTINGS)), Arg("value", rest=True, raw=True)),
    f"change one setting of an agent, stored in its DB (system_prompt ≤ "
    f"{MAX_PROMPT_CHARS:,} characters)",
    admin=True,
)
async def set_(ctx: Context, agent: str, key: str, value: str) -> Reply:
    handle = ctx.agents.agent(agent)
    checked = check_key(key)
    parsed = parse_value(checked, value)
    note = await check_model(ctx.models.llm, parsed) if checked == "model" else ""
    handle, granted = await ctx.agents.set_agent_setting(handle.name, checked, parsed)
    banks = f"; granted write on {', '.join(granted)}" if granted else ""
    return Reply(True, f"{handle.name}.{checked} is set{note}{banks}.")


@command(
    "agent reset",
    (Arg("agent"), Arg("key", choices=tuple(SETTINGS))),
    "drop a setting stored from chat: config.yaml's (or the default) applies again",
    admin=True,
)
async def reset(ctx: Context, agent: str, key: str) -> Reply:
    handle = ctx.agents.agent(agent)
    checked = check_key(key)
    handle, _ = await ctx.agents.set_agent_setting(handle.name, checked, None)
    definition = handle.definition
    source = definition.sources.get(checked, "default") if definition is not None else "default"
    return Reply(True, f"{handle.name}.{checked} now comes from {source}.")


@command(
    "agent show",
    (Arg("agent", optional=True),),
    "an agent's settings and where each comes from (chat wins over config.yaml)",
    admin=True,
)
async def show(ctx: Context, agent: str | None = None) -> Reply:
    handle = ctx.agents.agent(agent) if agent is not None else ctx.agent
    definition = handle.definition
    cfg = handle.config
    head = f"{handle.name}: defined in {origin_of(handle)}; DB {handle.db}"
    lines = [head, "Where chat and config.yaml both set a key, chat wins."]
    for key in SETTINGS:
        value = getattr(cfg, key)
        if key == "model":
            text = model_of(ctx, handle)
        elif key == "capture":
            text = f"{value} (now: {await ctx.models.capture_mode(handle)})"
        elif isinstance(value, list):
            text = ", ".join(value) or "none"
        else:
            text = str(value)
        source: str = definition.sources.get(key, "default") if definition else "config.yaml"
        if definition is not None and key in definition.overridden:
            source += ", over config.yaml"
        lines.append(f"- {key} [{source}]: {text}")
    if definition is not None and definition.ignored:
        lines.append("Stored but invalid, ignored: " + ", ".join(definition.ignored))
    return Reply(True, "\n".join(lines))


@command(
    "agent delete",
    (Arg("agent"),),
    "stop hosting an agent made in chat; its DB and memory are kept, and naming it in "
    "config.yaml brings it back",
    admin=True,
)
async def delete(ctx: Context, agent: str) -> Reply:
    gone, now = await ctx.agents.delete_agent(agent, ctx.sender)
    return Reply(
        True,
        f"Deleted agent {gone.name}: it no longer answers, and rooms that used it now get "
        f"{now.name}. Its DB {gone.db[:19]}… and "
        f"what it remembers are kept; to bring it back, name it in config.yaml's agents and "
        f"{ctx.prefix}agent reload.",
    )


@command(
    "agent reload",
    (),
    "re-read the config file: add and update agents, apply default banks, tools and MCP servers",
    admin=True,
)
async def reload(ctx: Context) -> Reply:
    return Reply(True, await ctx.agents.reload_config())

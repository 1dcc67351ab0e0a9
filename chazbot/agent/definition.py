"""An agent's definition as admins write it from chat, kept in the agent's own signed DB.

The ``agent new`` and ``agent set`` commands (``!chaz agent set …`` in Matrix, with the
configured prefix; ``/agent set …`` on the terminal and ``chazbot cmd``) store one field per
setting in the agent DB's ``config``
store (beside the auto-recall settings of ``agent.recall``, under their own ``agent_*``
names), so a definition survives restarts and travels with the agent DB when it is shared,
and two peers that change two different settings at once both keep theirs.

Where ``config.yaml`` and the DB both define an agent, **the DB wins, key by key**: a setting
changed in chat is the later, deliberate choice, and it goes wherever the DB goes. A key the
DB leaves unset comes from ``config.yaml`` (then from the defaults); ``agent reset`` drops the
DB's value so the file's applies again. ``Definition.sources`` says where each key came from
(``agent show`` prints it).

Pure: parsing, validation and merging; reading and writing the DB is the caller's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from chazbot.config import NAME_PATTERN, AgentConfig
from chazbot.errors import InputError
from chazbot.memory.tools import TOOLS as MEMORY_TOOLS
from chazbot.reminders.tools import TOOLS as REMINDER_TOOLS
from chazbot.tools.builtins import BUILTIN_NAMES

TOOLS = [*MEMORY_TOOLS, *REMINDER_TOOLS, *BUILTIN_NAMES]
MCP_TOOL_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]|_[A-Za-z0-9-]){0,31}__(?:\*|[\w-]{1,64})")
"""An MCP server's tool (``notes__search``) or all of them (``notes__*``): the servers are
config.yaml's, so chat may name any; one no server offers is never offered."""

NAME_FIELD = "agent_name"
"""Written by ``agent new``: the agent was made in chat (it is hosted without config.yaml)."""
MADE_BY_FIELD = "agent_made_by"
"""Written by ``agent new``: who made it (a Matrix id, ``local`` for the operator)."""
SETTINGS: dict[str, str] = {
    "system_prompt": "agent_system_prompt",
    "model": "agent_model",
    "allowed_tools": "agent_allowed_tools",
    "capture": "agent_capture",
    "memory_audience": "agent_memory_audience",
    "default_memory_banks": "agent_default_memory_banks",
}
"""The settings chat may set, and their field names in the agent DB's ``config`` store."""
DEFINITION_FIELDS = frozenset({NAME_FIELD, MADE_BY_FIELD, *SETTINGS.values()})
"""Every field of the ``config`` store that defines the agent: applied only when a key this
peer holds signed it (``peer_hosting.Hosting._fields``)."""
LIST_SETTINGS = ("allowed_tools", "default_memory_banks")
MAX_PROMPT_CHARS = 8000
"""A system prompt's bound: about 2,000 tokens, which leaves a 4k-context model room to talk."""
MAX_MODEL_CHARS = 2048
MAX_LIST_ITEMS = 32
RESERVED_NAMES = frozenset({"new", "set", "reset", "show", "delete", "reload"})
"""The ``agent <verb>`` words: an agent by one of these names could not be chosen by
``agent <name>``."""

Source = Literal["config.yaml", "chat", "default"]


def setting_names() -> str:
    return ", ".join(SETTINGS)


def check_key(key: str) -> str:
    """The setting ``key`` names (case-insensitive); InputError naming the known ones."""
    found = key.strip().lower()
    if found not in SETTINGS:
        raise InputError(f"unknown agent setting {key[:40]!r}; settings: {setting_names()}")
    return found


def parse_value(key: str, text: str) -> Any:
    """The stored value of one setting as typed in chat, checked; InputError (one line).

    Lists (``allowed_tools``, ``default_memory_banks``) are words split by commas or spaces;
    ``none`` is the empty list. Every value is checked as ``AgentConfig`` checks it.
    """
    key = check_key(key)
    text = text.strip()
    value: Any
    if key in LIST_SETTINGS:
        words = [w for w in re.split(r"[,\s]+", text) if w]
        value = [] if [w.lower() for w in words] == ["none"] else list(dict.fromkeys(words))
        if len(value) > MAX_LIST_ITEMS:
            raise InputError(f"{key}: at most {MAX_LIST_ITEMS} names, got {len(value)}")
    else:
        if not text:
            raise InputError(f"{key} needs a value (agent reset clears it)")
        value = text
    if key == "system_prompt" and len(value) > MAX_PROMPT_CHARS:
        raise InputError(
            f"system_prompt is {len(value):,} characters; at most {MAX_PROMPT_CHARS:,}"
        )
    if key == "model" and len(value) > MAX_MODEL_CHARS:
        raise InputError(f"model is {len(value):,} characters; at most {MAX_MODEL_CHARS:,}")
    if key in ("capture", "memory_audience"):
        value = value.lower()
    if key == "allowed_tools":  # an MCP server's tools: <server>__<tool> or <server>__*
        unknown = [t for t in value if t not in TOOLS and not MCP_TOOL_NAME.fullmatch(t)]
        if unknown:
            raise InputError(
                f"allowed_tools: no tool named {', '.join(unknown)}; tools: {', '.join(TOOLS)}"
            )
    try:
        AgentConfig.model_validate({"name": "check", key: value})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"{key}: {err['msg'].removeprefix('Value error, ')}") from None
    return value


def check_new_name(name: str) -> str:
    """A name ``agent new`` may use (the config's pattern, not a verb of ``agent``)."""
    if not re.fullmatch(NAME_PATTERN, name):
        raise InputError(
            f"bad agent name {name[:64]!r}: 1-64 letters, digits, '_', '.', '-', "
            "starting with a letter or digit"
        )
    if name.lower() in RESERVED_NAMES:
        raise InputError(f"{name!r} is a word of the agent command; pick another agent name")
    return name


def parse_settings(words: list[str]) -> dict[str, Any]:
    """``key=value`` words (``agent new``) as stored values; InputError on the first bad one."""
    settings: dict[str, Any] = {}
    for word in words:
        key, eq, text = word.partition("=")
        if not eq:
            raise InputError(
                f"expected key=value, got {word[:40]!r} (quote a value with spaces: "
                'system_prompt="You are …")'
            )
        settings[check_key(key)] = parse_value(key, text)
    return settings


def stored_ops(settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``config`` store operations that write ``settings`` (None unsets a key)."""
    return [{"op": "set", "field": SETTINGS[k], "value": v} for k, v in settings.items()]


@dataclass(frozen=True)
class Definition:
    """An agent's effective config and where each setting came from."""

    config: AgentConfig
    in_file: bool
    """config.yaml defines the agent."""
    in_chat: bool
    """``agent new`` made it (its DB holds ``agent_name``)."""
    sources: dict[str, Source] = field(default_factory=dict)
    overridden: tuple[str, ...] = ()
    """Keys config.yaml sets that the DB's value overrides."""
    ignored: tuple[str, ...] = ()
    """Stored keys whose value does not validate (say, from a peer with newer code)."""

    @property
    def origin(self) -> str:
        """Where the definition comes from, as the ``agents`` command says it."""
        chat = [k for k, s in self.sources.items() if s == "chat"]
        if not self.in_file:
            return "chat"
        if chat:
            return "config.yaml + chat (" + ", ".join(chat) + ")"
        return "config.yaml"


def stored_settings(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a DB's ``config`` store holds (unset ones left out)."""
    return {k: fields[f] for k, f in SETTINGS.items() if fields.get(f) is not None}


def merge(name: str, file: AgentConfig | None, fields: Mapping[str, Any]) -> Definition:
    """The effective config of agent ``name``: the DB's settings over config.yaml's (``file``,
    None when the file does not define it) over the defaults. A stored value that does not
    validate is left out (``ignored``) rather than stopping the agent."""
    base: dict[str, Any] = (
        file.model_dump(exclude_unset=True) if file is not None else {"name": name}
    )
    file_keys = set(base) - {"name"}
    stored = stored_settings(fields)
    ignored: list[str] = []
    merged = dict(base)
    for key, value in stored.items():
        try:
            AgentConfig.model_validate({**merged, key: value})
        except ValidationError:
            ignored.append(key)
            continue
        merged[key] = value
    config = AgentConfig.model_validate(merged)
    sources: dict[str, Source] = {}
    for key in SETTINGS:
        if key in stored and key not in ignored:
            sources[key] = "chat"
        elif key in file_keys:
            sources[key] = "config.yaml"
        else:
            sources[key] = "default"
    overridden = tuple(k for k in SETTINGS if sources[k] == "chat" and k in file_keys)
    return Definition(
        config,
        in_file=file is not None,
        in_chat=fields.get(NAME_FIELD) is not None,
        sources=sources,
        overridden=overridden,
        ignored=tuple(ignored),
    )


def changed_keys(old: AgentConfig, new: AgentConfig) -> list[str]:
    """The settings (and other config keys) whose value differs between two configs."""
    a, b = old.model_dump(), new.model_dump()
    return [k for k in b if a.get(k) != b.get(k)]


__all__ = [
    "DEFINITION_FIELDS",
    "LIST_SETTINGS",
    "MADE_BY_FIELD",
    "MAX_PROMPT_CHARS",
    "NAME_FIELD",
    "RESERVED_NAMES",
    "SETTINGS",
    "Definition",
    "changed_keys",
    "check_key",
    "check_new_name",
    "merge",
    "parse_settings",
    "parse_value",
    "stored_ops",
    "stored_settings",
]

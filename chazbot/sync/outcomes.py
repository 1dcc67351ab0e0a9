"""What sharing operations return: data for the command layer to put in words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from chazbot.sync.tables import AccessRequest


@dataclass(frozen=True)
class Imported:
    """How an import went: ``pending`` (the owner must approve ``request_id``), ``done``
    (registered as ``name``), or the database came but needs a name here: ``unnamed`` (it
    has none) or ``name_taken`` (``name`` is a bank or agent here already)."""

    status: Literal["pending", "done", "unnamed", "name_taken"]
    permission: str
    db: str = ""
    name: str = ""
    request_id: int | None = None


@dataclass(frozen=True)
class PendingRequests:
    """Pending access requests: the total, the count per database (labelled by its name
    here), and the newest few."""

    total: int
    per_db: list[tuple[str, int]]
    newest: list[AccessRequest]
    labels: dict[str, str]


@dataclass(frozen=True)
class SyncPair:
    """One (database, remote) pair this peer syncs, labelled by the database's name here.
    ``state``: ``ok``, ``failing`` (``error`` says why) or ``off`` (sync is not running on
    this peer); the times are Unix times of when the remote last answered a pull and when a
    push last went through (None: not since the start)."""

    bank: str
    address: str
    pulled: int
    pushed: int
    state: Literal["ok", "failing", "off"]
    error: str = ""
    last_pull: float | None = None
    last_push: float | None = None


def ago(when: float | None, now: float) -> str:
    """``when`` (a Unix time) as a person reads it beside ``now``: "12 s ago", "never"."""
    if when is None:
        return "never"
    seconds = max(0, round(now - when))
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


__all__ = ["Imported", "PendingRequests", "SyncPair", "ago"]

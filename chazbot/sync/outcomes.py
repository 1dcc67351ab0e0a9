"""What sharing operations return: data for the command layer to put in words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from chazbot.ledger.local import AccessRequest


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


__all__ = ["Imported", "PendingRequests"]

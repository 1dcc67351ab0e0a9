"""Tool calls and the decisions on them, kept as signed entries in the agent's own DB
(SPEC §12): who asked for what, in which room, who approved or denied it and when, and how
the call ended. Store ``tool_calls``: one field per call (``c<hex>``), set when it is decided
and again when it ends, each time an entry signed with the agent's key; ``tools log`` lists a
room's. A field that does not parse is skipped (a newer peer may write more)."""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

from chazbot.ledger import KeyPair, Ledger

JOURNAL_STORE = "tool_calls"
ARGS_SHOWN = 300
NOTE_CHARS = 300


@dataclass(frozen=True)
class CallRecord:
    id: str
    tool: str
    args: str
    room: str
    asked_by: str
    agent: str
    at: str
    decision: str
    """``not needed`` (its policy is never, or auto-approved), ``approved``, ``denied``,
    ``timed out`` or ``refused`` (before any asking: schema, limits, owner)."""
    decided_by: str = ""
    outcome: str = "pending"
    """``pending``, ``ok``, ``error`` or ``not run``."""
    note: str = ""

    @classmethod
    def new(cls, tool: str, args: str, room: str, asked_by: str, agent: str) -> CallRecord:
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        shown = args if len(args) <= ARGS_SHOWN else args[:ARGS_SHOWN] + "…"
        return cls("c" + secrets.token_hex(6), tool, shown, room, asked_by, agent, now, "")

    def decided(self, decision: str, by: str = "") -> CallRecord:
        return replace(self, decision=decision, decided_by=by)

    def ended(self, outcome: str, note: str = "") -> CallRecord:
        return replace(self, outcome=outcome, note=note[:NOTE_CHARS])

    @classmethod
    def from_data(cls, cid: str, data: Any) -> CallRecord | None:
        if not isinstance(data, dict):
            return None
        try:
            values = {k: data[k] for k in ("tool", "args", "room", "asked_by", "agent", "at")}
            values |= {k: data.get(k, "") for k in ("decision", "decided_by", "note")}
            values["outcome"] = data.get("outcome", "pending")
        except KeyError:
            return None
        if not all(isinstance(v, str) for v in values.values()):
            return None
        return cls(id=cid, **values)


class Journal:
    """The tool calls of one agent DB, written with the agent's key."""

    def __init__(self, ledger: Ledger, db: str, key: KeyPair) -> None:
        self.ledger, self.db, self.key = ledger, db, key

    async def keep(self, record: CallRecord) -> None:
        data = {k: v for k, v in asdict(record).items() if k != "id"}
        await self.ledger.write(
            self.db, self.key, {JOURNAL_STORE: [{"op": "set", "field": record.id, "value": data}]}
        )

    async def all(self) -> list[CallRecord]:
        fields = await self.ledger.fields(self.db, JOURNAL_STORE)
        found = [CallRecord.from_data(cid, data) for cid, data in fields.items()]
        return sorted((r for r in found if r is not None), key=lambda r: (r.at, r.id))

    async def in_room(self, room: str | None) -> list[CallRecord]:
        """A room's calls, oldest first (None: every room's, the operator's view)."""
        return [r for r in await self.all() if room is None or r.room == room]


__all__ = ["JOURNAL_STORE", "CallRecord", "Journal"]

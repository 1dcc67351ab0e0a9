"""Sessions: one conversation (a Matrix room, a terminal chat) kept in its own session DB.

A session DB is written by the peer key. Its stores:

- ``meta``: ``kind = session``, ``name``
- ``session``: fields ``agent`` (the agent that answers), ``context_start`` (the history row
  number from which the model sees the conversation; ``/clear`` moves it), ``capture``
  (``/memory capture on|off`` for this room; unset: the agent's ``capture`` setting)
- ``attachments``: field per bank name -> ``{"db": id}`` or null once detached
- ``history``: rows ``{"role", "content", "sender"}``; a message taken back where it was said
  (a Matrix redaction or edit) gets a row ``{"role": "revision", "of": <its n>, "content"}``
  that replaces its words in what the model sees (empty: the message is left out)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chazbot.agent.undo import UndoSlots
from chazbot.ledger import KeyPair, Ledger
from chazbot.memory.banks import Registry

SESSION_STORE = "session"
ATTACH_STORE = "attachments"
HISTORY_STORE = "history"


@dataclass(frozen=True)
class SessionState:
    """A session's settings as read at once: its chosen agent and its capture switch."""

    agent: str | None  # the agent chosen here (``/agent NAME``); None: the default
    capture: bool | None  # ``/memory capture on|off``; None: the agent decides


@dataclass(frozen=True)
class Message:
    n: int
    role: str  # user | assistant
    content: str
    sender: str
    ts: int


class Session:
    """One conversation's persistent state."""

    def __init__(self, ledger: Ledger, key: KeyPair, name: str, db: str) -> None:
        self.ledger = ledger
        self.key = key
        self.name = name
        self.db = db
        self.undo = UndoSlots()  # what people forgot here lately (``agent.undo``)

    @classmethod
    async def open(cls, ledger: Ledger, registry: Registry, key: KeyPair, name: str) -> Session:
        hosted = await registry.get("session", name)
        if hosted is not None:
            return cls(ledger, key, hosted.name, hosted.db)
        db = await ledger.create_db(key, {"kind": "session", "name": name})
        await registry.add("session", name, db)
        return cls(ledger, key, name, db)

    async def settings(self) -> dict[str, Any]:
        return await self.ledger.fields(self.db, SESSION_STORE)

    async def state(self) -> SessionState:
        """The chosen agent and the capture switch, in one read (a turn reads them once)."""
        found = await self.settings()
        agent, capture = found.get("agent"), found.get("capture")
        return SessionState(
            agent if isinstance(agent, str) else None,
            capture if isinstance(capture, bool) else None,
        )

    async def agent_name(self) -> str | None:
        return (await self.state()).agent

    async def set_agent(self, name: str) -> None:
        await self._set(SESSION_STORE, "agent", name)

    async def capture(self) -> bool | None:
        """This room's capture switch: True (on), False (off) or None (the agent decides)."""
        return (await self.state()).capture

    async def set_capture(self, on: bool) -> None:
        await self._set(SESSION_STORE, "capture", on)

    async def attachments(self) -> dict[str, str]:
        found = await self.ledger.fields(self.db, ATTACH_STORE)
        return {
            name: value["db"]
            for name, value in sorted(found.items())
            if isinstance(value, dict) and isinstance(value.get("db"), str)
        }

    async def attach(self, bank: str, db: str) -> None:
        await self._set(ATTACH_STORE, bank, {"db": db})

    async def detach(self, bank: str) -> None:
        await self._set(ATTACH_STORE, bank, None)

    async def add_message(self, role: str, content: str, sender: str = "") -> None:
        row = {"role": role, "content": content, "sender": sender}
        await self.ledger.write(self.db, self.key, {HISTORY_STORE: [{"op": "insert", "row": row}]})

    async def clear(self) -> None:
        """Start a fresh context; the history stays in the log."""
        rows = await self.ledger.rows(self.db, HISTORY_STORE, limit=1, newest=True)
        await self._set(SESSION_STORE, "context_start", rows[-1].n + 1 if rows else 0)

    async def history(self, limit: int = 200) -> list[Message]:
        """The newest ``limit`` messages of the current context, oldest first."""
        start = (await self.settings()).get("context_start", 0)
        rows = await self.ledger.rows(
            self.db, HISTORY_STORE, after=int(start) - 1 if start else 0, limit=limit, newest=True
        )
        revised = {
            r.data["of"]: str(r.data.get("content", ""))
            for r in rows
            if r.data.get("role") == "revision" and isinstance(r.data.get("of"), int)
        }
        out = [
            Message(
                r.n,
                str(r.data.get("role")),
                revised.get(r.n, str(r.data.get("content"))),
                str(r.data.get("sender", "")),
                r.ts,
            )
            for r in rows
            if r.data.get("role") in ("user", "assistant") and revised.get(r.n) != ""
        ]
        return out[-limit:]

    async def revise(self, revisions: dict[int, str]) -> None:
        """Replace what messages say in the history the model sees (``n`` -> new words; ""
        leaves the message out): messages redacted or edited where they were said."""
        ops = [
            {"op": "insert", "row": {"role": "revision", "of": n, "content": text}}
            for n, text in sorted(revisions.items())
        ]
        if ops:
            await self.ledger.write(self.db, self.key, {HISTORY_STORE: ops})

    async def _set(self, store: str, field: str, value: Any) -> None:
        await self.ledger.write(
            self.db, self.key, {store: [{"op": "set", "field": field, "value": value}]}
        )

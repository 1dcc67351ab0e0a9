"""What a turn (and a command) needs of the running peer: small protocols, not ``Peer``.

``peer.Peer`` and ``peer.Agent`` satisfy them; code above this layer hands them in. Keeping
them small keeps the agent and command layers testable with just a ledger and a memory engine,
and keeps ``peer.py`` (which imports those layers) out of their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from chazbot.agent.definition import Definition
    from chazbot.config import AgentConfig
    from chazbot.ledger import KeyPair, Ledger
    from chazbot.memory.engine import MemoryEngine
    from chazbot.memory.scope import MemoryScope
    from chazbot.reminders.store import ReminderBook


class MemoryHost(Protocol):
    """The peer's ledger and memory engine."""

    @property
    def ledger(self) -> Ledger: ...

    @property
    def memory(self) -> MemoryEngine: ...


class TurnHost(MemoryHost, Protocol):
    """What a turn needs of the peer: its ledger and memory engine, and its reminders part."""

    @property
    def reminders(self) -> ReminderBook: ...


class AgentHandle(Protocol):
    """One hosted agent: its name, config, key, its own DB, its memory scope and where its
    settings come from."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> AgentConfig: ...

    @property
    def key(self) -> KeyPair: ...

    @property
    def db(self) -> str: ...

    @property
    def memory(self) -> MemoryScope: ...

    @property
    def definition(self) -> Definition | None:
        """Where each setting of ``config`` came from (None: config.yaml alone says it)."""
        ...


__all__ = ["AgentHandle", "MemoryHost", "TurnHost"]

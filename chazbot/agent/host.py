"""What a turn (and a command) needs of the running peer: small protocols, not ``Peer``.

``peer.Peer`` and ``peer.Agent`` satisfy them; code above this layer hands them in. Keeping
them small keeps the agent and command layers testable with just a ledger and a memory engine,
and keeps ``peer.py`` (which imports those layers) out of their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping

    from chazbot.config import AgentConfig
    from chazbot.ledger import KeyPair, Ledger
    from chazbot.memory.engine import MemoryEngine
    from chazbot.memory.scope import MemoryScope


class MemoryHost(Protocol):
    """The peer's ledger, memory engine and hosted agents (a person's reminders are counted
    over all of them)."""

    @property
    def ledger(self) -> Ledger: ...

    @property
    def memory(self) -> MemoryEngine: ...

    @property
    def agents(self) -> Mapping[str, AgentHandle]: ...


class AgentHandle(Protocol):
    """One hosted agent: its name, config, key, its own DB and its memory scope."""

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


__all__ = ["AgentHandle", "MemoryHost"]

"""What a command runs against: the peer, the agent and session it was given in, the sender.

``CommandPeer`` is what the command handlers use of the running peer (``peer.Peer`` is one);
commands see that much, not the whole ``Peer``, and ``peer.py`` stays out of their imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from chazbot.agent.host import AgentHandle, MemoryHost

if TYPE_CHECKING:
    from chazbot.agent.session import Session
    from chazbot.ledger import KeyPair
    from chazbot.memory.banks import Registry


class CommandPeer(MemoryHost, Protocol):
    """The peer as commands use it: memory, the registry of banks, agents and sharing."""

    @property
    def key(self) -> KeyPair: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def agents(self) -> Mapping[str, AgentHandle]: ...

    def agent(self, name: str) -> AgentHandle: ...

    async def create_bank(self, name: str, description: str = "") -> str: ...

    async def share(self, db: str) -> str: ...

    async def unshare(self, db: str) -> None: ...

    async def import_bank(self, ticket: str, permission: str, name: str | None) -> str: ...

    async def sharing_requests(self) -> str: ...

    async def sharing_decide(self, request_id: str, approve: bool) -> str: ...


@dataclass
class Context:
    peer: CommandPeer
    agent: AgentHandle
    session: Session
    sender: str = "local"
    is_admin: bool = True
    prefix: str = "/"


__all__ = ["CommandPeer", "Context"]

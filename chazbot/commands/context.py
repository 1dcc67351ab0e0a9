"""What a command runs against: the peer, the agent and session it was given in, the sender.

``CommandPeer`` is what the command handlers use of the running peer (``peer.Peer`` is one);
commands see that much, not the whole ``Peer``, and ``peer.py`` stays out of their imports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from chazbot.agent.host import AgentHandle, MemoryHost
from chazbot.memory.scope import OPERATOR_HEARING, Hearing, MemoryScope

if TYPE_CHECKING:
    from chazbot.agent.capture import Mode
    from chazbot.agent.chat_model import ChatModel
    from chazbot.agent.session import Session
    from chazbot.config import Config
    from chazbot.ledger import KeyPair
    from chazbot.ledger.people import People
    from chazbot.memory.banks import Hosted, Registry
    from chazbot.sync import Sharing
    from chazbot.sync.outcomes import Imported, PendingRequests, SyncPair
    from chazbot.sync.tables import AccessRequest


class CommandPeer(MemoryHost, Protocol):
    """The peer as commands use it: memory, the registry of banks, agents, sharing, capture."""

    @property
    def key(self) -> KeyPair: ...

    @property
    def config(self) -> Config: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def people(self) -> People: ...

    @property
    def sharing(self) -> Sharing: ...

    @property
    def agents(self) -> Mapping[str, AgentHandle]: ...

    def agent(self, name: str) -> AgentHandle: ...

    def allowed_agents(self, session: str) -> Sequence[AgentHandle]: ...

    def check_agent_allowed(self, session: str, agent: AgentHandle) -> None: ...

    async def capture_mode(self, agent: AgentHandle, session: Session | None = None) -> Mode: ...

    @property
    def llm(self) -> ChatModel | None: ...

    async def new_agent(self, name: str, settings: dict[str, Any], made_by: str) -> AgentHandle: ...

    async def set_agent_setting(
        self, name: str, key: str, value: Any
    ) -> tuple[AgentHandle, list[str]]: ...

    async def delete_agent(self, name: str, by: str) -> tuple[AgentHandle, AgentHandle]: ...

    async def reload_config(self) -> str: ...

    async def create_bank(
        self, name: str, description: str = "", created_by: str | None = None, bounded: bool = False
    ) -> str: ...

    async def delete_bank(self, hosted: Hosted) -> None: ...

    async def share(self, db: str) -> str: ...

    async def unshare(self, db: str) -> None: ...

    async def import_bank(self, ticket: str, permission: str, name: str | None) -> Imported: ...

    async def pending_requests(self, shown: int = 10) -> PendingRequests: ...

    async def decide_request(self, number: int, approve: bool) -> AccessRequest: ...

    async def sync_pairs(self) -> list[SyncPair]: ...


@dataclass
class Context:
    peer: CommandPeer
    agent: AgentHandle
    session: Session
    sender: str = "local"
    is_admin: bool = False  # the least: whoever builds a Context says when it is an admin
    prefix: str = "/"
    hearing: Hearing = OPERATOR_HEARING
    """Who hears the reply (SPEC §5c): what the command may show and hide."""

    @property
    def memory(self) -> MemoryScope:
        """The agent's memory as heard where the command was given."""
        return self.agent.memory.within(self.hearing)


__all__ = ["CommandPeer", "Context"]

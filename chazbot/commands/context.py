"""What a command runs against: the parts of the peer it needs, the agent and session it was
given in, the sender.

Each part is declared here by what commands use of it, as a small protocol: ``Agents`` (the
agent and room commands), ``Banks`` (bank commands), ``SharingDesk`` (sharing and peer
status), ``Models`` (capture and model choice). The peer's parts satisfy them
(``peer_hosting.Hosting`` is ``Agents`` and ``Banks``, ``peer_sharing.Sharing`` is
``SharingDesk``, ``peer_models.Models`` is ``Models``); the web pages use the same ones.
``peer.py`` stays out of the command layer's imports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from chazbot.agent.host import AgentHandle
from chazbot.agent.recall import recall_settings
from chazbot.memory.banks import read_refs
from chazbot.memory.scope import OPERATOR_HEARING, Hearing, MemoryScope

if TYPE_CHECKING:
    from chazbot.agent.capture import Mode
    from chazbot.agent.chat_model import ChatModel
    from chazbot.agent.recall import RecallSettings
    from chazbot.agent.session import Session
    from chazbot.config import Config
    from chazbot.ledger import KeyPair, Ledger
    from chazbot.memory.banks import BankRef, Hosted, Registry
    from chazbot.memory.engine import MemoryEngine
    from chazbot.people.allowed import People
    from chazbot.reminders.store import ReminderBook
    from chazbot.sync.outcomes import Imported, PendingRequests, SyncPair
    from chazbot.sync.tables import AccessRequest
    from chazbot.tools import ToolBox


@dataclass(frozen=True)
class AgentMemory:
    """What the agents page shows of one agent's memory, beside its view's rows."""

    recall: RecallSettings
    refs: Mapping[str, BankRef]
    """The banks attached to it, by name."""
    size: int
    """Bytes of all entries of its database."""

    @classmethod
    async def read(cls, ledger: Ledger, db: str) -> AgentMemory:
        """Read from the ledger for the agent whose database is ``db`` (by the hosting part)."""
        return cls(
            await recall_settings(ledger, db), await read_refs(ledger, db), await ledger.db_size(db)
        )


class Agents(Protocol):
    """The hosted agents and the running config: what agent and room commands need."""

    @property
    def config(self) -> Config: ...

    @property
    def agents(self) -> Mapping[str, AgentHandle]: ...

    def agent(self, name: str) -> AgentHandle: ...

    def allowed_agents(self, session: str) -> Sequence[AgentHandle]: ...

    def check_agent_allowed(self, session: str, agent: AgentHandle) -> None: ...

    async def new_agent(self, name: str, settings: dict[str, Any], made_by: str) -> AgentHandle: ...

    async def set_agent_setting(
        self, name: str, key: str, value: Any
    ) -> tuple[AgentHandle, list[str]]: ...

    async def delete_agent(self, name: str, by: str) -> tuple[AgentHandle, AgentHandle]: ...

    async def reload_config(self) -> str: ...

    async def agent_memory(self, agent: AgentHandle) -> AgentMemory:
        """Its recall settings, attached banks and database size (the web agents page)."""
        ...


class Banks(Protocol):
    """The registry of hosted banks and agents: what bank commands need."""

    @property
    def registry(self) -> Registry: ...

    async def create_bank(
        self, name: str, description: str = "", created_by: str | None = None, bounded: bool = False
    ) -> str: ...

    async def delete_bank(self, hosted: Hosted) -> None: ...


class SharingDesk(Protocol):
    """Serving and importing banks, access requests, sync pairs: what sharing commands and
    the peer status need."""

    async def share(self, db: str) -> str: ...

    async def unshare(self, db: str) -> None: ...

    async def shared(self) -> list[str]: ...

    async def import_bank(self, ticket: str, permission: str, name: str | None) -> Imported: ...

    async def pending_requests(self, shown: int = 10) -> PendingRequests: ...

    async def requests_of(self, db: str) -> list[AccessRequest]: ...

    async def decide_request(self, number: int, approve: bool) -> AccessRequest: ...

    async def sync_pairs(self) -> list[SyncPair]: ...

    async def label(self, db: str) -> str: ...


class Models(Protocol):
    """The peer's chat model and what capture does: what model and capture commands need."""

    @property
    def llm(self) -> ChatModel | None: ...

    async def capture_mode(self, agent: AgentHandle, session: Session | None = None) -> Mode: ...


@dataclass
class Context:
    """One command's parts: the peer's (as the protocols above) and where it was given."""

    agents: Agents
    banks: Banks
    sharing: SharingDesk
    models: Models
    ledger: Ledger
    engine: MemoryEngine
    """The peer's memory engine (every database); ``memory`` is the agent's, as heard."""
    key: KeyPair
    """The peer's key."""
    people: People
    reminders: ReminderBook
    """The peer's reminders part: ``reminders.of(agent.db, agent.key)``."""
    agent: AgentHandle
    session: Session
    sender: str = "local"
    is_admin: bool = False  # the least: whoever builds a Context says when it is an admin
    hearing: Hearing = OPERATOR_HEARING
    """Who hears the reply (SPEC §5c): what the command may show and hide, and how commands
    are written there (``prefix``)."""
    tools: ToolBox | None = None
    """The peer's tools part (built-ins, MCP servers, approvals); None where a caller has none."""

    @property
    def prefix(self) -> str:
        """How commands are written where the reply goes (``!chaz `` in Matrix)."""
        return self.hearing.prefix

    @property
    def memory(self) -> MemoryScope:
        """The agent's memory as heard where the command was given."""
        return self.agent.memory.within(self.hearing)


__all__ = ["AgentMemory", "Agents", "Banks", "Context", "Models", "SharingDesk"]

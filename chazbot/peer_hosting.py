"""One job of the peer: its agents and banks (loading agents, creating, applying and deleting
banks, which agents may answer in a room).

``Peer`` takes these methods from ``HostingMixin``; the state they use (config, ledger, key,
registry, memory engine, sharing, the replicator, ``agents``) is set up by ``Peer``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chazbot.agent.session import Session
from chazbot.errors import ChazError, ConfigError, NotFound, PermissionDenied
from chazbot.ledger import KeyPair, Level, Permission
from chazbot.memory.banks import CREATED_BY, Hosted, Registry, check_name, grant, read_refs, ref_op
from chazbot.memory.rows import Hit
from chazbot.memory.scope import MemoryScope
from chazbot.sync.store import Remotes

if TYPE_CHECKING:
    from chazbot.agent.host import AgentHandle
    from chazbot.config import AgentConfig, Config
    from chazbot.ledger import Ledger
    from chazbot.memory.engine import MemoryEngine
    from chazbot.sync import Replicator, Sharing

log = logging.getLogger("chazbot.peer")


@dataclass
class Agent:
    """A hosted agent: its config, key, DB, and its memory as it sees it."""

    config: AgentConfig
    key: KeyPair
    db: str
    memory: MemoryScope

    @property
    def name(self) -> str:
        return self.config.name

    async def remember(
        self, key: str, value: str, tags: list[str] | None = None, bank: str | None = None
    ) -> str:
        """Store a memory row in own memory (or ``bank``); return its row id."""
        return await self.memory.remember(key, value, tags, bank)

    async def recall(
        self,
        query: str,
        tags: list[str] | None = None,
        limit: int = 10,
        bank: str | None = None,
    ) -> list[Hit]:
        """Ranked memories (BM25 + vectors fused by RRF; newest first for an empty query)."""
        return await self.memory.recall(query, tags, limit, bank)

    async def forget(self, key: str, bank: str | None = None) -> None:
        """Hide a key from recall (a tombstone; the log keeps the history)."""
        await self.memory.forget(key, bank)


class HostingMixin:
    """The agents and banks of one peer (see the module docstring)."""

    config: Config
    ledger: Ledger
    key: KeyPair
    registry: Registry
    memory: MemoryEngine
    sharing: Sharing
    replicator: Replicator | None
    agents: dict[str, Agent]

    def agent(self, name: str) -> Agent:
        found = self.agents.get(name.lower())
        if found is None:
            known = ", ".join(sorted(a.name for a in self.agents.values()))
            raise NotFound(f"no agent named {name!r}; agents here: {known}")
        return found

    async def load_agents(self) -> None:
        """Create or open every configured agent and apply its default banks (idempotent)."""
        agents: dict[str, Agent] = {}
        for cfg in self.config.agents:
            hosted = await self.registry.get("agent", cfg.name)
            if hosted is None:
                key = KeyPair.generate()
                await self.registry.save_key(key, f"agent:{cfg.name.lower()}")
                db = await self.ledger.create_db(key, {"kind": "agent", "name": cfg.name})
                await self.registry.add("agent", cfg.name, db)
                log.info("created agent %s (db %s)", cfg.name, db)
            else:
                found = await self.registry.key(f"agent:{cfg.name.lower()}")
                if found is None:
                    raise ConfigError(
                        f"agent {cfg.name}: its private key is missing from the state"
                    )
                key, db = found, hosted.db
            agents[cfg.name.lower()] = Agent(
                cfg, key, db, MemoryScope(self.memory, cfg.name, key, db, self.registry)
            )
        self.agents = agents
        for agent in agents.values():
            await self.apply_default_banks(agent)

    async def create_bank(
        self, name: str, description: str = "", created_by: str | None = None, bounded: bool = False
    ) -> str:
        """Create and register a bank; ``created_by`` is recorded, and ``bounded`` (a non-admin)
        holds them to the bank bounds (``banks.check_bank_room``)."""
        check_name(name)
        if await self.registry.get("agent", name) is not None:
            raise ConfigError(f"{name!r} is an agent's name; pick another bank name")

        async def make() -> str:
            key = KeyPair.generate()
            await self.registry.save_key(key, f"bank:{name.lower()}")
            return await self.ledger.create_db(
                key, {"kind": "bank", "name": name, "description": description}
            )

        data = {"description": description}
        if created_by is not None:
            data[CREATED_BY] = created_by
        bound_for = created_by if bounded and created_by is not None else None
        return await self.registry.create("bank", name, make, data, bound_for)

    async def apply_default_banks(self, agent: Agent) -> None:
        """Create missing default banks, grant the agent write and write its ref.

        One that cannot be applied (a bank this peer holds only read on, say) logs one
        warning line; it never stops a start or a reload.
        """
        refs = await read_refs(self.ledger, agent.db)
        for name in agent.config.default_memory_banks:
            try:
                hosted = await self.registry.get("bank", name)
                db = hosted.db if hosted is not None else await self.create_bank(name)
                ref = refs.get(name)
                held = await agent.memory.access(db)
                if held.level >= Level.WRITE and ref is not None and ref.db == db:
                    continue
                meta = await self.ledger.fields(db, "meta")
                await grant(
                    self.ledger,
                    self.registry,
                    name,
                    db,
                    agent.key,
                    agent.db,
                    Permission.parse("write"),
                    agent_name=agent.name,
                    owner_ref=str(meta.get("name") or db),
                )
                log.info("granted %s write on default bank %s", agent.name, name)
            except ChazError as exc:
                log.warning(
                    "default_memory_banks of %s: cannot apply %s: %s", agent.name, name, exc
                )

    async def delete_bank(self, hosted: Hosted) -> None:
        """Unregister a bank; remove it from every agent's refs and every session's
        attachments, stop serving and syncing it, drop its delegations. The DB stays."""
        db = hosted.db
        await self.registry.remove("bank", hosted.name)
        for agent in await self.registry.all("agent"):
            key = await self.registry.key(f"agent:{agent.name.lower()}")
            if key is None:
                continue
            for ref in (await read_refs(self.ledger, agent.db)).values():
                if ref.db == db:
                    await self.ledger.write(agent.db, key, ref_op(ref.name, None, None))
        for hosted_session in await self.registry.all("session"):
            session = Session(self.ledger, self.key, hosted_session.name, hosted_session.db)
            for name, attached in (await session.attachments()).items():
                if attached == db:
                    await session.detach(name)
        await self.sharing.unshare(db)
        if self.replicator is not None:
            await self.replicator.remove_remote(db)
        else:
            await Remotes(self.ledger).remove(db)
        await self.registry.drop_delegations(db)

    def allowed_agents(self, session: str) -> list[Agent]:
        """The agents that may answer in ``session`` (all, unless the config restricts the
        room), in order: the first is the session's default."""
        names = self.config.agents_for_session(session)
        if names is None:
            return list(self.agents.values())
        return [self.agents[n.lower()] for n in names if n.lower() in self.agents]

    def check_agent_allowed(self, session: str, agent: AgentHandle) -> None:
        allowed = self.allowed_agents(session)
        if agent not in allowed:
            names = ", ".join(a.name for a in allowed) or "none"
            raise PermissionDenied(
                f"{agent.name} may not answer in this room; the agents it may use: {names}"
            )


__all__ = ["Agent", "HostingMixin"]

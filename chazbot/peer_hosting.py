"""One job of the peer: its agents and banks (loading agents from config.yaml and from their
own DBs, making and changing agents from chat, reloading the config, creating, applying and
deleting banks, which agents may answer in a room).

An agent's effective config is ``agent.definition.merge``: the settings stored in its DB's
``config`` store (``agent new``, ``agent set`` from chat) over config.yaml's over the
defaults. An agent made in chat is hosted whether or not config.yaml names it.

``Peer.open`` builds ``Hosting`` whole (``peer.hosting``); it holds the running config and
the agents, and asks the sharing part to drop a deleted bank (``BankDropper``). Commands reach
it as ``commands.context.Agents`` and ``commands.context.Banks``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from chazbot.agent.definition import (
    DEFINITION_FIELDS,
    MADE_BY_FIELD,
    NAME_FIELD,
    Definition,
    check_new_name,
    merge,
    stored_ops,
)
from chazbot.agent.recall import CONFIG_STORE
from chazbot.agent.session import Session
from chazbot.commands.context import AgentMemory
from chazbot.errors import (
    ChazError,
    ConfigError,
    ConflictError,
    InputError,
    NotFound,
    PermissionDenied,
    Unavailable,
)
from chazbot.ledger import KeyPair, Level, Permission
from chazbot.memory.banks import CREATED_BY, Hosted, Registry, check_name, grant, read_refs, ref_op
from chazbot.memory.rows import Hit
from chazbot.memory.scope import MemoryScope
from chazbot.reload_summary import reload_summary

if TYPE_CHECKING:
    from chazbot.agent.host import AgentHandle
    from chazbot.config import AgentConfig, Config
    from chazbot.ledger import Ledger
    from chazbot.ledger.records import Applied
    from chazbot.memory.engine import MemoryEngine

log = logging.getLogger("chazbot.peer")


@dataclass
class Agent:
    """A hosted agent: its config, key, DB, and its memory as it sees it."""

    config: AgentConfig
    key: KeyPair
    db: str
    memory: MemoryScope
    definition: Definition | None = None
    """Where each setting of ``config`` came from (config.yaml, chat, the defaults)."""

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


class BankDropper(Protocol):
    """What deleting a bank asks of the sharing part: stop serving and syncing it."""

    async def drop(self, db: str) -> None: ...


class Hosting:
    """The agents and banks of one peer (see the module docstring).

    ``config_loader`` reads the config file again (``chazbot run``); None: nothing to reload.
    ``agents`` is empty until ``load_agents``."""

    def __init__(
        self,
        config: Config,
        ledger: Ledger,
        key: KeyPair,
        registry: Registry,
        memory: MemoryEngine,
        banks_out: BankDropper,
        config_loader: Callable[[], Config] | None = None,
    ) -> None:
        self.config = config
        self.ledger = ledger
        self.key = key
        self.registry = registry
        self.memory = memory
        self._config_loader = config_loader
        self.agents: dict[str, Agent] = {}
        self.redefining: set[asyncio.Task[None]] = set()
        self._banks_out = banks_out
        self._lock = asyncio.Lock()  # one agent change (new, set, reset, reload) at a time
        self.on_reload: list[Callable[[Config], Awaitable[object]]] = []
        """Run with a reloaded config once it is the running one (the peer's tools part)."""

    def agent(self, name: str) -> Agent:
        found = self.agents.get(name.lower())
        if found is None:
            known = ", ".join(sorted(a.name for a in self.agents.values()))
            raise NotFound(f"no agent named {name!r}; agents here: {known}")
        return found

    async def load_agents(self) -> list[str]:
        """Create or open every configured agent, open every agent made in chat, and apply
        their default banks (idempotent); the default banks granted, as ``agent→bank``."""
        agents = await self._build_agents(self.config)
        check_room_agents(self.config, agents)
        self.agents = agents
        granted: list[str] = []
        for agent in agents.values():
            granted += [f"{agent.name}→{b}" for b in await self.apply_default_banks(agent)]
        return granted

    async def _build_agents(self, config: Config) -> dict[str, Agent]:
        """The agents ``config`` and the chat-made agent DBs define (creating the DB of a
        configured agent on first sight); ``self.agents`` is left as it is."""
        agents: dict[str, Agent] = {}
        for cfg in config.agents:
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
            agents[cfg.name.lower()] = self._agent(cfg.name, cfg, key, db, await self._fields(db))
        for hosted in await self.registry.all("agent"):
            if hosted.name.lower() in agents:
                continue
            fields = await self._fields(hosted.db)
            if fields.get(NAME_FIELD) is None:
                continue  # a config.yaml agent the file no longer names: not hosted
            own = await self.registry.key(f"agent:{hosted.name.lower()}")
            if own is None:
                log.warning("agent %s: its private key is missing; not hosted", hosted.name)
                continue
            agents[hosted.name.lower()] = self._agent(hosted.name, None, own, hosted.db, fields)
        return agents

    async def _fields(self, db: str) -> dict[str, Any]:
        """An agent DB's ``config`` fields as keys this peer holds signed them (the agent's
        own, this peer's): a definition changes only by those (SPEC §5c). A field another
        writer of the DB set (a peer it syncs with) is stored but not applied; logged."""
        trusted = {key.public for _, key in await self.ledger.keys.all()}
        fields, others = await self.ledger.fields_by(db, CONFIG_STORE, trusted)
        for name, author in sorted(others.items()):
            if name in DEFINITION_FIELDS:
                log.warning(
                    "agent DB %s: %s was set by %s, a key this peer does not hold; not applied",
                    db[:20],
                    name,
                    author[:24],
                )
        return fields

    def _agent(
        self, name: str, file: AgentConfig | None, key: KeyPair, db: str, fields: dict[str, Any]
    ) -> Agent:
        definition = merge(name, file, fields)
        for ignored in definition.ignored:
            log.warning("agent %s: its stored %s does not validate; ignored", name, ignored)
        scope = MemoryScope(self.memory, definition.config.name, key, db, self.registry)
        return Agent(definition.config, key, db, scope, definition)

    def _file_config(self, name: str) -> AgentConfig | None:
        for cfg in self.config.agents:
            if cfg.name.lower() == name.lower():
                return cfg
        return None

    async def new_agent(self, name: str, settings: dict[str, Any], made_by: str) -> Agent:
        """Make an agent in chat: a key, a DB whose ``config`` store holds ``settings``
        (checked already by ``definition.parse_value``), its default banks. Nothing is
        written when the name is taken (by an agent, a bank, or an agent hosted before)."""
        check_new_name(name)
        await self._check_default_banks(settings.get("default_memory_banks") or [])
        async with self._lock:
            if name.lower() in self.agents:
                raise ConflictError(f"an agent named {name!r} exists already")
            if await self.registry.get("bank", name) is not None:
                raise ConflictError(f"{name!r} is a bank's name; pick another agent name")
            if await self.registry.get("agent", name) is not None:
                raise ConflictError(
                    f"an agent named {name!r} was hosted here before (its DB is kept); "
                    "pick another name, or put it back in config.yaml"
                )
            ops = [{"op": "set", "field": NAME_FIELD, "value": name}, *stored_ops(settings)]
            ops.append({"op": "set", "field": MADE_BY_FIELD, "value": made_by[:255]})

            async def make() -> str:
                key = KeyPair.generate()
                await self.registry.save_key(key, f"agent:{name.lower()}")
                db = await self.ledger.create_db(key, {"kind": "agent", "name": name})
                await self.ledger.write(db, key, {CONFIG_STORE: ops})
                return db

            db = await self.registry.create("agent", name, make)
            key = await self.registry.key(f"agent:{name.lower()}")
            assert key is not None
            agent = self._agent(name, None, key, db, await self._fields(db))
            self.agents[name.lower()] = agent
            log.info("agent %s made in chat by %s (db %s)", name, made_by, db)
        await self.apply_default_banks(agent)
        return agent

    async def delete_agent(self, name: str, by: str) -> tuple[Agent, Agent]:
        """Stop hosting an agent made in chat; (it, the agent a room now gets by default:
        config.yaml names one at least).

        Its DB says so (its name field unset, signed like any change), so it stays retired
        across restarts; its DB, key and memory are kept and its name stays taken, so naming
        it in config.yaml brings it back with everything it knew. An agent config.yaml
        defines or one ``matrix.room_agents`` names is refused, and nothing is written."""
        agent = self.agent(name)
        definition = agent.definition
        if definition is None or not definition.in_chat or definition.in_file:
            raise InputError(
                f"{agent.name} is defined in config.yaml: remove it there, then reload the config"
            )
        rooms = [glob for glob, n in self.config.room_agent_names() if n.lower() == name.lower()]
        if rooms:
            raise InputError(
                f"matrix.room_agents names {agent.name} (for {', '.join(rooms)}): take it out "
                "there first"
            )
        async with self._lock:
            unset = {"op": "set", "field": NAME_FIELD, "value": None}
            await self.ledger.write(agent.db, agent.key, {CONFIG_STORE: [unset]})
            del self.agents[agent.name.lower()]
            log.info("agent %s deleted in chat by %s (db %s kept)", agent.name, by, agent.db)
        return agent, next(iter(self.agents.values()))

    async def _check_default_banks(self, names: list[str]) -> None:
        """A default bank must be a bank (or a name free for one), not another agent."""
        for bank in names:
            if await self.registry.get("bank", bank) is None and (
                await self.registry.get("agent", bank) is not None
            ):
                raise InputError(f"default_memory_banks: {bank!r} is an agent's name, not a bank")

    async def set_agent_setting(self, name: str, key: str, value: Any) -> tuple[Agent, list[str]]:
        """Store one setting (None: drop the DB's value, so config.yaml's or the default
        applies) in the agent's DB and apply it now; the agent and the banks granted."""
        agent = self.agent(name)
        if key == "default_memory_banks" and value:
            await self._check_default_banks(value)
        async with self._lock:
            await self.ledger.write(agent.db, agent.key, {CONFIG_STORE: stored_ops({key: value})})
            await self._redefine(agent)
        granted = await self.apply_default_banks(agent) if key == "default_memory_banks" else []
        return agent, granted

    async def _redefine(self, agent: Agent) -> None:
        """Merge the agent's definition again from its DB and config.yaml (under the
        hosting lock)."""
        fresh = self._agent(
            agent.name,
            self._file_config(agent.name),
            agent.key,
            agent.db,
            await self._fields(agent.db),
        )
        agent.config, agent.definition = fresh.config, fresh.definition

    def on_agent_fields(self, applied: Applied) -> None:
        """A ledger listener: a hosted agent whose DB's ``config`` store changed by any way
        (a setting that came by sync from another peer, a direct write) takes its new
        definition now, not at the next reload. ``agent set`` redefines it itself; doing
        it again here is harmless."""
        changed = {db for db, store, _ in applied.fields if store == CONFIG_STORE}
        for agent in list(self.agents.values()) if changed else ():
            if agent.db in changed:
                task = asyncio.create_task(self._redefine_hosted(agent))
                self.redefining.add(task)
                task.add_done_callback(self.redefining.discard)

    async def _redefine_hosted(self, agent: Agent) -> None:
        try:
            async with self._lock:
                if self.agents.get(agent.name.lower()) is agent:  # not deleted or reloaded
                    await self._redefine(agent)
        except ChazError as exc:  # the ledger closing under it, say
            log.warning("agent %s: could not apply its changed settings: %s", agent.name, exc)

    async def reload_config(self) -> str:
        """Re-read the config file and apply its agents and default banks (idempotent); what
        changed, in one paragraph. A config error (one line naming the key) changes nothing:
        the running config and agents stay as they were. What SIGHUP (``kill -HUP`` the service)
        and the ``agent reload`` command run (``!chaz agent reload`` in Matrix, with the
        configured prefix; ``chazbot cmd "/agent reload"`` on the host)."""
        if self._config_loader is None:
            raise Unavailable(
                "no config file to reload here: a reload works in a running service (chazbot run)"
            )
        fresh = self._config_loader()  # ConfigError: nothing was changed
        fresh = fresh.model_copy(update={"state_dir": self.config.state_dir})
        async with self._lock:
            old_config, old_agents = self.config, self.agents
            agents = await self._build_agents(fresh)
            check_room_agents(fresh, agents)  # ConfigError: nothing was changed
            self.config, self.agents = fresh, agents
            for apply in self.on_reload:  # the peer's tools: settings and MCP servers
                await apply(fresh)
        granted: list[str] = []
        for agent in agents.values():
            granted += [f"{agent.name}→{b}" for b in await self.apply_default_banks(agent)]
        return reload_summary(old_config, fresh, old_agents, agents, granted)

    async def agent_memory(self, agent: AgentHandle) -> AgentMemory:  # (Agents)
        return await AgentMemory.read(self.ledger, agent.db)

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

    async def apply_default_banks(self, agent: Agent) -> list[str]:
        """Create missing default banks, grant the agent write and write its ref; the names
        of the banks granted now (none when all were granted before: idempotent).

        One that cannot be applied (a bank this peer holds only read on, say) logs one
        warning line; it never stops a start or a reload.
        """
        granted: list[str] = []
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
                granted.append(name)
            except ChazError as exc:
                log.warning(
                    "default_memory_banks of %s: cannot apply %s: %s", agent.name, name, exc
                )
        return granted

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
        await self._banks_out.drop(db)
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


def check_room_agents(config: Config, agents: dict[str, Agent]) -> None:
    """Every agent ``matrix.room_agents`` names must be hosted (in config.yaml or made in
    chat); one line naming the first that is not."""
    for glob, name in config.room_agent_names():
        if name.lower() not in agents:
            raise ConfigError(
                f"matrix.room_agents[{glob!r}] names no agent of config.yaml or made in chat: "
                f"{name}"
            )


__all__ = ["Agent", "BankDropper", "Hosting"]

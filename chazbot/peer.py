"""One running peer: its state directory, ledger, keys, agents, banks and memory engine.

``Peer.open`` creates what is missing on first start (the state directory with owner-only
permissions, the peer key, each configured agent's key and DB, the default banks) and is
idempotent on every later start.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from chazbot import metrics
from chazbot.agent.capture import Mode, capture_turn, effective_mode
from chazbot.agent.host import AgentHandle
from chazbot.agent.llm import ChatModel, OpenAIChat, make_llm, public_url
from chazbot.agent.session import Session
from chazbot.agent.turn import TurnResult, run_turn
from chazbot.commands import Context, Reply, run_command
from chazbot.config import AgentConfig, Config, load_config
from chazbot.errors import (
    ChazError,
    ConfigError,
    InputError,
    NotFound,
    PermissionDenied,
)
from chazbot.ledger import KeyPair, Ledger, Level, Permission
from chazbot.ledger.statelock import StateLock
from chazbot.memory.audience import Audience
from chazbot.memory.banks import (
    CREATED_BY,
    Hosted,
    Registry,
    check_name,
    grant,
    read_refs,
    ref_op,
)
from chazbot.memory.embedders import Embedder, make_embedder
from chazbot.memory.engine import MemoryEngine
from chazbot.memory.rows import Hit
from chazbot.memory.scope import OPERATOR_HEARING, Hearing, MemoryScope
from chazbot.peer_sharing import SharingMixin
from chazbot.sync import Replicator, Sharing, SyncServer
from chazbot.sync.store import Remotes

log = logging.getLogger(__name__)

STATE_FILE = "chazbot.sqlite3"
CAPTURE_CLOSE_WAIT_S = 30.0
PEER_KEY = "peer"


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


class Peer(SharingMixin):
    """The state and services of one chazbot process (serving and importing databases:
    ``peer_sharing.SharingMixin``)."""

    def __init__(
        self,
        config: Config,
        ledger: Ledger,
        key: KeyPair,
        registry: Registry,
        memory: MemoryEngine,
        embedder: Embedder | None,
    ) -> None:
        self.config = config
        self.ledger = ledger
        self.key = key
        self.registry = registry
        self.memory = memory
        self.embedder = embedder
        self.agents: dict[str, Agent] = {}
        self._sessions: dict[str, Session] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._session_lock = asyncio.Lock()
        self._llm: ChatModel | None = None
        self.state_lock: StateLock | None = None  # held from open to close
        self._llm_made = False
        self._captures: set[asyncio.Task[int]] = set()
        self.sharing = Sharing(ledger)
        self.sync_server: SyncServer | None = None
        self.replicator: Replicator | None = None
        registry.withdrawn = self._withdrawn

    def _withdrawn(self, db: str) -> str | None:
        return self.replicator.withdrawn(db) if self.replicator is not None else None

    @property
    def state_dir(self) -> Path:
        return Path(self.config.state_dir)

    @classmethod
    async def open(cls, config: Config, role: str = "open") -> Peer:
        """Open the state directory, holding its lock until ``close`` (``StateLocked`` when
        another process holds it; ``role`` is what that process is told holds it)."""
        state = Path(config.state_dir)
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(state, 0o700)
        lock = StateLock.acquire(state, role)
        try:
            ledger = await Ledger.open(state / STATE_FILE)
        except BaseException:
            lock.release()
            raise
        try:
            registry = Registry(ledger)
            key = await registry.key(PEER_KEY)
            if key is None:
                key = KeyPair.generate()
                await registry.save_key(key, PEER_KEY)
                log.info("created peer key %s", key.public)
            embedder = make_embedder(config.embedding)
            peer = cls(config, ledger, key, registry, MemoryEngine(ledger, embedder), embedder)
            peer.state_lock = lock
            await peer.load_agents()
        except BaseException:
            await ledger.close()
            lock.release()
            raise
        return peer

    async def close(self) -> None:
        await self.wait_captures(CAPTURE_CLOSE_WAIT_S)
        await self.stop_sync()
        if self._llm is not None:
            await self._llm.aclose()
        if self.embedder is not None:
            await self.embedder.aclose()
        try:
            await self.ledger.close()
        finally:
            if self.state_lock is not None:
                self.state_lock.release()

    async def __aenter__(self) -> Peer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- agents and banks ------------------------------------------------------------------

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

    # ---- sessions and commands -------------------------------------------------------------

    @staticmethod
    def hearing(agent: AgentHandle, sender: str, audience: Audience | None) -> Hearing:
        """How ``agent``'s memory is heard in a session with ``audience`` (SPEC §5c): None or
        the full view is the operator's (terminal, ``chazbot cmd``, the Python API)."""
        if audience is None or audience.full:
            return OPERATOR_HEARING
        origin = audience.origin(sender)
        if agent.config.memory_audience == "agent":
            return Hearing(None, origin, scoped=False)
        return Hearing(audience, origin, scoped=True)

    async def session(self, name: str) -> Session:
        """The session named ``name`` (created on first use, kept across restarts)."""
        found = self._sessions.get(name)
        if found is None:
            if not name or len(name) > 255:
                raise InputError("a session name is 1-255 characters")
            async with self._session_lock:  # two first uses at once make one session
                found = self._sessions.get(name)
                if found is None:
                    found = await Session.open(self.ledger, self.registry, self.key, name)
                    self._sessions[name] = found
        return found

    async def session_agent(self, session: Session) -> Agent:
        """The agent that answers in a session: its chosen one if it may, else the first it
        may use (the first configured, unless the config restricts the room)."""
        allowed = self.allowed_agents(session.name)
        if not allowed:
            raise PermissionDenied("no configured agent may answer in this room")
        chosen = await session.agent_name()
        if chosen is not None:
            for agent in allowed:
                if agent.name.lower() == chosen.lower():
                    return agent
        return allowed[0]

    async def command(
        self,
        text: str,
        agent: str | None = None,
        session: str = "cli",
        sender: str = "local",
        is_admin: bool | None = None,
        prefix: str = "/",
        audience: Audience | None = None,
    ) -> Reply:
        """Run one command line (``/memory list``…) as ``agent`` in ``session``; what it
        shows of memory obeys ``audience`` (None: the operator's full view).

        ``is_admin`` left out is the least a caller can mean: an admin only for the operator
        (no ``audience``: the terminal, ``chazbot cmd``, the Python API); a caller that names
        a room's audience and forgets ``is_admin`` runs as a non-admin."""
        if is_admin is None:
            is_admin = audience is None or audience.full
        try:
            sess = await self.session(session)
            who = self.agent(agent) if agent else await self.session_agent(sess)
            self.check_agent_allowed(session, who)
        except (NotFound, PermissionDenied) as exc:
            return Reply(False, str(exc))
        hearing = self.hearing(who, sender, audience)
        ctx = Context(self, who, sess, sender, is_admin, prefix, hearing)
        reply = await run_command(ctx, text)
        metrics.COMMANDS.labels("ok" if reply.ok else "failed").inc()
        return reply

    @property
    def llm(self) -> ChatModel | None:
        """The chat model (made on first use: the local one loads lazily)."""
        if not self._llm_made:
            self._llm = make_llm(self.config.llm, self.state_dir / "models")
            self._llm_made = True
        return self._llm

    async def chat(
        self,
        text: str,
        agent: str | None = None,
        session: str = "cli",
        sender: str = "local",
        sent_at: datetime | None = None,
        audience: Audience | None = None,
        prefix: str = "/",
    ) -> TurnResult:
        """One agent turn in a session; turns in one session run one at a time.

        After an answered turn, capture (if on) runs in the background while still holding the
        session's lock: the reply goes out at once, and the session's next turn sees what was
        captured. ``sent_at`` is when the message was sent (default: when it was stored).
        ``audience`` is who is in the room (SPEC §5c; None: the operator's full view): recall,
        tools and capture act within it. ``prefix`` is how commands are written where the
        reply goes (``!chaz `` in Matrix), for answers that name them.
        """
        sess = await self.session(session)
        who = self.agent(agent) if agent else await self.session_agent(sess)
        self.check_agent_allowed(session, who)
        memory = who.memory.within(self.hearing(who, sender, audience))
        lock = self._locks.setdefault(session, asyncio.Lock())
        await lock.acquire()
        try:
            result = await run_turn(self, who, sess, text, sender, self.llm, memory, prefix)
            keep = result.ok and not result.answered_in_words
            mode = await self.capture_mode(who, sess) if keep else "off"
        except BaseException:
            lock.release()
            raise
        if mode == "off":
            lock.release()
        else:
            task = asyncio.create_task(
                self._capture(lock, who, sess, mode, text, sender, result.text, sent_at, memory),
                name=f"capture-{session}",
            )
            self._captures.add(task)
            task.add_done_callback(self._captures.discard)
        log.info(
            "turn agent=%s session=%s ok=%s tools=%d recalled=%d llm_s=%.2f",
            who.name,
            session,
            result.ok,
            len(result.tool_calls),
            result.recalled,
            result.llm_seconds,
        )
        metrics.TURNS.labels("ok" if result.ok else "failed").inc()
        if not result.ok and self._llm is not None:
            metrics.LLM_ERRORS.inc()
        if result.llm_seconds:
            metrics.LLM_SECONDS.observe(result.llm_seconds)
        metrics.AUTO_RECALL_HITS.inc(result.recalled)
        for tool, ok in result.tool_calls:
            metrics.TOOL_CALLS.labels(tool, "ok" if ok else "error").inc()
        return result

    # ---- capture ------------------------------------------------------------------------

    async def capture_mode(self, agent: AgentHandle, session: Session | None = None) -> Mode:
        """What capture does for ``agent`` (in ``session``, whose switch may override it)."""
        configured = effective_mode(agent.config.capture, self.llm)
        switch = await session.capture() if session is not None else None
        if switch is False:
            return "off"
        if switch is True and configured == "off":
            return effective_mode("auto", self.llm)
        return configured

    async def _capture(
        self,
        lock: asyncio.Lock,
        agent: Agent,
        session: Session,
        mode: Mode,
        text: str,
        sender: str,
        reply: str,
        sent_at: datetime | None,
        memory: MemoryScope,
    ) -> int:
        try:
            return await capture_turn(
                agent, session, self.llm, mode, text, sender, reply, sent_at, memory
            )
        except Exception as exc:  # never let capture break anything; one line in the log
            log.error("capture for %s failed: %s: %s", agent.name, type(exc).__name__, exc)
            return 0
        finally:
            lock.release()

    async def wait_captures(self, timeout: float | None = None) -> None:
        """Wait until every capture started so far is done (cancel what is left at timeout)."""
        pending = set(self._captures)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=timeout)
        for task in late:
            task.cancel()
        if late:
            log.warning("capture: %d still running at shutdown, cancelled", len(late))
            await asyncio.wait(late)

    async def describe(self) -> str:
        """Which chat model, embedder and capture mode are active (the start line says it)."""
        llm = self.llm
        if llm is None:
            chat = "none (install chazbot[local] or set llm:)"
        elif isinstance(llm, OpenAIChat):
            chat = f"{llm.name} at {public_url(llm.cfg.api_base)}"
        else:
            chat = f"{llm.name} (embedded)"
        embedder = self.embedder.name if self.embedder is not None else "none (BM25 only)"
        modes = [(a.name, await self.capture_mode(a)) for a in self.agents.values()]
        capture = modes[0][1] if len(modes) == 1 else ", ".join(f"{n}={m}" for n, m in modes)
        return f"chat model {chat}; embedder {embedder}; capture {capture}"


@asynccontextmanager
async def open_peer(
    state_dir: str | Path, config: str | Path | Config | None = None
) -> AsyncIterator[Peer]:
    """``chazbot.open``: the peer in ``state_dir`` with ``config`` (a path, a Config or None)."""
    if config is None:
        cfg = Config()
    elif isinstance(config, Config):
        cfg = config
    else:
        cfg = load_config(config)
    cfg = cfg.model_copy(update={"state_dir": Path(state_dir)})
    peer = await Peer.open(cfg)
    try:
        yield peer
    finally:
        await peer.close()

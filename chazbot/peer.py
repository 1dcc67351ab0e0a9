"""One running peer: its state directory, ledger, keys and memory engine, and the parts it
holds: ``hosting`` (agents and banks, ``peer_hosting``), ``sync`` and ``sharing`` (the sync
service, sharing and importing banks, ``peer_sharing``), ``models`` (chat models,
``peer_models``) and ``captures`` (capture after a turn, ``agent.capture_tasks``).

``Peer.open`` builds every part whole, in one place, and creates what is missing on first
start (the state directory with owner-only permissions, the peer key, each configured
agent's key and DB, the default banks); it is idempotent on every later start. ``Peer`` itself
runs sessions, commands and turns; the Python API's entry points (``chazbot.open``,
``peer.agent(name)``, ``peer.chat``, ``peer.command``) stay on it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import MappingProxyType

from chazbot import metrics
from chazbot.agent.capture_sources import CaptureSources
from chazbot.agent.capture_tasks import CaptureTasks, ToCapture
from chazbot.agent.host import AgentHandle
from chazbot.agent.meaning_vectors import FIXED_VECTORS
from chazbot.agent.meaning_vectors import STORE_DIR as MEANING_DIR
from chazbot.agent.pictures import Picture
from chazbot.agent.session import Session
from chazbot.agent.turn import Incoming, TurnContext, TurnResult, take_turn, tool_label
from chazbot.commands import Call, Context, Reply, run_command
from chazbot.config import Config, load_config
from chazbot.errors import (
    InputError,
    NotFound,
    PermissionDenied,
)
from chazbot.ledger import KeyPair, Ledger
from chazbot.ledger.statelock import StateLock
from chazbot.memory.audience import Audience
from chazbot.memory.banks import (
    DEFAULT_BANK_LIMITS,
    BankLimits,
    Registry,
)
from chazbot.memory.embedders import Embedder, make_embedder
from chazbot.memory.engine import DEFAULT_ENGINE_TIMING, EngineTiming, MemoryEngine
from chazbot.memory.scope import OPERATOR_HEARING, Hearing
from chazbot.peer_hosting import Agent, Hosting
from chazbot.peer_models import Models
from chazbot.peer_sharing import Sharing, SyncService
from chazbot.people.allowed import People
from chazbot.reminders.store import ReminderBook
from chazbot.sync import Serving
from chazbot.tools import ToolBox

log = logging.getLogger(__name__)

STATE_FILE = "chazbot.sqlite3"
PEER_KEY = "peer"
ONE_JOB_ROLES = frozenset({"export", "import", "reindex"})
TOOL_ROLES = frozenset({"open", "run", "chat"})
"""Roles whose peer starts the MCP servers (in the background): a service, the terminal chat
and the Python API; a one-shot command or job never does."""
"""A CLI job opening the state dir for one job: it leaves owed vectors to the next start."""


@dataclass(frozen=True)
class PeerTuning:
    """How long a peer waits: measured values, not a matter of taste (no config key sets
    them), passed to ``Peer.open`` (``chazbot.open(..., tuning=)``); tests and benches build
    their own with ``dataclasses.replace``, never flip a module global."""

    capture_close_wait_s: float = 30.0
    """At close, how long captures still running are waited for (then cancelled)."""
    memory: EngineTiming = DEFAULT_ENGINE_TIMING
    """The memory engine's (``EngineTiming``: query vectors, captured rows' vectors)."""
    banks: BankLimits = DEFAULT_BANK_LIMITS
    """What a non-admin may create (``BankLimits``: banks per person and in all)."""


DEFAULT_TUNING = PeerTuning()


class Peer:
    """The state and parts of one chazbot process (see the module docstring). Built whole by
    ``open``; nothing is attached to it afterwards."""

    def __init__(
        self,
        config: Config,
        ledger: Ledger,
        key: KeyPair,
        registry: Registry,
        memory: MemoryEngine,
        embedder: Embedder | None,
        state_lock: StateLock | None,
        hosting: Hosting,
        sync: SyncService,
        sharing: Sharing,
        tuning: PeerTuning = DEFAULT_TUNING,
    ) -> None:
        self.ledger = ledger
        self.tuning = tuning
        self.key = key
        self.registry = registry
        self.memory = memory
        self.embedder = embedder
        self.meaning_warm: asyncio.Task[object] | None = None
        """The fixed sentences of a forget by meaning, read or embedded in the background."""
        self.state_lock = state_lock  # held from open to close
        self.hosting = hosting
        self.sync = sync
        self.sharing = sharing
        self.models = Models(config.llm, Path(config.state_dir) / "models")
        self.captures = CaptureTasks(CaptureSources(ledger.kv))
        self.people = People(ledger, key)  # allowed from chat (!chaz people)
        # every agent's reminders, one lock per person; a person's cap counts every agent
        self.reminders = ReminderBook(ledger, lambda: [a.db for a in hosting.agents.values()])
        self.tools = ToolBox(config, ledger, log_dir=Path(config.state_dir) / "mcp")
        hosting.on_reload.append(self.tools.reload)
        self._sessions: dict[str, Session] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._session_lock = asyncio.Lock()
        ledger.add_listener(hosting.on_agent_fields)

    @property
    def config(self) -> Config:
        """The running config (a reload replaces it: ``hosting.reload_config``)."""
        return self.hosting.config

    @property
    def state_dir(self) -> Path:
        return Path(self.config.state_dir)

    @classmethod
    async def open(
        cls,
        config: Config,
        role: str = "open",
        config_loader: Callable[[], Config] | None = None,
        tuning: PeerTuning = DEFAULT_TUNING,
    ) -> Peer:
        """Open the state directory, holding its lock until ``close`` (``StateLocked`` when
        another process holds it; ``role`` is what that process is told holds it).
        ``config_loader`` reads the config file again for a reload (``chazbot run``).
        ``tuning``: how long the peer waits (``PeerTuning``; the measured defaults)."""
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
            key = await ledger.keys.first(PEER_KEY)
            if key is None:
                key = KeyPair.generate()
                await ledger.keys.add(key, PEER_KEY)
                log.info("created peer key %s", key.public)
            serving = Serving(ledger)
            sync = SyncService(config, ledger, key, serving)
            registry = Registry(ledger, withdrawn=sync.withdrawn, limits=tuning.banks)
            sharing = Sharing(sync, ledger, registry, serving)
            embedder = make_embedder(config.embedding)
            memory = MemoryEngine(ledger, embedder, timing=tuning.memory)
            hosting = Hosting(config, ledger, key, registry, memory, sharing, config_loader)
            peer = cls(
                config,
                ledger,
                key,
                registry,
                memory,
                embedder,
                lock,
                hosting,
                sync,
                sharing,
                tuning,
            )
            await hosting.load_agents()
            await peer.people.load()
            if role in TOOL_ROLES:
                peer.tools.start()  # in the background: a server never holds up the start
            if role not in ONE_JOB_ROLES:  # owed at the last stop: written in the background
                await peer.memory.resume_vectors()
            if role not in ONE_JOB_ROLES and embedder is not None:  # a forget's sentences (#45)
                peer.meaning_warm = FIXED_VECTORS.warm(embedder, state / MEANING_DIR)
        except BaseException:
            await ledger.close()
            lock.release()
            raise
        return peer

    async def close(self) -> None:
        if self.meaning_warm is not None and not self.meaning_warm.done():
            self.meaning_warm.cancel()  # written whole or not at all; made again next start
        await self.wait_captures(self.tuning.capture_close_wait_s)
        await self.tools.stop()
        await self.sync.stop()
        await self.memory.stop_vectors(0)  # what is left is recorded as owed
        await asyncio.gather(*self.hosting.redefining, return_exceptions=True)
        await self.models.aclose()
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

    # ---- sessions and commands -------------------------------------------------------------

    def agent(self, name: str) -> Agent:
        """The hosted agent ``name`` (the Python API's entry point: ``hosting.agent``)."""
        return self.hosting.agent(name)

    @property
    def agents(self) -> Mapping[str, Agent]:
        """The hosted agents by lowercased name (read-only: ``hosting`` changes them)."""
        return MappingProxyType(self.hosting.agents)

    @staticmethod
    def hearing(
        agent: AgentHandle, sender: str, audience: Audience | None, prefix: str = "/"
    ) -> Hearing:
        """How ``agent``'s memory is heard in a session with ``audience`` (SPEC §5c): None or
        the full view is the operator's (terminal, ``chazbot cmd``, the Python API).
        ``prefix`` is how commands are written there (``!chaz `` in Matrix)."""
        if audience is None or audience.full:
            return OPERATOR_HEARING if prefix == "/" else Hearing(prefix=prefix)
        origin = audience.origin(sender)
        # the agent's mode says how its new rows are scoped; what it reads obeys each row's rule
        scoped = agent.config.memory_audience != "agent"
        return Hearing(audience, origin, scoped=scoped, prefix=prefix)

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
        return self._answering(session.name, await session.agent_name())

    def _answering(self, session: str, chosen: str | None) -> Agent:
        """``session_agent`` with the session's chosen agent already read."""
        allowed = self.hosting.allowed_agents(session)
        if not allowed:
            raise PermissionDenied("no configured agent may answer in this room")
        if chosen is not None:
            for agent in allowed:
                if agent.name.lower() == chosen.lower():
                    return agent
        return allowed[0]

    async def turn_context(
        self,
        session: Session,
        agent: str | None = None,
        sender: str = "local",
        audience: Audience | None = None,
        prefix: str = "/",
    ) -> TurnContext:
        """Everything a turn in ``session`` reads, looked up once (``TurnContext``): the agent
        (``agent``, else the session's), which must be allowed there; its memory as heard by
        ``audience`` (``hearing``); its chat model and what it can do; what capture does (the
        session's switch and the agent's setting, read together); the sender's zone."""
        state = await session.state()
        who = self.agent(agent) if agent else self._answering(session.name, state.agent)
        self.hosting.check_agent_allowed(session.name, who)
        memory = who.memory.within(self.hearing(who, sender, audience, prefix))
        llm = self.models.llm_for(who)
        mode = self.models.switched_mode(who, state.capture)
        return await TurnContext.open(
            self, who, session, sender, llm, memory, self.config.timezone, mode, tools=self.tools
        )

    async def command(
        self,
        text: str | Call,
        agent: str | None = None,
        session: str = "cli",
        sender: str = "local",
        is_admin: bool | None = None,
        prefix: str = "/",
        audience: Audience | None = None,
    ) -> Reply:
        """Run one command line (``/memory list``…), or a ``Call`` with its arguments apart
        (what a web form posts), as ``agent`` in ``session``; what it shows of memory obeys
        ``audience`` (None: the operator's full view).

        ``is_admin`` left out is the least a caller can mean: an admin only for the operator
        (no ``audience``: the terminal, ``chazbot cmd``, the Python API); a caller that names
        a room's audience and forgets ``is_admin`` runs as a non-admin."""
        if is_admin is None:
            is_admin = audience is None or audience.full
        try:
            sess = await self.session(session)
            who = self.agent(agent) if agent else await self.session_agent(sess)
            self.hosting.check_agent_allowed(session, who)
        except (NotFound, PermissionDenied) as exc:
            return Reply(False, str(exc))
        ctx = Context(
            agents=self.hosting,
            banks=self.hosting,
            sharing=self.sharing,
            models=self.models,
            ledger=self.ledger,
            engine=self.memory,
            key=self.key,
            people=self.people,
            reminders=self.reminders,
            agent=who,
            session=sess,
            sender=sender,
            is_admin=is_admin,
            hearing=self.hearing(who, sender, audience, prefix),
            tools=self.tools,
        )
        reply = await run_command(ctx, text)
        metrics.COMMANDS.labels("ok" if reply.ok else "failed").inc()
        return reply

    async def chat(
        self,
        text: str,
        agent: str | None = None,
        session: str = "cli",
        sender: str = "local",
        sent_at: datetime | None = None,
        audience: Audience | None = None,
        prefix: str = "/",
        pictures: Sequence[Picture] = (),
        message_id: str | None = None,
        spoken: bool = False,
    ) -> TurnResult:
        """One agent turn in a session; turns in one session run one at a time.

        After an answered turn, capture (if on) runs in the background while still holding the
        session's lock: the reply goes out at once, and the session's next turn sees what was
        captured. ``sent_at`` is when the message was sent (default: when it was stored).
        ``audience`` is who is in the room (SPEC §5c; None: the operator's full view): recall,
        tools and capture act within it. ``prefix`` is how commands are written where the
        reply goes (``!chaz `` in Matrix), for answers that name them. ``message_id`` names
        the message (a Matrix event id) so a redaction or an edit can find what capture kept.
        ``spoken``: the text is a voice note's transcript (the model is offered no tool that
        takes something away, ``TurnContext.spoken``).
        """
        sess = await self.session(session)
        lock = self._locks.setdefault(session, asyncio.Lock())
        await lock.acquire()
        try:
            ctx = await self.turn_context(sess, agent, sender, audience, prefix)
            if spoken:
                ctx = dataclasses.replace(ctx, spoken=True)
            result = await take_turn(ctx, Incoming(text, pictures))
            mode = "off" if not result.ok or result.answered_in_words else ctx.capture
        except BaseException:
            lock.release()
            raise
        if mode == "off" and message_id is None:
            lock.release()
        else:  # the turn's last step, after the reply: it releases the session's lock
            # (capture off, it only notes where the message is, for a redaction or an edit)
            self.captures.start(
                lock,
                ToCapture(ctx.agent, sess, text, sender, result.text, sent_at, message_id),
                ctx.llm,
                mode,
                ctx.memory,
            )
        log.info(
            "turn agent=%s session=%s ok=%s tools=%d recalled=%d llm_s=%.2f",
            ctx.agent.name,
            session,
            result.ok,
            len(result.tool_calls),
            result.recalled,
            result.llm_seconds,
        )
        metrics.TURNS.labels("ok" if result.ok else "failed").inc()
        if not result.ok and self.models.made is not None:
            metrics.LLM_ERRORS.inc()
        if result.llm_seconds:
            metrics.LLM_SECONDS.observe(result.llm_seconds)
        metrics.AUTO_RECALL_HITS.inc(result.recalled)
        for tool, ok in result.tool_calls:
            metrics.TOOL_CALLS.labels(tool_label(tool), "ok" if ok else "error").inc()
        return result

    # ---- capture ------------------------------------------------------------------------

    async def unsay(
        self,
        session: str,
        message_id: str,
        by: str,
        may_redact_others: bool = False,
        audience: Audience | None = None,
    ) -> int:
        """A message redacted in ``session`` by ``by``: forget the rows captured from it
        (SPEC §5c; its speaker, or ``may_redact_others``). Waits for a capture still running
        in the session. How many rows it hid."""
        async with self._locks.setdefault(session, asyncio.Lock()):
            found = await self.captures.lookup(
                self.hosting.agents, session, message_id, by, may_redact_others
            )
            if found is None:
                return 0
            source, who = found
            origin = self.hearing(who, by, audience).origin
            sess = await self.session(session)
            return await self.captures.unsay(source, who, sess, message_id, origin)

    async def resay(
        self,
        session: str,
        message_id: str,
        text: str,
        sender: str,
        audience: Audience | None = None,
        sent_at: datetime | None = None,
    ) -> int:
        """A message edited by its speaker: the rows captured from it are replaced by what
        ``text``, its new words, gives (empty: only forgotten). How many rows it gave."""
        sess = await self.session(session)
        async with self._locks.setdefault(session, asyncio.Lock()):
            found = await self.captures.lookup(
                self.hosting.agents, session, message_id, sender, False
            )
            if found is None:
                return 0
            source, who = found
            memory = who.memory.within(self.hearing(who, sender, audience))
            llm = self.models.llm_for(who)
            mode = await self.models.capture_mode(who, sess)
            said = ToCapture(who, sess, text, sender, "", sent_at, message_id)
            return await self.captures.resay(source, said, llm, mode, memory)

    async def wait_captures(self, timeout: float | None = None) -> None:
        """Wait until every capture started so far is done (cancel what is left at timeout),
        its rows' vectors written included (they follow in background batches)."""
        await self.captures.wait(timeout)
        if not await self.memory.wait_vectors(timeout, backlog=False):
            log.info("memory: captured rows' vectors still being written (owed if stopped)")

    async def describe(self) -> str:
        """Which chat model, embedder and capture mode are active (the start line says it)."""
        llm = self.models.llm
        chat = llm.describe() if llm is not None else "none (install chazbot[local] or set llm:)"
        embedder = self.embedder.name if self.embedder is not None else "none (BM25 only)"
        agents = self.hosting.agents.values()
        modes = [(a.name, await self.models.capture_mode(a)) for a in agents]
        capture = modes[0][1] if len(modes) == 1 else ", ".join(f"{n}={m}" for n, m in modes)
        return f"chat model {chat}; embedder {embedder}; capture {capture}"


@asynccontextmanager
async def open_peer(
    state_dir: str | Path,
    config: str | Path | Config | None = None,
    tuning: PeerTuning = DEFAULT_TUNING,
) -> AsyncIterator[Peer]:
    """``chazbot.open``: the peer in ``state_dir`` with ``config`` (a path, a Config or None)
    and ``tuning`` (``PeerTuning``)."""
    if config is None:
        cfg = Config()
    elif isinstance(config, Config):
        cfg = config
    else:
        cfg = load_config(config)
    cfg = cfg.model_copy(update={"state_dir": Path(state_dir)})
    peer = await Peer.open(cfg, tuning=tuning)
    try:
        yield peer
    finally:
        await peer.close()

"""One running peer: its state directory, ledger, keys, agents, banks and memory engine.

``Peer.open`` creates what is missing on first start (the state directory with owner-only
permissions, the peer key, each configured agent's key and DB, the default banks) and is
idempotent on every later start.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

from chazbot import metrics
from chazbot.agent.capture import Mode, capture_mode
from chazbot.agent.capture_sources import CaptureSources
from chazbot.agent.capture_tasks import CaptureTasks, Said
from chazbot.agent.host import AgentHandle
from chazbot.agent.llm import ChatModel, OpenAIChat, make_llm, public_url
from chazbot.agent.local_llm import LocalChat
from chazbot.agent.model_check import chat_model_spec
from chazbot.agent.pictures import Picture
from chazbot.agent.session import Session
from chazbot.agent.turn import TurnResult, run_turn
from chazbot.commands import Context, Reply, run_command
from chazbot.config import Config, load_config
from chazbot.errors import (
    InputError,
    NotFound,
    PermissionDenied,
)
from chazbot.ledger import KeyPair, Ledger
from chazbot.ledger.people import People
from chazbot.ledger.statelock import StateLock
from chazbot.memory.audience import Audience
from chazbot.memory.banks import (
    Registry,
)
from chazbot.memory.embedders import Embedder, make_embedder
from chazbot.memory.engine import MemoryEngine
from chazbot.memory.scope import OPERATOR_HEARING, Hearing
from chazbot.peer_hosting import Agent, HostingMixin
from chazbot.peer_sharing import SharingMixin
from chazbot.sync import Replicator, Sharing, SyncServer

log = logging.getLogger(__name__)

STATE_FILE = "chazbot.sqlite3"
CAPTURE_CLOSE_WAIT_S = 30.0
PEER_KEY = "peer"
ONE_JOB_ROLES = frozenset({"export", "import", "reindex"})
"""A CLI job opening the state dir for one job: it leaves owed vectors to the next start."""


class Peer(HostingMixin, SharingMixin):
    """The state and services of one chazbot process. Its jobs beside sessions, commands and
    turns live in their own modules: agents and banks (``peer_hosting.HostingMixin``),
    serving and importing databases (``peer_sharing.SharingMixin``), capture after a turn
    (``agent.capture_tasks``)."""

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
        self._agent_llms: dict[tuple[str, str], LocalChat] = {}  # an agent's own local model
        self._refused_models: set[tuple[str, str]] = set()
        self.captures = CaptureTasks(CaptureSources(ledger.kv))
        self.sharing = Sharing(ledger)
        self.sync_server: SyncServer | None = None
        self.replicator: Replicator | None = None
        self.redefining: set[asyncio.Task[None]] = set()
        self.people = People(ledger, key)  # allowed from chat (!chaz people)
        ledger.add_listener(self.on_agent_fields)
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
            await peer.people.load()
            if role not in ONE_JOB_ROLES:  # owed at the last stop: written in the background
                await peer.memory.resume_vectors()
        except BaseException:
            await ledger.close()
            lock.release()
            raise
        return peer

    async def close(self) -> None:
        await self.wait_captures(CAPTURE_CLOSE_WAIT_S)
        await self.stop_sync()
        await self.memory.stop_vectors(0)  # what is left is recorded as owed
        await asyncio.gather(*self.redefining, return_exceptions=True)
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

    # ---- sessions and commands -------------------------------------------------------------

    @staticmethod
    def hearing(agent: AgentHandle, sender: str, audience: Audience | None) -> Hearing:
        """How ``agent``'s memory is heard in a session with ``audience`` (SPEC §5c): None or
        the full view is the operator's (terminal, ``chazbot cmd``, the Python API)."""
        if audience is None or audience.full:
            return OPERATOR_HEARING
        origin = audience.origin(sender)
        # the agent's mode says how its new rows are scoped; what it reads obeys each row's rule
        return Hearing(audience, origin, scoped=agent.config.memory_audience != "agent")

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

    def llm_for(self, agent: AgentHandle) -> ChatModel | None:
        """The chat model that answers as ``agent``: the peer's; with the embedded backend and
        an agent ``model`` of its own (a built-in, GGUF path or URL, ``/agent set``), a
        LocalChat of that model (each loaded once, on first use). An OpenAI-compatible backend
        takes the agent's model per request instead."""
        base, model = self.llm, agent.config.model
        if model is None or not isinstance(base, LocalChat) or model == base.cfg.model:
            return base
        definition = getattr(agent, "definition", None)
        from_chat = definition is not None and definition.sources.get("model") == "chat"
        key = ("chat" if from_chat else "config", model)
        found = self._agent_llms.get(key)
        if found is None:
            # a model set from chat loads only what the operator offers (model_check.py)
            spec = chat_model_spec(base.cfg, base.models_dir, model) if from_chat else model
            if spec is None:  # stored from chat before models were offered: never fetched
                if key not in self._refused_models:
                    self._refused_models.add(key)
                    log.warning(
                        "agent %s: model %.80r is not offered to chat (llm.chat_models); "
                        "the peer's model answers",
                        agent.name,
                        model,
                    )
                return base
            cfg = base.cfg.model_copy(update={"model": spec, "model_sha256": None})
            found = self._agent_llms[key] = LocalChat(cfg, self.state_dir / "models")
        return found

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
    ) -> TurnResult:
        """One agent turn in a session; turns in one session run one at a time.

        After an answered turn, capture (if on) runs in the background while still holding the
        session's lock: the reply goes out at once, and the session's next turn sees what was
        captured. ``sent_at`` is when the message was sent (default: when it was stored).
        ``audience`` is who is in the room (SPEC §5c; None: the operator's full view): recall,
        tools and capture act within it. ``prefix`` is how commands are written where the
        reply goes (``!chaz `` in Matrix), for answers that name them. ``message_id`` names
        the message (a Matrix event id) so a redaction or an edit can find what capture kept.
        """
        sess = await self.session(session)
        who = self.agent(agent) if agent else await self.session_agent(sess)
        self.check_agent_allowed(session, who)
        memory = who.memory.within(self.hearing(who, sender, audience))
        llm = self.llm_for(who)
        lock = self._locks.setdefault(session, asyncio.Lock())
        await lock.acquire()
        try:
            mode = await self.capture_mode(who, sess)
            result = await run_turn(
                self,
                who,
                sess,
                text,
                sender,
                llm,
                memory,
                prefix,
                self.config.timezone,
                pictures,
                acknowledge=mode != "off",
            )
            if not result.ok or result.answered_in_words:
                mode = "off"
        except BaseException:
            lock.release()
            raise
        if mode == "off" and message_id is None:
            lock.release()
        else:  # the turn's last step, after the reply: it releases the session's lock
            # (capture off, it only notes where the message is, for a redaction or an edit)
            self.captures.start(
                lock,
                Said(who, sess, text, sender, result.text, sent_at, message_id),
                llm,
                mode,
                memory,
            )
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
                self.agents, session, message_id, by, may_redact_others
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
            found = await self.captures.lookup(self.agents, session, message_id, sender, False)
            if found is None:
                return 0
            source, who = found
            memory = who.memory.within(self.hearing(who, sender, audience))
            llm = self.llm_for(who)
            mode = await self.capture_mode(who, sess)
            said = Said(who, sess, text, sender, "", sent_at, message_id)
            return await self.captures.resay(source, said, llm, mode, memory)

    async def capture_mode(self, agent: AgentHandle, session: Session | None = None) -> Mode:
        """What capture does for ``agent`` (in ``session``, whose switch may override it)."""
        return await capture_mode(agent, session, self.llm)

    async def wait_captures(self, timeout: float | None = None) -> None:
        """Wait until every capture started so far is done (cancel what is left at timeout),
        its rows' vectors written included (they follow in background batches)."""
        await self.captures.wait(timeout)
        if not await self.memory.wait_vectors(timeout, backlog=False):
            log.info("memory: captured rows' vectors still being written (owed if stopped)")

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

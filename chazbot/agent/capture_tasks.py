"""Capture as the last step of a turn: it runs after the reply, in the background, holding the
session's lock until it is done, so the reply goes out at once and the session's next turn
already recalls what was just said (SPEC §5b). A failure is one line in the log; it never
breaks a turn. The peer waits for what is running when it closes.

A message taken back (SPEC §5c): when the turn named its message (``ToCapture.message_id``, the
Matrix event id), the rows captured from it are recorded (``capture_sources``); ``unsay``
forgets them (a redaction) and ``resay`` replaces them with what the new words give (an
edit). Both run under the session's lock, so a capture still running finishes first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from chazbot.agent.capture import EDIT_LOOKBACK, Mode, capture_message
from chazbot.agent.capture_sources import CaptureSources, Source

if TYPE_CHECKING:
    from chazbot.agent.chat_model import ChatModel
    from chazbot.agent.host import AgentHandle
    from chazbot.agent.session import Session
    from chazbot.memory.audience import Provenance
    from chazbot.memory.scope import MemoryScope

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToCapture:
    """The answered message to capture: by whom, to which agent, where, and the reply."""

    agent: AgentHandle
    session: Session
    text: str
    sender: str
    reply: str
    sent_at: datetime | None = None
    message_id: str | None = None  # the transport's id of the message (a Matrix event id)


class CaptureTasks:
    """The captures running in the background, and what each message gave (``sources``)."""

    def __init__(self, sources: CaptureSources | None = None) -> None:
        self._tasks: set[asyncio.Task[int]] = set()
        self.sources = sources

    def start(
        self,
        lock: asyncio.Lock,
        said: ToCapture,
        llm: ChatModel | None,
        mode: Mode,
        memory: MemoryScope,
    ) -> None:
        """Capture ``said`` in the background; ``lock`` (held by the caller) is released when
        it is done."""
        task = asyncio.create_task(
            self._run(lock, said, llm, mode, memory), name=f"capture-{said.session.name}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(
        self,
        lock: asyncio.Lock,
        said: ToCapture,
        llm: ChatModel | None,
        mode: Mode,
        memory: MemoryScope,
    ) -> int:
        agent = said.agent
        try:
            return await self._capture(said, llm, mode, memory)
        except Exception as exc:  # never let capture break anything; one line in the log
            log.error("capture for %s failed: %s: %s", agent.name, type(exc).__name__, exc)
            return 0
        finally:
            lock.release()

    async def _capture(
        self,
        said: ToCapture,
        llm: ChatModel | None,
        mode: Mode,
        memory: MemoryScope,
        n: int | None = None,
    ) -> int:
        """Capture ``said`` (``n``: the message's number when its words were edited) and record
        which rows it wrote; the number of rows."""
        found = await capture_message(
            said.agent,
            said.session,
            llm,
            mode,
            said.text,
            said.sender,
            said.reply,
            said.sent_at,
            memory,
            n=n,
        )
        await self._record(said, found.n if n is None else n, list(found.rows))
        return len(found.rows)

    async def _record(self, said: ToCapture, n: int | None, rows: list[str]) -> None:
        if self.sources is None or said.message_id is None or n is None:
            return
        source = Source(said.agent.name, said.agent.memory.db, said.session.name, said.sender, n)
        source.rows = rows
        await self.sources.record(said.message_id, source)

    async def lookup(
        self,
        agents: Mapping[str, AgentHandle],
        session: str,
        message_id: str,
        by: str,
        may_redact_others: bool,
    ) -> tuple[Source, AgentHandle] | None:
        """What was captured from ``message_id`` and by which agent, when ``by`` may take the
        message back in ``session``: its speaker, or (a redaction) someone the room lets take
        back others' messages. None otherwise (logged when it is refused)."""
        if self.sources is None:
            return None
        source = await self.sources.get(message_id)
        if source is None:
            return None
        if source.session != session:
            log.warning("capture: %s names %s of another room; ignored", by, message_id)
            return None
        if by != source.sender and not may_redact_others:
            log.warning(
                "capture: %s may not take back %s's message %s; ignored",
                by,
                source.sender,
                message_id,
            )
            return None
        agent = agents.get(source.agent)
        if agent is None or agent.memory.db != source.db:
            return None
        return source, agent

    async def unsay(
        self,
        source: Source,
        agent: AgentHandle,
        session: Session,
        message_id: str,
        origin: Provenance | None,
    ) -> int:
        """Forget the rows captured from ``message_id`` (a redaction); how many. Only a row
        still as captured goes (a key rewritten since by another message stays); the forget
        is a signed entry of the agent's, like any other. The message and the reply to it
        leave the history the model sees."""
        await _revise_history(session, source.n, "")
        memory = agent.memory
        rows = await memory.engine.visible_rows(memory.db, source.rows)
        hidden = await memory.engine.forget_rows(memory.db, memory.key, rows, origin) if rows else 0
        if self.sources is not None:
            await self.sources.drop(message_id)
        log.info(
            "capture: %s was redacted in %s; %d captured rows forgotten",
            message_id,
            source.session,
            hidden,
        )
        return hidden

    async def resay(
        self,
        source: Source,
        said: ToCapture,
        llm: ChatModel | None,
        mode: Mode,
        memory: MemoryScope,
    ) -> int:
        """An edit of ``said.message_id`` (its new words in ``said.text``): the rows captured
        from the message are forgotten and the new words captured in their place; how many
        rows the new words gave."""
        agent = said.agent
        await _revise_history(said.session, source.n, said.text)
        engine, db = agent.memory.engine, agent.memory.db
        rows = await engine.visible_rows(db, source.rows)
        if rows:
            await engine.forget_rows(db, agent.memory.key, rows, memory.hearing.origin)
        captured = await self._capture(said, llm, mode, memory, source.n)
        log.info(
            "capture: %s was edited in %s; %d rows forgotten, %d captured from the new words",
            said.message_id,
            said.session.name,
            len(rows),
            captured,
        )
        return captured

    async def wait(self, timeout: float | None = None) -> None:
        """Wait until every capture started so far is done (cancel what is left at timeout)."""
        pending = set(self._tasks)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=timeout)
        for task in late:
            task.cancel()
        if late:
            log.warning("capture: %d still running at shutdown, cancelled", len(late))
            await asyncio.wait(late)


async def _revise_history(session: Session, n: int, text: str) -> None:
    """Message ``n`` says ``text`` in the history the model sees; empty, it and the reply to
    it (the next message, when the agent's: turns in a session run one at a time) go."""
    revisions = {n: text}
    if not text:
        later = [m for m in await session.history(EDIT_LOOKBACK) if m.n > n]
        if later and later[0].role == "assistant":
            revisions[later[0].n] = ""
    await session.revise(revisions)


__all__ = ["CaptureTasks", "ToCapture"]

"""Capture as the last step of a turn: it runs after the reply, in the background, holding the
session's lock until it is done, so the reply goes out at once and the session's next turn
already recalls what was just said (SPEC §5b). A failure is one line in the log; it never
breaks a turn. The peer waits for what is running when it closes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from chazbot.agent.capture import Mode, capture_turn

if TYPE_CHECKING:
    from chazbot.agent.chat_model import ChatModel
    from chazbot.agent.host import AgentHandle
    from chazbot.agent.session import Session
    from chazbot.memory.scope import MemoryScope

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Said:
    """The answered message to capture: by whom, to which agent, where, and the reply."""

    agent: AgentHandle
    session: Session
    text: str
    sender: str
    reply: str
    sent_at: datetime | None = None


class CaptureTasks:
    """The captures running in the background."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[int]] = set()

    def start(
        self,
        lock: asyncio.Lock,
        said: Said,
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
        said: Said,
        llm: ChatModel | None,
        mode: Mode,
        memory: MemoryScope,
    ) -> int:
        agent = said.agent
        try:
            return await capture_turn(
                agent,
                said.session,
                llm,
                mode,
                said.text,
                said.sender,
                said.reply,
                said.sent_at,
                memory,
            )
        except Exception as exc:  # never let capture break anything; one line in the log
            log.error("capture for %s failed: %s: %s", agent.name, type(exc).__name__, exc)
            return 0
        finally:
            lock.release()

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


__all__ = ["CaptureTasks", "Said"]

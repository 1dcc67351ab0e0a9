"""What one turn is handed, resolved once before its first stage: ``TurnContext``.

The agent that answers, its memory as heard in this room (who reads along), what capture does
here, the sender's time zone and what the chat model can do are each looked up once (by
``TurnContext.open``; ``Peer.turn_context`` for a peer's turn) and read by every stage from
here, never looked up again from the peer, its config, its models or the session. ``Incoming``
is what was said: the text and the pictures sent with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from chazbot.agent.recall import DEFAULT_TUNING, RecallTuning
from chazbot.reminders.store import Reminders

if TYPE_CHECKING:
    from chazbot.agent.capture import Mode
    from chazbot.agent.chat_model import ChatModel
    from chazbot.agent.host import AgentHandle, MemoryHost, TurnHost
    from chazbot.agent.pictures import Picture
    from chazbot.agent.session import Session
    from chazbot.memory.audience import Audience
    from chazbot.memory.scope import MemoryScope
    from chazbot.tools import ToolBox


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ModelCan:
    """What the turn's chat model can do, as its protocol declares it (no model: nothing)."""

    tools: bool = False
    vision: bool = False
    composes: bool = True

    @classmethod
    def of(cls, llm: ChatModel | None) -> ModelCan:
        return cls(llm.supports_tools, llm.vision, llm.composes) if llm is not None else cls()


@dataclass(frozen=True)
class Incoming:
    """One message to answer: its text (a picture's caption) and the pictures sent with it."""

    text: str
    pictures: Sequence[Picture] = ()


@dataclass(frozen=True)
class TurnContext:
    """Everything a turn's stages read besides the message (see the module docstring).

    ``memory`` is the agent's memory as heard in this session (``MemoryScope.within``): recall
    and every tool act within its audience (``readers``). ``capture`` is what capture does
    after the turn (not "off": a message that tells one fact is acknowledged). ``zone`` is the
    sender's own time zone, else ``default_zone``. ``clock`` is now (tests inject theirs).
    ``tools``: the peer's built-in and MCP tools (None: memory and reminders only).
    ``spoken``: the message was heard in a voice note, not typed; the tools that take
    something away (``UNDOING_TOOLS``) are not offered (a misheard or hostile "forget
    everything" waits for a typed yes, #47)."""

    peer: MemoryHost
    agent: AgentHandle
    session: Session
    sender: str
    llm: ChatModel | None
    memory: MemoryScope
    reminders: Reminders
    default_zone: str
    zone: str
    capture: Mode = "off"
    tuning: RecallTuning = DEFAULT_TUNING
    clock: Callable[[], datetime] = utc_now
    can: ModelCan = field(default_factory=ModelCan)
    tools: ToolBox | None = None
    spoken: bool = False

    @classmethod
    async def open(
        cls,
        peer: TurnHost,
        agent: AgentHandle,
        session: Session,
        sender: str,
        llm: ChatModel | None,
        memory: MemoryScope | None = None,
        default_zone: str = "UTC",
        capture: Mode = "off",
        tuning: RecallTuning = DEFAULT_TUNING,
        clock: Callable[[], datetime] = utc_now,
        tools: ToolBox | None = None,
    ) -> TurnContext:
        """The context of a turn of ``agent`` in ``session`` (``memory``: default the agent's
        own view); reads the sender's zone once."""
        reminders = peer.reminders.of(agent.db, agent.key)
        zone = await reminders.zone_of(sender, default_zone)
        return cls(
            peer,
            agent,
            session,
            sender,
            llm,
            memory if memory is not None else agent.memory,
            reminders,
            default_zone,
            zone,
            capture,
            tuning,
            clock,
            ModelCan.of(llm),
            tools,
        )

    @property
    def readers(self) -> Audience | None:
        """Who hears this room now (None: the operator's full view)."""
        return self.memory.hearing.audience

    @property
    def acknowledge(self) -> bool:
        """Capture keeps what is told here: a message telling one fact gets "Noted: …"."""
        return self.capture != "off"

    async def say(self, reply: str) -> None:
        """The agent's reply, kept in the session's history."""
        await self.session.add_message("assistant", reply, self.agent.name)


__all__ = ["Incoming", "ModelCan", "TurnContext", "utc_now"]

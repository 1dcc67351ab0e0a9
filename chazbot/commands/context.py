"""What a command runs against: the peer, the agent and session it was given in, the sender."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chazbot.agent.session import Session
    from chazbot.peer import Agent, Peer


@dataclass
class Context:
    peer: Peer
    agent: Agent
    session: Session
    sender: str = "local"
    is_admin: bool = True
    prefix: str = "/"

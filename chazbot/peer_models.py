"""One part of the peer: its chat models (the peer's, made on first use, and each agent's own)
and what capture does with them.

``Peer.open`` builds it whole; commands reach it as ``commands.context.Models``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from chazbot.agent.capture import Mode, capture_mode, switched_mode
from chazbot.agent.chat_model import ChatModel
from chazbot.agent.llm import make_llm

if TYPE_CHECKING:
    from chazbot.agent.host import AgentHandle
    from chazbot.agent.session import Session
    from chazbot.config import LLMConfig

log = logging.getLogger("chazbot.peer")


class Models:
    """The peer's chat model and the agents' own (see the module docstring)."""

    def __init__(self, llm: LLMConfig | None, models_dir: Path) -> None:
        self._cfg = llm
        self._models_dir = models_dir
        self._llm: ChatModel | None = None
        self._made = False
        self._agent_llms: dict[tuple[str, str], ChatModel] = {}  # an agent's own model
        self._refused: set[tuple[str, str]] = set()

    @property
    def llm(self) -> ChatModel | None:
        """The chat model (made on first use: the local one loads lazily)."""
        if not self._made:
            self._llm = make_llm(self._cfg, self._models_dir)
            self._made = True
        return self._llm

    @property
    def made(self) -> ChatModel | None:
        """The chat model if it was made already (None: never asked for, or none)."""
        return self._llm

    def llm_for(self, agent: AgentHandle) -> ChatModel | None:
        """The chat model that answers as ``agent``: the peer's, or the one its backend gives
        for the agent's own ``model`` (``ChatModel.with_model``: the embedded backend loads a
        model of its own, each once, on first use; an OpenAI-compatible one takes the model
        per request). A model set from chat loads only what the operator offers."""
        base, model = self.llm, agent.config.model
        if model is None or base is None:
            return base
        definition = agent.definition
        from_chat = definition is not None and definition.sources.get("model") == "chat"
        key = ("chat" if from_chat else "config", model)
        found = self._agent_llms.get(key)
        if found is None:
            made = base.with_model(model, offered_only=from_chat)
            if made is None:  # stored from chat before models were offered: never fetched
                if key not in self._refused:
                    self._refused.add(key)
                    log.warning(
                        "agent %s: model %.80r is not offered to chat (llm.chat_models); "
                        "the peer's model answers",
                        agent.name,
                        model,
                    )
                return base
            found = self._agent_llms[key] = made
        return found

    async def capture_mode(self, agent: AgentHandle, session: Session | None = None) -> Mode:
        """What capture does for ``agent`` (in ``session``, whose switch may override it)."""
        return await capture_mode(agent, session, self.llm)

    def switched_mode(self, agent: AgentHandle, switch: bool | None) -> Mode:
        """``capture_mode`` with the session's switch (``Session.state``) already read."""
        return switched_mode(agent, switch, self.llm)

    async def aclose(self) -> None:
        if self._llm is not None:
            await self._llm.aclose()


__all__ = ["Models"]

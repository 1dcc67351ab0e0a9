"""Which chat model a config asks for: ``make_llm``, above both backends.

``ChatModel`` (in ``chat_model``) is the one interface the turn loop talks to; ``OpenAIChat``
(in ``openai_chat``) speaks the OpenAI ``/chat/completions`` protocol to any compatible
endpoint; ``LocalChat`` (in ``local_llm``) runs a tiny model in-process. Both backends import
``chat_model`` only, so nothing below this module imports it back.
"""

from __future__ import annotations

from pathlib import Path

from chazbot.agent import local_llm
from chazbot.agent.chat_model import ChatModel, ChatResult, ToolCall, parse_chat_response
from chazbot.agent.openai_chat import OpenAIChat
from chazbot.backends import public_url
from chazbot.config import LLMConfig


def make_llm(cfg: LLMConfig | None, models_dir: Path | None = None) -> ChatModel | None:
    """The chat model for a config.

    No ``llm`` section means the embedded local model if the ``local`` extra is installed,
    else None (the caller answers chat with a "no LLM configured" hint). ``backend: local``
    without the extra, or with a model that names nothing usable, is a BackendError.
    ``models_dir`` is where the local backend keeps fetched GGUF files.
    """
    if cfg is None:
        if not local_llm.local_available():
            return None
        return local_llm.LocalChat(LLMConfig(backend="local"), models_dir)
    if cfg.backend == "local":
        return local_llm.LocalChat(cfg, models_dir)
    return OpenAIChat(cfg)


__all__ = [
    "ChatModel",
    "ChatResult",
    "OpenAIChat",
    "ToolCall",
    "make_llm",
    "parse_chat_response",
    "public_url",
]

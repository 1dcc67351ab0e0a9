"""Whether the chat backend can run a model an admin names for an agent (``/agent set … model``).

An OpenAI-compatible backend is asked for its list (``GET /v1/models``): a model it does not
list is refused. A server without that list (HTTP 404) cannot be checked; the model is taken
and the answer says so. The local backend checks the name by its own rules
(``local_llm.model_source``: a built-in, a GGUF path that exists, an https URL) without
downloading anything.
"""

from __future__ import annotations

from chazbot.agent import local_llm
from chazbot.agent.chat_model import ChatModel
from chazbot.agent.openai_chat import OpenAIChat
from chazbot.errors import BackendError, InputError


async def check_model(llm: ChatModel | None, model: str) -> str:
    """'' when ``llm`` can run ``model``, a short note when it could not be checked; an
    InputError (one line) when the backend does not have it."""
    if llm is None:
        raise InputError("no chat model is configured (llm:), so no agent model can be chosen")
    if isinstance(llm, OpenAIChat):
        try:
            offered = await llm.models()
        except BackendError as exc:
            raise InputError(f"cannot check model {model!r}: {exc}") from exc
        if offered is None:
            return " (the backend lists no models, so it was not checked)"
        if model not in offered:
            shown = ", ".join(sorted(offered)[:10]) + (" …" if len(offered) > 10 else "")
            raise InputError(f"the chat backend has no model {model!r}; it offers: {shown}")
        return ""
    try:
        local_llm.model_source(model)
    except BackendError as exc:
        raise InputError(f"model {model!r}: {exc}") from exc
    return ""


__all__ = ["check_model"]

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
from chazbot.agent.local_models import chat_model_spec, offered_models
from chazbot.agent.openai_chat import OpenAIChat
from chazbot.errors import BackendError, InputError

OFFERED_SHOWN = 12


def _not_offered(model: str, offered: dict[str, str]) -> InputError:
    names = sorted(offered)
    shown = ", ".join(names[:OFFERED_SHOWN]) + (" …" if len(names) > OFFERED_SHOWN else "")
    return InputError(
        f"model {model[:80]!r} is not one this peer offers to chat (offered: {shown or 'none'});"
        " the operator adds models in config.yaml (llm.chat_models) or as .gguf files in the "
        "models directory"
    )


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
    if not isinstance(llm, local_llm.LocalChat):
        raise InputError("this chat backend takes no model from chat")
    local = offered_models(llm.cfg, llm.models_dir)
    spec = local.get(model.strip())
    if spec is None:
        raise _not_offered(model, local)
    try:
        local_llm.model_source(spec)
    except BackendError as exc:
        raise InputError(f"model {model[:80]!r}: {exc}") from exc
    return ""


__all__ = ["chat_model_spec", "check_model", "offered_models"]

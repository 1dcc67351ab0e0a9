"""Clients of the services a user brings (an OpenAI-compatible API) and the retry policy that
every outside call shares (the LLM, the embedder, the Matrix homeserver).

A leaf: it imports only ``chazbot.errors`` and libraries, so every layer may use it.
"""

from __future__ import annotations

from chazbot.backends.openai_compat import OpenAICompatClient, public_url, retry_after_s
from chazbot.backends.retry import Backoff, Retryable, retrying

__all__ = [
    "Backoff",
    "OpenAICompatClient",
    "Retryable",
    "public_url",
    "retry_after_s",
    "retrying",
]

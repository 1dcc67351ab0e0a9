"""Embedders: turn text into unit vectors for the semantic ranker (SPEC §3).

Split like the chat model: ``protocol`` (the ``Embedder`` interface and shared checks),
``openai`` (any OpenAI-compatible ``/embeddings`` endpoint, over the shared client in
``chazbot.backends``) and ``local`` (multilingual-e5-small in-process, the ``local`` extra);
``make_embedder`` picks one from the ``embedding:`` block of the config.

Every vector returned is float32 and L2-normalised, so cosine similarity is a dot product.
Embedding ``key + " " + value`` of a memory row is the caller's job; an embedder embeds texts.
Errors are :class:`~chazbot.errors.BackendError` with a one-line message that never holds the
API key.
"""

from __future__ import annotations

from chazbot.config import EmbeddingConfig
from chazbot.memory.embedders.local import (
    DEFAULT_LOCAL_MODEL,
    LOCAL_MODELS,
    LocalEmbedder,
    LocalModel,
)
from chazbot.memory.embedders.openai import OpenAIEmbedder, parse_embeddings_response
from chazbot.memory.embedders.protocol import Embedder


def make_embedder(cfg: EmbeddingConfig | None) -> Embedder | None:
    """The embedder the config asks for; ``None`` (no ``embedding:`` block) means BM25 only.

    Raises ConfigError for a config that cannot work (no model for ``openai``, an unknown
    local model) and BackendError when the ``local`` extra is not installed.
    """
    if cfg is None:
        return None
    if cfg.backend == "openai":
        return OpenAIEmbedder(cfg)
    return LocalEmbedder(cfg)


__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "LOCAL_MODELS",
    "Embedder",
    "LocalEmbedder",
    "LocalModel",
    "OpenAIEmbedder",
    "make_embedder",
    "parse_embeddings_response",
]

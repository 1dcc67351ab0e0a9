"""Shared fixtures: the stand-ins for what users bring (an LLM, an embedding API)."""

from __future__ import annotations

from tests.standin_embeddings import standin_embeddings
from tests.standin_llm import standin_llm

__all__ = ["standin_embeddings", "standin_llm"]

"""Shared fixtures: the stand-ins for what users bring (an LLM, an embedding API), and one
real Synapse per test session for every Matrix test."""

from __future__ import annotations

from tests.support.standin_embeddings import standin_embeddings
from tests.support.standin_llm import standin_llm
from tests.support.standin_speech import standin_speech
from tests.support.synapse import chazbot, humans, matrix_user, synapse, synapse_admin

__all__ = [
    "chazbot",
    "humans",
    "matrix_user",
    "standin_embeddings",
    "standin_llm",
    "standin_speech",
    "synapse",
    "synapse_admin",
]

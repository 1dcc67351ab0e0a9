"""Shared fixtures: the stand-ins for what users bring (an LLM, an embedding API), and one
real Synapse per test session for every Matrix test (``shared_bot_top``: the config of a
module's shared bot, ``tests/support/shared_bot.py``, unless the module says its own)."""

from __future__ import annotations

from tests.support.shared_bot import shared_bot_top
from tests.support.standin_embeddings import standin_embeddings
from tests.support.standin_llm import standin_llm
from tests.support.standin_speech import standin_speech
from tests.support.synapse import chazbot, humans, matrix_user, synapse, synapse_admin

__all__ = [
    "chazbot",
    "humans",
    "matrix_user",
    "shared_bot_top",
    "standin_embeddings",
    "standin_llm",
    "standin_speech",
    "synapse",
    "synapse_admin",
]

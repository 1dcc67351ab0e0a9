"""Memory: rows, tokenizer, BM25 and vector indexes, RRF, per-DB views, the engine, banks,
the agent-facing scope and its tools. Knows nothing about Matrix."""

from __future__ import annotations

from chazbot.memory.banks import BankRef, Registry
from chazbot.memory.bm25 import BM25Index
from chazbot.memory.embedders import Embedder, LocalEmbedder, OpenAIEmbedder, make_embedder
from chazbot.memory.engine import MemoryEngine
from chazbot.memory.fusion import rrf, top_fused
from chazbot.memory.rows import Hit, MemoryRow
from chazbot.memory.scope import MemoryScope
from chazbot.memory.tokenize import auto_recall_query, document_text, tokenize
from chazbot.memory.tools import TOOLS, run_tool
from chazbot.memory.vectors import VectorIndex
from chazbot.memory.view import MemoryView

__all__ = [
    "TOOLS",
    "BM25Index",
    "BankRef",
    "Embedder",
    "Hit",
    "LocalEmbedder",
    "MemoryEngine",
    "MemoryRow",
    "MemoryScope",
    "MemoryView",
    "OpenAIEmbedder",
    "Registry",
    "VectorIndex",
    "auto_recall_query",
    "document_text",
    "make_embedder",
    "rrf",
    "run_tool",
    "tokenize",
    "top_fused",
]

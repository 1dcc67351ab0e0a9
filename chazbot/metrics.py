"""Prometheus metrics of one chazbot process (one registry, exposed at /metrics)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

TURNS = Counter("chazbot_turns", "Agent turns run", ["outcome"], registry=REGISTRY)
TOOL_CALLS = Counter(
    "chazbot_tool_calls", "Tool calls by tool and outcome", ["tool", "outcome"], registry=REGISTRY
)
RECALL_SECONDS = Histogram(
    "chazbot_recall_seconds",
    "Latency of one recall (tool, command or auto-recall per store)",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
    registry=REGISTRY,
)
RECALL_BM25_FALLBACKS = Counter(
    "chazbot_recall_bm25_fallbacks",
    "Recalls that fell back to BM25 only because the query embedding failed or timed out",
    ["reason"],
    registry=REGISTRY,
)
VECTORS_LATER = Counter(
    "chazbot_vectors_later",
    "Vectors of captured rows written after their rows, in background batches, by outcome",
    ["outcome"],
    registry=REGISTRY,
)
AUTO_RECALL_HITS = Counter(
    "chazbot_auto_recall_hits", "Memories injected by auto-recall", registry=REGISTRY
)
LLM_SECONDS = Histogram(
    "chazbot_llm_seconds",
    "Latency of LLM calls within turns",
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    registry=REGISTRY,
)
LLM_ERRORS = Counter(
    "chazbot_llm_errors", "Turns that failed on the LLM backend", registry=REGISTRY
)
MATRIX_EVENTS = Counter(
    "chazbot_matrix_events", "Matrix events by outcome", ["outcome"], registry=REGISTRY
)
# chazbot_sync_entries{direction=sent|received|refused} is collected from the peer at scrape
# time (transports/http.py), because the sync layer keeps its own counters.
COMMANDS = Counter("chazbot_commands", "Commands run by outcome", ["outcome"], registry=REGISTRY)
REMINDERS = Counter(
    "chazbot_reminders", "Reminders due, delivered on time and late", ["state"], registry=REGISTRY
)
TRANSCRIPTIONS = Counter("chazbot_transcriptions", "Voice messages transcribed", registry=REGISTRY)
TRANSCRIPTION_SECONDS = Histogram(
    "chazbot_transcription_seconds", "Time to transcribe one voice message", registry=REGISTRY
)

"""Memory: rows, tokenizer, BM25 and vector indexes, RRF, per-DB views, the engine, banks,
the agent-facing scope and its tools. Knows nothing about Matrix.

The package re-exports nothing: ``import chazbot.memory.bm25`` loads BM25 and what it needs,
not the engine, the embedders and their HTTP client (aiohttp) as well. Import each name from
its module (``chazbot.memory.engine.MemoryEngine``)."""

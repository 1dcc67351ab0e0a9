"""What the tests share: the stand-ins for what users bring (an LLM, an embedding API, a
speech server), the session's real Synapse, peers syncing on loopback, waits on conditions and
the repository's paths."""

"""chazbot: a self-hosted Matrix agent bot with signed, shareable, persistent memory.

Python API::

    import chazbot

    async with chazbot.open(state_dir, config=None) as peer:  # config: path, Config or None
        agent = peer.agent("chaz")
        row_id = await agent.remember(key, value, tags=None, bank=None)
        hits = await agent.recall(query, tags=None, limit=10, bank=None)
        await agent.forget(key, bank=None)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from chazbot.config import Config, load_config
from chazbot.errors import ChazError
from chazbot.memory.rows import Hit
from chazbot.peer import Agent, Peer

__version__ = "0.1.0"


@asynccontextmanager
async def open(
    state_dir: str | Path, config: str | Path | Config | None = None
) -> AsyncIterator[Peer]:
    """Open (creating if needed) the peer whose state lives in ``state_dir``.

    ``config`` is a path to a YAML file, a ``Config``, or None for the embedded defaults;
    ``state_dir`` always wins over the config's own ``state_dir``.
    """
    if config is None:
        cfg = Config()
    elif isinstance(config, Config):
        cfg = config
    else:
        cfg = load_config(config)
    cfg = cfg.model_copy(update={"state_dir": Path(state_dir)})
    peer = await Peer.open(cfg)
    try:
        yield peer
    finally:
        await peer.close()


__all__ = ["Agent", "ChazError", "Config", "Hit", "Peer", "__version__", "open"]

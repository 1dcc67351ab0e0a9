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

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # the names below load on first use, so ``import chazbot.x`` stays light
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from chazbot.config import Config
    from chazbot.errors import ChazError
    from chazbot.memory.rows import Hit
    from chazbot.peer import Peer, PeerTuning
    from chazbot.peer_hosting import Agent

_LAZY = {
    "Agent": "chazbot.peer_hosting",
    "Peer": "chazbot.peer",
    "Config": "chazbot.config",
    "ChazError": "chazbot.errors",
    "Hit": "chazbot.memory.rows",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'chazbot' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def open(
    state_dir: str | Path,
    config: str | Path | Config | None = None,
    *,
    tuning: PeerTuning | None = None,
) -> AbstractAsyncContextManager[Peer]:
    """Open (creating if needed) the peer whose state lives in ``state_dir``.

    ``config`` is a path to a YAML file, a ``Config``, or None for the embedded defaults;
    ``state_dir`` always wins over the config's own ``state_dir``. Use as
    ``async with chazbot.open(dir) as peer``. ``tuning``: how long the peer waits
    (``peer.PeerTuning``; None: the measured defaults), for tests and benches.
    """
    from chazbot.peer import DEFAULT_TUNING, open_peer

    return open_peer(state_dir, config, tuning or DEFAULT_TUNING)


__all__ = ["Agent", "ChazError", "Config", "Hit", "Peer", "__version__", "open"]

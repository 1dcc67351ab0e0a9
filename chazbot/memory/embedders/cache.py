"""Each text embedded once: an embedder's recent vectors, by purpose and exact text (#48).

A turn's texts reach the embedder by several paths (auto-recall's focus words, capture's look
for close memories, a follow-up's earlier question, the same message told in many rooms, the
same row text in one batch), and an embedding is most of what a turn costs in CPU
(docs/measured.md, "Embeddings per turn"). ``VectorCache`` keeps the last ``entries`` vectors
by ``(query or passage, text)``, so the same text for the same purpose is embedded once:

- a text asked for again gets the vector kept (the least recently used goes past ``entries``);
- a text asked for while its embedding is under way waits for that one (no second call);
- a batch of documents sends each distinct text once, and only those not kept.

e5 embeds a query ("query: …") and a passage ("passage: …") differently, so the purpose is
part of the key there: a query vector never stands in for a row's (an OpenAI-compatible API
embeds both alike, and one vector serves both). Failures are not kept (the next
call tries again); a caller that gives up (a timeout) leaves the embedding under way to the
others waiting for it. Vectors handed out are read-only: one array serves every caller.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Embed = Callable[[list[str]], Awaitable[np.ndarray]]
"""Embeds texts of one purpose: an ``(n, dim)`` array, row ``i`` of ``texts[i]``."""
Key = tuple[bool, str]  # (is a query, text)


@dataclass(frozen=True)
class CacheTuning:
    """How many vectors an embedder keeps: measured, passed in, never a global a test flips."""

    entries: int = 256
    """Vectors kept (384-d: 1.5 KB each; 3,072-d: 12 KB). A turn needs a few; more lets a
    question asked in several rooms, or asked again, be embedded once."""


DEFAULT_CACHE = CacheTuning()


class VectorCache:
    """The vectors an embedder made lately, and the embeddings under way (see the module)."""

    def __init__(self, tuning: CacheTuning = DEFAULT_CACHE, by_purpose: bool = True) -> None:
        """``by_purpose``: a query and a passage of one text are embedded apart (e5's
        prefixes); False for an API that embeds both alike (one vector serves both)."""
        self.tuning = tuning
        self.by_purpose = by_purpose
        self._kept: OrderedDict[Key, np.ndarray] = OrderedDict()
        self._running: dict[Key, asyncio.Future[np.ndarray]] = {}
        self.hits = 0
        self.embedded = 0  # texts sent to the embedder

    def __len__(self) -> int:
        return len(self._kept)

    async def query(self, text: str, embed: Embed) -> np.ndarray:
        """The query vector of ``text``, embedded by ``embed`` only when not kept or under way."""
        return (await self.vectors([text], True, embed))[0]

    async def documents(self, texts: Sequence[str], embed: Embed) -> np.ndarray:
        """The ``(n, dim)`` passage vectors of ``texts``, each distinct text embedded once."""
        return np.stack(await self.vectors(list(texts), False, embed))

    async def vectors(self, texts: list[str], is_query: bool, embed: Embed) -> list[np.ndarray]:
        """A vector per text (read-only, possibly shared), in order."""
        is_query = is_query and self.by_purpose
        found: dict[Key, np.ndarray] = {}
        waits: dict[Key, asyncio.Future[np.ndarray]] = {}
        todo: list[Key] = []
        for key in dict.fromkeys((is_query, t) for t in texts):
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
                found[key] = kept
                self.hits += 1
            elif key in self._running:
                waits[key] = self._running[key]
                self.hits += 1
            else:
                todo.append(key)
        if todo:
            loop = asyncio.get_running_loop()
            for key in todo:
                future: asyncio.Future[np.ndarray] = loop.create_future()
                future.add_done_callback(_retrieved)
                self._running[key] = waits[key] = future
            self.embedded += len(todo)
            task = asyncio.ensure_future(self._embed(todo, embed))
            task.add_done_callback(_retrieved)
        for key, future in waits.items():
            found[key] = await asyncio.shield(future)  # a caller's timeout leaves it running
        return [found[(is_query, t)] for t in texts]

    async def _embed(self, keys: list[Key], embed: Embed) -> None:
        try:
            matrix = await embed([text for _, text in keys])
        except Exception as exc:  # every waiter gets it; nothing is kept
            for key in keys:
                future = self._running.pop(key)
                if not future.done():
                    future.set_exception(exc)
            return
        except asyncio.CancelledError:  # the loop is closing
            for key in keys:
                self._running.pop(key).cancel()
            raise
        for key, row in zip(keys, matrix, strict=True):
            vector = np.array(row, dtype=np.float32)
            vector.setflags(write=False)
            self._keep(key, vector)
            future = self._running.pop(key)
            if not future.done():
                future.set_result(vector)

    def _keep(self, key: Key, vector: np.ndarray) -> None:
        if self.tuning.entries <= 0:
            return
        self._kept[key] = vector
        self._kept.move_to_end(key)
        while len(self._kept) > self.tuning.entries:
            self._kept.popitem(last=False)


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark an outcome seen: a failure nobody waits for any more is not logged as lost."""
    if not future.cancelled():
        future.exception()


__all__ = ["DEFAULT_CACHE", "CacheTuning", "Embed", "VectorCache"]

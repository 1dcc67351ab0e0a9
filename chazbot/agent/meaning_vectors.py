"""The fixed sentences a forget by meaning is measured against (``meaning_kinds``: the
anchors, the kinds' statements and questions), embedded once per embedder and kept (#45).

Embedding them one by one took the first forget of a process 1-8 s (docs/measured.md). Now:

- a peer starts ``FixedVectors.warm`` in the background when it opens (``Peer.open``): the
  vectors are read from ``<state_dir>/meaning/<fingerprint>.npy`` when a file of this
  embedder and these sentences is there (a restart embeds nothing), else embedded one at a
  time (a person's own query waits behind one sentence at most) and written there;
- a forget asks ``FixedVectors.of``: the vectors kept, or the warming under way, or (no peer
  warmed them: a test, a tool) it embeds them itself.

The fingerprint is the SHA-256 of the embedder's name and the sentences, so another model
or a changed table never reads vectors that are not its own; a file of the wrong shape, with
a value that is no unit vector, or whose probes (three sentences embedded again when it is
read) differ from what the embedder makes, is embedded again and rewritten.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import tempfile
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from chazbot.agent.meaning_kinds import ANCHORS, ASKED, KINDS
from chazbot.memory.embedders import Embedder

log = logging.getLogger(__name__)

STATEMENTS: tuple[str, ...] = tuple(s for statements in KINDS.values() for s in statements)
QUESTIONS: tuple[str, ...] = tuple(q for questions in ASKED.values() for q in questions)
FIXED: tuple[str, ...] = ANCHORS + STATEMENTS + QUESTIONS
"""Every fixed sentence, in this order (each embedded as a query)."""
ANCHOR_ROWS = slice(0, len(ANCHORS))
STATEMENT_ROWS = slice(len(ANCHORS), len(ANCHORS) + len(STATEMENTS))
QUESTION_ROWS = slice(len(ANCHORS) + len(STATEMENTS), len(FIXED))
STORE_DIR = "meaning"
"""The folder of the state directory the vectors are kept in."""


def fingerprint(embedder_name: str) -> str:
    """What a kept file is named by: the embedder and the sentences it embedded."""
    digest = hashlib.sha256(embedder_name.encode())
    for sentence in FIXED:
        digest.update(b"\0" + sentence.encode())
    return digest.hexdigest()[:32]


def _read(path: Path) -> NDArray[np.float32] | None:
    """The vectors kept at ``path`` when they are whole and sound, else None."""
    try:
        matrix = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if matrix.ndim != 2 or matrix.shape[0] != len(FIXED) or matrix.dtype != np.float32:
        return None
    norms = np.linalg.norm(matrix, axis=1)
    if not np.all(np.isfinite(matrix)) or not np.allclose(norms, 1.0, atol=1e-3):
        return None
    out: NDArray[np.float32] = matrix
    return out


def _write(path: Path, matrix: NDArray[np.float32]) -> None:
    """Write ``matrix`` to ``path`` whole or not at all, readable by the owner only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".meaning-", suffix=".npy", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            np.save(out, matrix, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_PROBES = (0, len(FIXED) // 2, len(FIXED) - 1)


async def _agrees(embedder: Embedder, matrix: NDArray[np.float32]) -> bool:
    """Whether a kept file holds what the embedder makes: three of its sentences embedded
    again (a file edited or copied in from another model is never used)."""
    for at in _PROBES:
        vector = np.asarray(await embedder.embed_query(FIXED[at]), np.float32)
        if vector.shape != matrix[at].shape or float(vector @ matrix[at]) < _SAME:
            return False
    return True


_SAME = 0.999
"""The cosine at which a kept vector is the one the embedder makes (it is deterministic)."""


class FixedVectors:
    """The fixed sentences' vectors per embedder (by its name), for the process."""

    def __init__(self) -> None:
        self._made: dict[str, NDArray[np.float32]] = {}
        self._making: dict[str, asyncio.Task[NDArray[np.float32]]] = {}
        self.embedded = 0
        """Sentences embedded (not read from a file) by this process: what a test counts."""

    def kept(self, embedder: Embedder) -> bool:
        """Whether ``embedder``'s vectors are ready (a forget will embed none of them)."""
        return embedder.name in self._made

    def warm(self, embedder: Embedder, store: Path | None) -> asyncio.Task[NDArray[np.float32]]:
        """Start (or join) making ``embedder``'s vectors in the background: read from
        ``store`` (a folder) when kept there, else embedded and written there."""
        loop = asyncio.get_running_loop()
        key = embedder.name
        task = self._making.get(key)
        if task is None or task.done() or task.get_loop() is not loop:  # another loop's: gone
            task = loop.create_task(self._make(embedder, store))
            self._making[key] = task
            task.add_done_callback(lambda done: self._done(key, done))
        return task

    def _done(self, key: str, task: asyncio.Task[NDArray[np.float32]]) -> None:
        if self._making.get(key) is task:
            del self._making[key]
        if not task.cancelled() and task.exception() is not None:  # ``of`` tries again
            log.warning("embedding the meaning sentences failed: %s", task.exception())

    async def of(self, embedder: Embedder) -> NDArray[np.float32]:
        """``embedder``'s vectors of ``FIXED`` (rows in its order)."""
        made = self._made.get(embedder.name)
        if made is not None:
            return made
        return await asyncio.shield(self.warm(embedder, None))

    async def _make(self, embedder: Embedder, store: Path | None) -> NDArray[np.float32]:
        path = store / f"{fingerprint(embedder.name)}.npy" if store is not None else None
        matrix = await asyncio.to_thread(_read, path) if path is not None else None
        if matrix is not None and not await _agrees(embedder, matrix):
            log.warning("the meaning vectors in %s are not this embedder's: made again", path)
            matrix = None
        if matrix is None:
            vectors = []
            for sentence in FIXED:  # one at a time: a person's query waits behind one only
                vectors.append(np.asarray(await embedder.embed_query(sentence), np.float32))
                self.embedded += 1
            matrix = np.stack(vectors).astype(np.float32)
            if path is not None:
                try:
                    await asyncio.to_thread(_write, path, matrix)
                except OSError as exc:  # kept for the process all the same
                    log.warning("could not keep the meaning vectors in %s: %s", path, exc)
        matrix.setflags(write=False)
        self._made[embedder.name] = matrix
        return matrix


FIXED_VECTORS = FixedVectors()
"""The process's kept vectors (one model's are the same in every peer of the process)."""


__all__ = [
    "ANCHOR_ROWS",
    "FIXED",
    "FIXED_VECTORS",
    "QUESTIONS",
    "QUESTION_ROWS",
    "STATEMENTS",
    "STATEMENT_ROWS",
    "STORE_DIR",
    "FixedVectors",
    "fingerprint",
]

"""What every embedder offers: the ``Embedder`` protocol and the checks all of them share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from chazbot.errors import BackendError


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors.

    ``name`` is ``<provider>/<model>``; vectors are stored under ``embeddings:<name>``.
    ``dim`` is known after the first call at the latest.
    """

    name: str
    dim: int | None

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents (memory rows): an ``(n, dim)`` float32 array of unit rows."""
        ...

    async def embed_query(self, text: str) -> np.ndarray:
        """Embed a search query: a ``(dim,)`` float32 unit vector."""
        ...

    async def aclose(self) -> None:
        """Release connections; the embedder may be used again afterwards."""
        ...


def normalise_rows(matrix: np.ndarray, what: str) -> np.ndarray:
    """Rows scaled to unit length, as float32; a zero or non-finite row is a backend error."""
    mat = np.asarray(matrix, dtype=np.float32)
    if mat.ndim != 2 or mat.shape[1] == 0:
        raise BackendError(f"{what} returned vectors of shape {mat.shape}")
    if not np.isfinite(mat).all():
        raise BackendError(f"{what} returned a vector with NaN or infinite values")
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    if (norms == 0).any():
        raise BackendError(f"{what} returned an all-zero vector")
    out: np.ndarray = (mat / norms).astype(np.float32, copy=False)
    return out


def check_texts(texts: Sequence[str]) -> list[str]:
    """The texts as a list; a lone string or a non-string item is a programming error."""
    if isinstance(texts, str):
        raise TypeError("embed_documents takes a sequence of texts, not one string")
    items = list(texts)
    for text in items:
        if not isinstance(text, str):
            raise TypeError(f"texts to embed must be str, got {type(text).__name__}")
    return items


__all__ = ["Embedder", "check_texts", "normalise_rows"]

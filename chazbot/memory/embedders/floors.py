"""Relevance floors: the cosine a row found only by the vector ranker needs to count (SPEC §5).

Every stored row has some positive cosine similarity to any query, and e5's sit high even for
unrelated text, so the nearest rows always come back and "nothing relevant, nothing injected"
could never hold with an embedder on. A row that BM25 also found is relevant as before; a row
found only by the vector ranker is kept when its cosine is at least the floor. The floor is
per embedding model (cosines of different models live on different scales); an agent may set
its own with ``/memory config set min_similarity <x>`` (``reset`` goes back to the model's).

The defaults below are measured, never guessed: ``bench/relevance_floor.py`` on the LoCoMo
dev split (conversations 0-4; 5-9 are held out), the highest floor that keeps dev hybrid
recall@10 within 0.005 of the unfloored figure. A model missing from the table has no floor
until someone measures one (its vector-only rows are all kept, the behaviour before floors).
"""

from __future__ import annotations

import math

from chazbot.errors import InputError

AGENT_CONFIG_STORE = "config"
"""The agent DB's store of its settings (``/memory config``; ``agent.recall`` names it too)."""
FLOOR_FIELD = "min_similarity"
"""The agent's setting in its ``config`` store (a decimal string: entries hold no floats)."""

DEFAULT_FLOORS: dict[str, float] = {
    # .venv/bin/python bench/relevance_floor.py --split dev: the highest floor within 0.005
    # of the unfloored recall@10; what it costs and saves is in docs/memory.md, "Relevance
    # floor".
    "local/multilingual-e5-small-q4": 0.83,
}
"""Default floor per ``<provider>/<model>`` (the name vectors are stored under)."""


def default_floor(model: str | None) -> float | None:
    """The measured floor of ``model``; None when it has none (or there is no embedder)."""
    return None if model is None else DEFAULT_FLOORS.get(model)


def parse_floor(text: str) -> float:
    """A floor typed by a person: a number in [-1, 1]; InputError (one line) otherwise."""
    raw = text.strip()
    try:
        value = float(raw)
    except ValueError:
        raise InputError(
            f"min_similarity takes a number from -1 to 1 (a cosine), not {raw[:40]!r}"
        ) from None
    if not math.isfinite(value) or not -1.0 <= value <= 1.0:
        raise InputError(f"min_similarity takes a number from -1 to 1 (a cosine), not {raw[:40]}")
    return value


def stored_floor(value: object) -> float | None:
    """A floor as kept in the ``config`` store, or None when absent or unreadable (then the
    model's default applies: a bad stored value never breaks recall)."""
    if not isinstance(value, str):
        return None
    try:
        return parse_floor(value)
    except InputError:
        return None


__all__ = [
    "AGENT_CONFIG_STORE",
    "DEFAULT_FLOORS",
    "FLOOR_FIELD",
    "default_floor",
    "parse_floor",
    "stored_floor",
]

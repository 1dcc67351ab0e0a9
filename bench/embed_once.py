"""One vector for a message's row and its turn's query? LoCoMo through capture, both ways (#48).

Run: ``.venv/bin/python bench/embed_once.py [--split dev] [--conversations N]
[--limit-turns N]``. Not a timed test; CI does not run it.

A statement that goes to the model is embedded twice today: its focus words as auto-recall's
query (``query: …``) and, after the reply, its captured row as a passage (``passage: <who>
<who>: <text> …``). Sharing one vector would save one of the two. This tells each conversation
through the product as ``bench/locomo_capture.py`` does, twice: once as the product stores
rows (``row``: each row's passage vector), once with each captured row given the query
vector of its message's focus words (``shared``: the vector the turn already has), then asks
every question through ``agent.recall`` (hybrid, the model's floor), and prints recall@5,
recall@10 and nDCG@10 of both, with the rows' and the queries' embedding counts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo_capture import ask, tell  # noqa: E402
from locomo_data import DEFAULT_DATA, SPLITS, Scores, load_locomo  # noqa: E402

from chazbot.agent.recall import focus_query  # noqa: E402
from chazbot.memory.embedders import Embedder  # noqa: E402
from chazbot.peer import Peer  # noqa: E402
from tests.support.standin_llm import StandinLLM  # noqa: E402

WAYS = ("row", "shared")


def message_words(row_text: str) -> str:
    """The focus words of the message a captured row's text holds (``<who> <who>: <text>
    [replying to …]``): what the turn's auto-recall embedded for it."""
    _, _, said = row_text.partition(": ")
    said = said.split(" [replying to ", 1)[0]
    return focus_query([said]) or said


def share_vectors(embedder: Embedder) -> None:
    """Rows get the query vector of their message's focus words, not a passage vector."""

    async def documents(texts: Sequence[str]) -> np.ndarray:
        return np.stack([await embedder.embed_query(message_words(t)) for t in texts])

    embedder.embed_documents = documents  # type: ignore[method-assign]


def prepare(way: str) -> Callable[[Peer], None] | None:
    """What ``locomo_capture.tell`` does to the peer before telling, for each way."""
    if way == "row":
        return None

    def shared(peer: Peer) -> None:
        assert peer.memory.embedder is not None
        share_vectors(peer.memory.embedder)

    return shared


async def run(args: argparse.Namespace) -> dict[str, Any]:
    logging.basicConfig(level=logging.WARNING)
    conversations = [c for c in load_locomo(args.data) if c.index in SPLITS[args.split]]
    conversations = conversations[: args.conversations]
    totals = {w: Scores([], [], []) for w in WAYS}
    started = time.perf_counter()
    llm = StandinLLM()
    await llm.start()
    try:
        for conv in conversations:
            for way in WAYS:
                with tempfile.TemporaryDirectory(prefix="embed-once-") as tmp:
                    await tell(conv, Path(tmp), llm, args.limit_turns, True, prepare(way))
                    scores, _ = await ask(conv, Path(tmp), llm, True, args.limit_turns)
                for part in ("r5", "r10", "ndcg10"):
                    getattr(totals[way], part).extend(getattr(scores, part))
    finally:
        await llm.stop()
    return {
        "ways": {w: s.summary() for w, s in totals.items()},
        "conversations": [c.index for c in conversations],
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--split", choices=tuple(SPLITS), default="dev")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N")
    parser.add_argument("--limit-turns", type=int, default=None, help="only the first N turns")
    args = parser.parse_args(argv)
    info = asyncio.run(run(args))
    print(f"LoCoMo {args.split}, conversations {info['conversations']}, {info['seconds']} s")
    print(f"{'row vector':<12}{'recall@5':>9}{'recall@10':>10}{'nDCG@10':>9}")
    for way, res in info["ways"].items():
        print(f"{way:<12}{res['recall@5']:>9.3f}{res['recall@10']:>10.3f}{res['ndcg@10']:>9.3f}")
    print(json.dumps({"bench": "embed-once", "split": args.split, **info}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

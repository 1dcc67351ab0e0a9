"""LoCoMo through the product: each conversation told to the agent with capture on, then recall.

Run: ``.venv/bin/python bench/locomo.py --capture [--split dev]`` (the capture path beside the
row-shaping methods), or alone: ``.venv/bin/python bench/locomo_capture.py [--split dev]
[--limit-turns N] [--json PATH]``. Not a timed test; CI does not run it.

This is the number users get: nothing here shapes rows. Each conversation gets a fresh peer
(real SQLite, the default ``chaz`` agent with ``capture: messages`` and no tools, the local
embedder when installed) and one room; every dialogue turn is a message from its speaker in
that room, sent at its session's date, answered by a stand-in OpenAI-compatible LLM
(``tests/support/standin_llm.py``, loopback HTTP), so capture stores it exactly as it would
in Matrix (auto-recall is off while telling: it would only shape the stand-in's replies,
which capture never stores).
A shared photo's caption is part of the message (``[shares a photo: …]``), as in the
row-shaping bench. Then every question (category 5 skipped) is asked through the public API,
``agent.recall(question, limit=10)``, with the embedder and the model's relevance floor
(hybrid), with the embedder and the agent's ``min_similarity`` at -1 (every vector match: the
anchor for the floor), and with the same state reopened without it (BM25), each scored
against its evidence turns.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # for tests.support.standin_llm when run as a script
    sys.path.insert(0, str(REPO))

import chazbot  # noqa: E402
from chazbot.agent.capture import CAPTURE_TAG  # noqa: E402
from chazbot.config import AgentConfig, Config, EmbeddingConfig  # noqa: E402
from chazbot.config import local_embedder_installed as embedder_installed  # noqa: E402
from chazbot.peer import Peer  # noqa: E402
from tests.support.standin_llm import StandinLLM  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo_data import (  # noqa: E402
    DEFAULT_DATA,
    SPLITS,
    Conversation,
    Scores,
    Turn,
    load_locomo,
)

TARGET_CAPTURE_HYBRID_R10_DEV = 0.72
NO_FLOOR = "capture-hybrid-no-floor"  # the agent's min_similarity at -1: every vector match
ROOM = "locomo"
TOLD = ("dated", "one-sitting")


def sent_at(turn: Turn) -> datetime:
    """The turn's session date (LoCoMo's ``8 May, 2023``) at noon UTC; now if unreadable."""
    for fmt in ("%d %B, %Y", "%d %B %Y", "%B %d, %Y"):
        try:
            return datetime.strptime(turn.date.strip(), fmt).replace(hour=12, tzinfo=UTC)
        except ValueError:
            continue
    return datetime.now(UTC)


def message_of(turn: Turn) -> str:
    return turn.text + (f" [shares a photo: {turn.caption}]" if turn.caption else "")


def config(state: Path, llm: StandinLLM, hybrid: bool) -> Config:
    return Config(
        state_dir=state,
        sync_listen="",
        http_listen="",
        llm=llm.config(timeout_s=30.0),
        embedding=EmbeddingConfig(backend="local") if hybrid else None,
        agents=[AgentConfig(name="chaz", capture="messages", allowed_tools=[])],
    )


async def source_ids(peer: Peer, turns: list[Turn]) -> dict[str, str]:
    """Captured rows' short ids → the dia_id of the turn they came from (in telling order)."""
    session = await peer.session(ROOM)
    rows = await peer.ledger.rows(session.db, "history")
    users = [r for r in rows if r.data.get("role") == "user"]
    assert len(users) == len(turns), (len(users), len(turns))
    return {
        hashlib.sha256(f"{session.db}:{r.n}".encode()).hexdigest()[:8]: t.dia_id
        for r, t in zip(users, turns, strict=True)
    }


async def tell(
    conv: Conversation,
    state: Path,
    llm: StandinLLM,
    limit: int | None,
    hybrid: bool | None = None,
    prepare: Callable[[Peer], None] | None = None,
    told: str = "dated",
) -> int:
    """Feed the conversation through the agent; the number of rows capture wrote. ``hybrid``
    (default: when the embedder is installed) embeds the rows as they are captured;
    ``bench/locomo_cv.py`` tells without it and embeds the captured rows itself. ``told``:
    ``dated``, each message sent at its session's date; ``one-sitting``, every message sent
    now, as a conversation replayed in one sitting is (nothing says when it was first said).
    ``prepare`` sees the peer before the first turn (``bench/embed_once.py`` changes its
    embedder)."""
    turns = conv.turns[:limit] if limit else conv.turns
    embed = embedder_installed() if hybrid is None else hybrid
    async with chazbot.open(state, config(state, llm, embed)) as peer:
        # Auto-recall only shapes the stand-in's replies, which capture does not store.
        assert (await peer.command("/memory config set auto_recall_enabled false")).ok
        if prepare is not None:
            prepare(peer)
        for turn in turns:
            result = await peer.chat(
                message_of(turn),
                session=ROOM,
                sender=turn.speaker,
                sent_at=sent_at(turn) if told == "dated" else None,
            )
            if not result.ok:
                raise RuntimeError(f"turn {turn.dia_id} failed: {result.text}")
        await peer.wait_captures()
        view = await peer.memory.view(peer.agent("chaz").db)
        return sum(1 for r in view.visible.values() if CAPTURE_TAG in r.tags)


async def embed_all(state: Path, llm: StandinLLM) -> None:
    """Every captured row's vector, by the product's ``reindex`` (``--embed-after``): the
    questions are then asked with none still owed, however slow the machine was."""
    async with chazbot.open(state, config(state, llm, True)) as peer:
        await peer.agent("chaz").memory.reindex()


async def ask(
    conv: Conversation,
    state: Path,
    llm: StandinLLM,
    hybrid: bool,
    limit: int | None,
    floor: str | None = None,
) -> tuple[Scores, list[float]]:
    """Every question through ``agent.recall``; ``floor`` is the agent's ``min_similarity``
    (None: the model's default; ``-1`` lets every vector match through, no floor)."""
    turns = conv.turns[:limit] if limit else conv.turns
    told = {t.dia_id for t in turns}
    scores = Scores([], [], [])
    latency: list[float] = []
    async with chazbot.open(state, config(state, llm, hybrid)) as peer:
        change = f"set min_similarity {floor}" if floor is not None else "reset min_similarity"
        assert (await peer.command(f"/memory config {change}")).ok
        ids = await source_ids(peer, turns)
        agent = peer.agent("chaz")
        for question in conv.questions:
            relevant = question.relevant & told
            if not relevant:
                continue
            started = time.perf_counter()
            hits = await agent.recall(question.text, None, 10)
            latency.append((time.perf_counter() - started) * 1000)
            ranked = [ids.get(h.key.rsplit("/", 1)[-1], h.key) for h in hits]
            scores.add(ranked, relevant)
    return scores, latency


async def run_capture(args: argparse.Namespace) -> dict[str, Any]:
    """The capture path's scores for ``args.split``, by method (capture-bm25, capture-hybrid)."""
    logging.basicConfig(level=logging.WARNING)
    conversations = [c for c in load_locomo(args.data) if c.index in SPLITS[args.split]]
    limit = getattr(args, "limit_turns", None)
    methods = ["capture-bm25"] + (["capture-hybrid", NO_FLOOR] if embedder_installed() else [])
    totals = {m: Scores([], [], []) for m in methods}
    latency: dict[str, list[float]] = {m: [] for m in methods}
    rows = 0
    started = time.perf_counter()
    llm = StandinLLM()
    await llm.start()
    try:
        for conv in conversations:
            with tempfile.TemporaryDirectory(prefix="locomo-capture-") as tmp:
                state = Path(tmp)
                told = getattr(args, "told", "dated")
                if getattr(args, "embed_after", False) and embedder_installed():
                    rows += await tell(conv, state, llm, limit, hybrid=False, told=told)
                    await embed_all(state, llm)
                else:
                    rows += await tell(conv, state, llm, limit, told=told)
                for method in methods:
                    hybrid = method != "capture-bm25"
                    floor = "-1" if method == NO_FLOOR else None
                    scores, ms = await ask(conv, state, llm, hybrid, limit, floor)
                    for part in ("r5", "r10", "ndcg10"):
                        getattr(totals[method], part).extend(getattr(scores, part))
                    latency[method] += ms
    finally:
        await llm.stop()
    results: dict[str, Any] = {m: s.summary() for m, s in totals.items()}
    for m in methods:
        ordered = sorted(latency[m])
        results[m]["recall_ms_p50"] = round(ordered[len(ordered) // 2], 2) if ordered else None
    return {
        "methods": results,
        "rows_captured": rows,
        "seconds": round(time.perf_counter() - started, 1),
        "told": getattr(args, "told", "dated"),
        "target_capture_hybrid_recall@10_dev": TARGET_CAPTURE_HYBRID_R10_DEV,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--split", choices=tuple(SPLITS), default="dev")
    parser.add_argument("--limit-turns", type=int, default=None, help="only the first N turns")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--embed-after",
        action="store_true",
        help="tell without the embedder, then embed every captured row (reindex) before asking",
    )
    parser.add_argument(
        "--told",
        choices=TOLD,
        default="dated",
        help="dated: each message at its session's date; one-sitting: every message now",
    )
    args = parser.parse_args(argv)
    info = asyncio.run(run_capture(args))
    results = info.pop("methods")
    print(
        f"LoCoMo capture path, split {args.split}, told {args.told}: "
        f"{info['rows_captured']} rows captured, "
        f"{info['seconds']} s"
    )
    print(f"{'method':<24}{'recall@5':>9}{'recall@10':>10}{'nDCG@10':>9}{'p50 ms':>8}")
    for method, res in results.items():
        print(
            f"{method:<24}{res['recall@5']:>9.3f}{res['recall@10']:>10.3f}{res['ndcg@10']:>9.3f}"
            f"{res['recall_ms_p50']:>8}"
        )
    hybrid = results.get("capture-hybrid")
    if hybrid and args.split == "dev":
        met = hybrid["recall@10"] >= TARGET_CAPTURE_HYBRID_R10_DEV
        print(
            f"target capture hybrid recall@10 >= {TARGET_CAPTURE_HYBRID_R10_DEV} on dev: "
            f"{'met' if met else 'NOT met'}"
        )
    line = json.dumps({"bench": "locomo-capture", "split": args.split, **results, **info})
    print(line)
    if args.json is not None:
        args.json.write_text(line + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""LoCoMo turn retrieval: recall@5, recall@10 and nDCG@10 of BM25, dense and hybrid recall.

Run: ``.venv/bin/python bench/locomo.py [--split dev|heldout|all] [--data PATH]
[--methods bm25,dense,hybrid] [--key K] [--value V] [--context C] [--tags T]
[--min-similarity model|none|X] [--cache DIR] [--json PATH] [--capture] [--cv]``. Not a timed
test; CI does not run it. The data (CC BY-NC 4.0) stays beside the project in
``../shared/data/locomo10.json``; see its README there.

As the data README says: every dialogue turn of one conversation is one memory entry in one
bank, every question except category 5 (adversarial, no answer in the conversation) is a
query, and its relevant entries are the turns its ``evidence`` names (``D<session>:<turn>``;
the few malformed ones such as ``D:11:26`` or ``D30:05`` are read leniently, and a question
whose evidence names no existing turn is skipped and counted).
Splits: ``dev`` is conversations 0-4 (tune here), ``heldout`` 5-9 (do not tune on it), ``all``.

Ranking is chazbot's own, through the product path: the rows go into a ``MemoryView`` (as a
bank's load does) and every query runs ``MemoryView.search``, the call ``agent.recall`` makes:
BM25 (k1 1.5, b 0.75) over ``key value tags``; with a query vector, cosine over the vectors of
``embed_text(key, value, speaker)`` (the row's human text, ``chazbot.memory.rows.row_text``;
the local embedder, ``query: `` / ``passage: `` prefixes), fused
by RRF (k 60, newest first on ties) over ``max(20, 2 x limit)`` candidates per ranker, rows
found only by vectors kept from the embedder's relevance floor up (``hybrid-no-floor``, also
measured, keeps every one: the anchor for the floor). Those are product defaults, chosen on
the dev split (see ``chazbot/memory/view.py``). How a LoCoMo turn becomes a memory row is
data shaping of the benchmark only, standing for what the bot would store when a user tells
it something:

- ``--key speaker-date-dia`` (default): ``"Caroline 8 May, 2023 D1:3"``, a key naming who,
  when and which turn, as issue 14's "remembered rows" (``speaker-dia``: ``"Caroline D1:3"``;
  ``dia``: just ``D1:3``). Keys are unique per turn, since a key holds one live row.
- ``--value speaker-caption``: ``"Caroline: <text> [shares a photo: <caption>]"``.
- ``--context prev``: the value ends with ``(replying to Melanie: <previous turn>)`` when the
  previous turn is in the same session, as a self-contained memory would say it.
- ``--tags date``: the session date as a tag (tags reach BM25, not the embedder).
- ``--origin speaker``: each row carries who told it (its provenance, as a row a model's
  ``remember`` tool writes during a turn does), which the embedded text names (issue 35),
  and is stamped with the time it was told (its session's day), as such a row is.

Also measured in every run: BM25 over the plain turn (key ``D1:3``, value as above, no context,
no tags), the row shape of the README's BM25 baseline. Prints a table beside the README's
baselines (measured on all ten conversations) and one JSON line. ``--cache DIR`` keeps vectors
between runs (keyed by model and exact text).

``--cv`` adds the cross-validated figures of ``bench/locomo_cv.py`` (dev only, whatever
``--split`` says): leave one dev conversation out, knobs tuned on four and scored on the
fifth, for the capture path and the remembered rows, each beside BM25 alone and today's
hybrid in the same run, with recall@5, recall@10 and nDCG@10 (mean ± spread over folds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from locomo_data import (
    ANCHOR,
    BASELINES,
    BEFORE,
    CONTEXTS,
    DEFAULT_DATA,
    KEYS,
    METHODS,
    NO_FLOOR,
    ORIGINS,
    RRF_K,
    SPLITS,
    TAGS,
    TARGET_HYBRID_R10_DEV,
    VALUES,
    CachedEmbedder,
    Conversation,
    Scores,
    load_locomo,
    memory_row,
    told_at,
)

from chazbot.config import EmbeddingConfig
from chazbot.memory.audience import Provenance
from chazbot.memory.bm25 import BM25Index
from chazbot.memory.embedders import DEFAULT_LOCAL_MODEL, LocalEmbedder
from chazbot.memory.embedders.floors import default_floor
from chazbot.memory.engine import embed_text
from chazbot.memory.rows import MemoryRow
from chazbot.memory.tokenize import document_text, tokenize
from chazbot.memory.view import DEFAULT_RANKING, MemoryView


async def build_view(
    conv: Conversation, args: argparse.Namespace, embedder: CachedEmbedder | None
) -> MemoryView:
    """The product's own view of one conversation told as one bank: newest-per-key rows, BM25,
    vectors and ``MemoryView.search`` (the ranking ``agent.recall`` runs), fed the rows as a
    bank's load would; doc ``i`` is turn ``i``."""
    rows = [
        memory_row(conv.turns, i, args.key, args.value, args.context, args.tags)
        for i in range(len(conv.turns))
    ]
    view = MemoryView(embedder.embedder.name if embedder is not None else None)
    told = getattr(args, "origin", "none") == "speaker"
    speakers = [t.speaker if told else None for t in conv.turns]
    memory_rows = [
        MemoryRow(
            doc,
            f"bench/{doc}",
            key,
            value,
            tuple(tags),
            told_at(conv.turns[doc]) if told else doc,  # a row written during a turn: then
            (doc, "", 0),
            "bench",
            origin=Provenance("locomo", who, None) if who is not None else None,
        )
        for doc, ((key, value, tags), who) in enumerate(zip(rows, speakers, strict=True))
    ]
    doc_vectors: list[tuple[str, Any]] = []
    if embedder is not None:
        embed = getattr(args, "embed", embed_text)  # bench/row_shape.py passes its own rule
        texts = [  # the memory layer's rule
            embed(key, value, who) for (key, value, _), who in zip(rows, speakers, strict=True)
        ]
        vectors = await embedder.documents(texts)
        doc_vectors = [(f"bench/{doc}", vec) for doc, vec in enumerate(vectors)]
    view.load(memory_rows, doc_vectors, 0)
    return view


def floor_of(args: argparse.Namespace, model: str | None) -> float | None:
    """The relevance floor hybrid runs with: ``--min-similarity`` (``model``: the product's
    default for the embedder, ``none``: no floor, or a number)."""
    chosen = getattr(args, "min_similarity", "model")
    if chosen == "none" or model is None:
        return None
    if chosen == "model":
        return default_floor(model)
    return float(chosen)


async def run_conversation(
    conv: Conversation,
    args: argparse.Namespace,
    embedder: CachedEmbedder | None,
    scores: dict[str, Scores],
    per_category: dict[tuple[str, int], Scores],
) -> None:
    """Index one conversation as one bank and score every question against it."""
    anchor = BM25Index()
    anchor.add_many(
        (
            i,
            tokenize(
                document_text(*memory_row(conv.turns, i, "dia", "speaker-caption", "none", "none"))
            ),
        )
        for i in range(len(conv.turns))
    )
    view = await build_view(conv, args, embedder)
    query_vectors: np.ndarray | None = None
    if embedder is not None:
        query_vectors = await embedder.queries([q.text for q in conv.questions])
    floor = floor_of(args, view.model)

    for qi, question in enumerate(conv.questions):
        qvec = query_vectors[qi] if query_vectors is not None else None
        ranked_docs = {ANCHOR: [d for d, _ in anchor.search(tokenize(question.text), 10)]}
        if "bm25" in args.methods:
            ranked_docs["bm25"] = [r.row.doc for r in view.search(question.text, (), 10)]
        if "dense" in args.methods and view.vectors is not None and qvec is not None:
            ranked_docs["dense"] = [d for d, _ in view.vectors.search(qvec, 10)]
        if "hybrid" in args.methods:
            # with the relevance floor recall runs with (SPEC §5), and without it: the anchor
            ranked_docs["hybrid"] = [
                r.row.doc for r in view.search(question.text, (), 10, qvec, None, floor)
            ]
            if floor is not None:
                ranked_docs[NO_FLOOR] = [
                    r.row.doc for r in view.search(question.text, (), 10, qvec)
                ]
        for method, docs in ranked_docs.items():
            ranked = [conv.turns[d].dia_id for d in docs]
            scores[method].add(ranked, question.relevant)
            per_category.setdefault((method, question.category), Scores([], [], [])).add(
                ranked, question.relevant
            )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    conversations = [c for c in load_locomo(args.data) if c.index in SPLITS[args.split]]
    needs_vectors = bool({"dense", "hybrid"} & set(args.methods))
    embedder: CachedEmbedder | None = None
    if needs_vectors:
        local = LocalEmbedder(EmbeddingConfig(backend="local", model=args.model))
        embedder = CachedEmbedder(local, args.cache)
        await embedder.load()
    floor = floor_of(args, embedder.embedder.name if embedder is not None else None)
    extra = (NO_FLOOR,) if "hybrid" in args.methods and floor is not None else ()
    scores = {m: Scores([], [], []) for m in (ANCHOR, *args.methods, *extra)}
    per_category: dict[tuple[str, int], Scores] = {}
    started = time.perf_counter()
    for conv in conversations:
        await run_conversation(conv, args, embedder, scores, per_category)
    elapsed = time.perf_counter() - started
    result: dict[str, Any] = {
        "bench": "locomo",
        "split": args.split,
        "conversations": [c.index for c in conversations],
        "entries": sum(len(c.turns) for c in conversations),
        "queries": sum(len(c.questions) for c in conversations),
        "queries_without_evidence": sum(c.dropped for c in conversations),
        "settings": {
            "embedder": embedder.embedder.name if embedder else None,
            "depth_per_ranker": DEFAULT_RANKING.depth(10),
            "rrf_k": RRF_K,
            "dense_weight": DEFAULT_RANKING.dense_weight,
            "min_similarity": floor,
            "key": args.key,
            "value": args.value,
            "context": args.context,
            "tags": args.tags,
            "origin": getattr(args, "origin", "none"),
        },
        "results": {m: s.summary() for m, s in scores.items()},
        "by_category": {
            f"{m}/{cat}": {"n": len(s.r10), **s.summary()}
            for (m, cat), s in sorted(per_category.items())
        },
        "before_dev_recall@10": BEFORE,
        "baselines_all_ten": {k: {"recall@10": r, "ndcg@10": n} for k, (r, n) in BASELINES.items()},
        "seconds": round(elapsed, 1),
    }
    if embedder is not None:
        st = embedder.stats
        result["embedder"] = {
            "load_and_first_query_s": round(st.load_s, 3),
            "documents_embedded": st.docs,
            "documents_per_s": round(st.docs / st.docs_s, 1) if st.docs_s else None,
            "query_ms_median": round(statistics.median(st.query_ms), 1) if st.query_ms else None,
        }
    if "hybrid" in scores:
        r10 = result["results"]["hybrid"]["recall@10"]
        result["target"] = {
            "hybrid_recall@10_dev": TARGET_HYBRID_R10_DEV,
            "met": r10 >= TARGET_HYBRID_R10_DEV if args.split == "dev" else None,
        }
    return result


def print_table(result: dict[str, Any]) -> None:
    s = result["settings"]
    print(
        f"LoCoMo turn retrieval, split {result['split']} (conversations "
        f"{result['conversations'][0]}-{result['conversations'][-1]}): {result['entries']} "
        f"entries, {result['queries']} queries ({result['queries_without_evidence']} without "
        f"evidence skipped)"
    )
    print(
        f"embedder {s['embedder']}, {s['depth_per_ranker']} candidates per ranker, RRF k "
        f"{s['rrf_k']}; row: key={s['key']} value={s['value']} context={s['context']} "
        f"tags={s['tags']}; hybrid's relevance floor {s['min_similarity']}"
    )
    print(f"{'method':<56}{'recall@5':>9}{'recall@10':>10}{'nDCG@10':>9}")
    for method, res in result["results"].items():
        print(
            f"{method + ' (this run)':<56}{res['recall@5']:>9.3f}{res['recall@10']:>10.3f}"
            f"{res['ndcg@10']:>9.3f}"
        )
    for label, before in BEFORE.items():
        print(f"{label:<56}{'':>9}{before:>10.3f}{'':>9}")
    for label, (r10, ndcg) in BASELINES.items():
        print(f"{label:<56}{'':>9}{r10:>10.3f}{ndcg:>9.3f}")
    if "embedder" in result:
        e = result["embedder"]
        docs = (
            f"{e['documents_embedded']} documents at {e['documents_per_s']}/s"
            if e["documents_embedded"]
            else "documents all from the cache"
        )
        queries = (
            f"query median {e['query_ms_median']} ms"
            if e["query_ms_median"] is not None
            else "queries all from the cache"
        )
        print(f"embedder: load + first query {e['load_and_first_query_s']} s, {docs}, {queries}")
    target = result.get("target")
    if target and target["met"] is not None:
        verdict = "met" if target["met"] else "NOT met"
        print(f"target hybrid recall@10 >= {target['hybrid_recall@10_dev']} on dev: {verdict}")


def main(
    argv: Sequence[str] | None = None,
    embed: Callable[[str, str, str | None], str] = embed_text,
) -> int:
    """``embed``: what ``build_view`` embeds of a row (key, value); the product's rule."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.set_defaults(embed=embed)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo10.json")
    parser.add_argument("--split", choices=tuple(SPLITS), default="dev")
    parser.add_argument(
        "--methods",
        type=lambda v: tuple(m for m in v.split(",") if m),
        default=METHODS,
        help="comma-separated, of bm25,dense,hybrid",
    )
    parser.add_argument("--model", default=DEFAULT_LOCAL_MODEL, help="local embedder model")
    parser.add_argument("--key", choices=KEYS, default="speaker-date-dia")
    parser.add_argument("--value", choices=VALUES, default="speaker-caption")
    parser.add_argument("--context", choices=CONTEXTS, default="none")
    parser.add_argument("--tags", choices=TAGS, default="none")
    parser.add_argument(
        "--origin",
        choices=ORIGINS,
        default="none",
        help="speaker: rows carry who told them (a row written during a turn), none: not",
    )
    parser.add_argument(
        "--min-similarity",
        default="model",
        help="hybrid's relevance floor: model (the embedder's default), none, or a number",
    )
    parser.add_argument("--cache", type=Path, default=None, help="directory for cached vectors")
    parser.add_argument("--json", type=Path, default=None, help="also write the JSON here")
    parser.add_argument("--capture", action="store_true", help="also the capture path (slow)")
    parser.add_argument(
        "--cv",
        action="store_true",
        help="also leave-one-conversation-out over dev, both paths (bench/locomo_cv.py)",
    )
    args = parser.parse_args(argv)
    if unknown := set(args.methods) - set(METHODS):
        parser.error(f"unknown methods: {', '.join(sorted(unknown))}")
    if not args.data.exists():
        parser.error(f"no data at {args.data} (see ../shared/data/README.md)")
    result = asyncio.run(run(args))
    if args.capture:  # bench/locomo_capture.py: conversations told to the agent, capture on
        from locomo_capture import run_capture  # bench/ is sys.path[0] when run as a script

        result["capture"] = asyncio.run(run_capture(args))
        result["results"].update(result["capture"].pop("methods"))
    print_table(result)
    if args.cv:  # bench/locomo_cv.py: tuned on four dev conversations, scored on the fifth
        from locomo_cv import print_cv, run_cv

        args.paths, args.candidates = ("rows", "capture"), ("query", "dates")
        result["cv"] = asyncio.run(run_cv(args))
        print()
        print_cv(result["cv"])
    line = json.dumps(result, sort_keys=True)
    print(line)
    if args.json is not None:
        args.json.write_text(line + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

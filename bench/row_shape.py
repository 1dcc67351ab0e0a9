"""Row shape (issue 35): ``bench/locomo.py``'s recall in several row shapes, one run.

Run: ``.venv/bin/python bench/row_shape.py [--split dev|heldout] [--text 1|2] [--shapes
bench,key-only,tool,free] [--cache DIR] [--json PATH]`` (methods bm25 and hybrid). Not a timed
test; CI does not run it. The same LoCoMo turns stored as rows of different shapes:

- ``bench``: key ``Caroline 8 May, 2023 D1:3``, value ``Caroline: text [shares a photo: …]``
  (``bench/locomo.py``'s default);
- ``key-only``: the same key, the value the text alone (speaker and date only in the key);
- ``tool``: key ``D1:3``, the value the text alone, the row's provenance naming who told it
  and its time the session's day (as a row a model's ``remember`` tool writes during a turn);
- ``free``: key ``D1:3``, the text alone, no speaker anywhere (an imported note).

``--cv`` (dev only): leave one conversation out, the shape with the best recall@10 on the
other four scores the fifth (how BM25's teller and day were chosen). ``--text 2`` (default)
embeds the product's rule (``chazbot.memory.rows.row_text``); ``--text 1`` the rule before it
(``key value``), the anchor. Figures in docs/memory.md ("Row shape") and docs/measured.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo
from locomo_data import ANCHOR, DEFAULT_DATA, NO_FLOOR, SPLITS, CachedEmbedder, Scores, load_locomo

from chazbot.config import EmbeddingConfig
from chazbot.memory.embedders import DEFAULT_LOCAL_MODEL, LocalEmbedder
from chazbot.memory.engine import embed_text

SHAPES: dict[str, dict[str, str]] = {
    "bench": {"key": "speaker-date-dia", "value": "speaker-caption", "origin": "none"},
    "key-only": {"key": "speaker-date-dia", "value": "text", "origin": "none"},
    "tool": {"key": "dia", "value": "text", "origin": "speaker"},
    "free": {"key": "dia", "value": "text", "origin": "none"},
    # the candidates of BM25's teller and day (view.indexed_tokens), simulated as tags when
    # they were chosen (--cv); with them built, these add the same words a second time
    "tool-bm25-speaker": {"key": "dia", "value": "text", "origin": "speaker", "tags": "speaker"},
    "tool-bm25-speaker-date": {
        "key": "dia",
        "value": "text",
        "origin": "speaker",
        "tags": "speaker-date",
    },
}


def text_v1(key: str, value: str, speaker: str | None = None) -> str:
    """The embedded text before ``EMBED_TEXT_VERSION`` 2: the key and the value."""
    return f"{key} {value}"


def text_lead_twice(key: str, value: str, speaker: str | None = None) -> str:
    """A variant measured beside version 2: its lead ("Caroline: …") named twice."""
    text = embed_text(key, value, speaker)
    lead, sep, rest = text.partition(": ")
    return f"{lead} {lead}: {rest}" if sep and len(lead) <= 64 else text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--split", choices=("dev", "heldout"), default="dev")
    parser.add_argument("--text", choices=("1", "2", "lead2"), default="2")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--model", default=DEFAULT_LOCAL_MODEL)
    parser.add_argument("--cache", type=Path, default=None, help="directory for cached vectors")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--cv",
        action="store_true",
        help="leave one dev conversation out: choose among --shapes on four, score the fifth",
    )
    args = parser.parse_args(argv)
    shapes = [s for s in args.shapes.split(",") if s]
    if unknown := set(shapes) - set(SHAPES):
        parser.error(f"unknown shapes: {', '.join(sorted(unknown))}")
    texts = {"1": text_v1, "2": embed_text, "lead2": text_lead_twice}
    if args.cv:
        if args.split != "dev":
            parser.error("--cv reads the dev split only")
        return cross_validate(args, shapes, texts[args.text])
    out: dict[str, Any] = {"bench": "row_shape", "split": args.split, "text": args.text}
    for shape in shapes:
        run_args = argparse.Namespace(
            data=args.data,
            split=args.split,
            methods=("bm25", "hybrid"),
            model=args.model,
            context="none",
            min_similarity="model",
            cache=args.cache,
            embed=texts[args.text],  # what build_view embeds
            **{"tags": "none", **SHAPES[shape]},
        )
        result = asyncio.run(locomo.run(run_args))
        out[shape] = {m: result["results"][m] for m in ("bm25", "hybrid")}
        r = out[shape]
        print(
            f"{shape:<10} text v{args.text}  BM25 r@10 {r['bm25']['recall@10']:.3f}  hybrid"
            f" r@5 {r['hybrid']['recall@5']:.3f} r@10 {r['hybrid']['recall@10']:.3f}"
            f" nDCG@10 {r['hybrid']['ndcg@10']:.3f}",
            flush=True,
        )
    line = json.dumps(out, sort_keys=True)
    print(line)
    if args.json is not None:
        args.json.write_text(line + "\n", encoding="utf-8")
    return 0


def cross_validate(args: argparse.Namespace, shapes: list[str], embed: Any) -> int:
    """Leave one dev conversation out: the shape (a rule, as two shapes of the same rows) with
    the best hybrid recall@10 on the other four (their questions pooled) scores the fifth.
    Prints each shape's figure per conversation and the cross-validated mean beside them."""
    conversations = [c for c in load_locomo(args.data) if c.index in SPLITS["dev"]]
    local = LocalEmbedder(EmbeddingConfig(backend="local", model=args.model))
    embedder = CachedEmbedder(local, args.cache)
    asyncio.run(embedder.load())
    hits: dict[str, dict[int, list[float]]] = {}
    for shape in shapes:
        run_args = argparse.Namespace(
            methods=("hybrid",),
            context="none",
            min_similarity="model",
            embed=embed,
            **{"tags": "none", **SHAPES[shape]},
        )
        hits[shape] = {}
        for conv in conversations:
            scores = {m: Scores([], [], []) for m in (ANCHOR, "hybrid", NO_FLOOR)}
            asyncio.run(locomo.run_conversation(conv, run_args, embedder, scores, {}))
            hits[shape][conv.index] = scores["hybrid"].r10
    out: dict[str, Any] = {"bench": "row_shape_cv", "shapes": shapes, "folds": []}
    cv: list[float] = []
    for conv in conversations:
        others = [c.index for c in conversations if c is not conv]
        pooled = {s: statistics.fmean(x for i in others for x in hits[s][i]) for s in shapes}
        chosen = max(shapes, key=lambda s: (pooled[s], -shapes.index(s)))
        cv.extend(hits[chosen][conv.index])
        out["folds"].append({"held": conv.index, "chosen": chosen})
        each = "  ".join(f"{s} {statistics.fmean(hits[s][conv.index]):.3f}" for s in shapes)
        print(f"conversation {conv.index}: {each}  chosen on the others: {chosen}", flush=True)
    for shape in shapes:
        out[shape] = round(statistics.fmean(x for v in hits[shape].values() for x in v), 4)
    out["cv"] = round(statistics.fmean(cv), 4)
    print(
        "pooled dev r@10: "
        + "  ".join(f"{s} {out[s]:.3f}" for s in shapes)
        + f"  cv {out['cv']:.3f}"
    )
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

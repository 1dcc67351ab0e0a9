"""LoCoMo recall, cross-validated: leave one dev conversation out, tune on four, score the fifth.

Run: ``.venv/bin/python bench/locomo_cv.py [--cache DIR] [--paths rows,capture]
[--candidates NAMES] [--json PATH]``, or through ``bench/locomo.py --cv``. Not a timed test;
CI does not run it. Only the dev split (conversations 0-4) is ever read for tuning or
scoring here: conversations 5-9 are held out (``../shared/data/README.md``).

Why: the ranking's knobs were chosen on all five dev conversations and then reported on the
same five, so the dev figure partly fits them (issue 29). Here every fold chooses, among a
small grid of the knobs that exist, the setting with the best recall@10 on four conversations
(their questions pooled) and scores the fifth with it; five folds give a mean and a spread.
Beside it, in the same run and on the same folds: BM25 alone, today's hybrid (the product's
defaults), and the "plain dev" figure (the grid's best on all five, scored on all five: what
tuning on dev reports).

Two paths, each one bank per conversation, every question (category 5 skipped) a query for
10 rows, scored against the turns its evidence names:

- ``rows``: remembered rows as ``bench/locomo.py`` stores them by default (speaker/date keys,
  ``Speaker: text [photo]``).
- ``capture``: the rows the product's capture writes when the conversation is told to the
  agent through chat (``bench/locomo_capture.py``'s ``tell``, capture on, the stand-in LLM).
  Telling runs without the embedder (capture's rows do not depend on it) and its rows are
  kept in ``--cache`` by conversation (with the hash of ``chazbot/agent/capture.py``, to warn
  when it changed); the vectors are then embedded here, as the product's rule says
  (``vec=row``: key and the whole value, with its ``[replying to …]`` context, what capture
  embeds; ``vec=message``: the key and the message alone).

Ranking is ``MemoryView.search`` itself (what ``agent.recall`` runs on one bank); each grid
setting passes its own ``RankingSettings`` (``min_candidates``, ``candidates_per_result``,
``dense_weight``, ``time_aware``) and the relevance floor (``min_similarity``). Candidates
beyond the knobs are extra grid axes, so each is kept only where the folds choose it:

- ``query``: ``raw`` (the question as asked), ``content`` (BM25 sees only its non-stopword
  tokens, ``chazbot.memory.tokenize.STOPWORDS``; the vector is of the question),
  ``statement`` (also the vector's query drops the leading question words, "When did Caroline
  go …?" -> "Caroline go …"), ``statement-vector`` (only the vector's query is shaped; BM25
  sees the question as SPEC §3 says).
- ``dates``: the product's time-aware ranking (``chazbot.memory.when``; ``on``, today's) or
  not (``off``): when the question names a month (and maybe a year), the rows about that month
  go ahead of the others among the fused top 30. A third RRF list of those rows (``rrf``, a
  gentler push) was measured before it was built and never chosen over ``on``.
- ``vec`` (capture only): ``message`` / ``row`` as above.

The auto-recall focus/conversation fusion (``chazbot/agent/recall.py``) does not apply here:
a LoCoMo question is one message, so both of its queries are the question.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo_data import (  # noqa: E402
    DEFAULT_DATA,
    CachedEmbedder,
    Conversation,
    Scores,
    load_locomo,
    memory_row,
)

from chazbot.config import EmbeddingConfig  # noqa: E402
from chazbot.memory.embedders import DEFAULT_LOCAL_MODEL, LocalEmbedder  # noqa: E402
from chazbot.memory.embedders.floors import default_floor  # noqa: E402
from chazbot.memory.rows import MemoryRow  # noqa: E402
from chazbot.memory.tokenize import STOPWORDS, tokenize  # noqa: E402
from chazbot.memory.view import DEFAULT_RANKING, MemoryView, RankingSettings  # noqa: E402

DEV = range(0, 5)  # the only conversations this bench reads: 5-9 are held out
LIMIT = 10
TARGETS = {"capture": 0.72, "rows": 0.66}  # issue 29: CV recall@10


# -- one bank per conversation ---------------------------------------------------------------


@dataclass(frozen=True)
class Doc:
    key: str
    value: str
    tags: tuple[str, ...]
    dia: str  # the LoCoMo turn it came from
    vec_text: dict[str, str]  # what is embedded, by ``vec`` variant


@dataclass
class Bank:
    conv: Conversation
    docs: list[Doc]


def rows_bank(conv: Conversation) -> Bank:
    """Remembered rows: ``bench/locomo.py``'s default shape (speaker/date keys)."""
    docs = []
    for i, turn in enumerate(conv.turns):
        key, value, tags = memory_row(
            conv.turns, i, "speaker-date-dia", "speaker-caption", "none", "none"
        )
        text = f"{key} {value}"  # chazbot.memory.engine.embed_text
        docs.append(Doc(key, value, tuple(tags), turn.dia_id, {"row": text}))
    return Bank(conv, docs)


def capture_fingerprint() -> str:
    source = (REPO / "chazbot" / "agent" / "capture.py").read_bytes()
    return hashlib.sha256(source).hexdigest()[:12]


async def capture_bank(conv: Conversation, cache: Path | None) -> Bank:
    """The rows capture writes for ``conv`` told through chat, kept in ``cache``.

    A re-tell gives every row a new short id (it hashes the fresh peer's database), so its
    key and its vector's text change too: the told rows are kept by conversation and reused,
    with a warning when ``chazbot/agent/capture.py`` has changed since (delete the file to
    tell again)."""
    file = cache / f"capture-conv{conv.index}.json" if cache else None
    if file is not None and file.exists():
        kept = json.loads(file.read_text(encoding="utf-8"))
        raw = kept["rows"]
        if kept["capture_py"] != capture_fingerprint():
            print(
                f"warning: {file} was told with another capture.py; delete it to tell again",
                file=sys.stderr,
            )
    else:
        raw = await tell_and_read(conv)
        if file is not None:
            file.parent.mkdir(parents=True, exist_ok=True)
            kept = {"capture_py": capture_fingerprint(), "rows": raw}
            file.write_text(json.dumps(kept), encoding="utf-8")
    docs = []
    for r in raw:
        message = r["value"].split(" [replying to ", 1)[0]
        texts = {"row": f"{r['key']} {r['value']}", "message": f"{r['key']} {message}"}
        docs.append(Doc(r["key"], r["value"], tuple(r["tags"]), r["dia"], texts))
    return Bank(conv, docs)


async def tell_and_read(conv: Conversation) -> list[dict[str, Any]]:
    """Tell ``conv`` to a fresh peer with capture on; its captured rows with their turn."""
    from locomo_capture import source_ids, tell

    import chazbot
    from chazbot.agent.capture import CAPTURE_TAG
    from tests.support.standin_llm import StandinLLM

    llm = StandinLLM()
    await llm.start()
    try:
        with tempfile.TemporaryDirectory(prefix="locomo-cv-") as tmp:
            state = Path(tmp)
            await tell(conv, state, llm, None, hybrid=False)
            from locomo_capture import config

            async with chazbot.open(state, config(state, llm, False)) as peer:
                ids = await source_ids(peer, conv.turns)
                view = await peer.memory.view(peer.agent("chaz").db)
                rows = sorted(view.visible.values(), key=lambda r: r.doc)
                return [
                    {
                        "key": r.key,
                        "value": r.value,
                        "tags": list(r.tags),
                        "dia": ids[r.key.rsplit("/", 1)[-1]],
                    }
                    for r in rows
                    if CAPTURE_TAG in r.tags
                ]
    finally:
        await llm.stop()


# -- the grid ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Knobs:
    """One ranking setting: the view's knobs, the floor, and the candidate axes."""

    min_candidates: int = DEFAULT_RANKING.min_candidates
    per_result: int = DEFAULT_RANKING.candidates_per_result
    dense_weight: float = DEFAULT_RANKING.dense_weight
    floor: float | None = None  # filled with the model's default
    query: str = "raw"
    dates: str = "on" if DEFAULT_RANKING.time_aware else "off"
    vec: str = "row"  # capture embeds the whole row (docs/memory.md, "Capture under load")

    def ranking(self) -> RankingSettings:
        """The view's settings this grid point searches with."""
        return replace(
            DEFAULT_RANKING,
            min_candidates=self.min_candidates,
            candidates_per_result=self.per_result,
            dense_weight=self.dense_weight,
            time_aware=self.dates == "on",
        )

    def label(self) -> str:
        floor = "none" if self.floor is None else f"{self.floor:.2f}"
        return (
            f"depth {max(self.min_candidates, LIMIT * self.per_result)}, w {self.dense_weight}, "
            f"floor {floor}, query {self.query}, dates {self.dates}, vec {self.vec}"
        )


KNOB_AXES: dict[str, tuple[Any, ...]] = {
    # (min_candidates, candidates_per_result): with limit 10, depths 10, 20 (today), 40
    "depth": ((10, 1), (20, 2), (40, 2)),
    "dense_weight": (0.7, 1.0, 1.4),
    "floor": (None, 0.83),  # none, or the e5 model's default
}
CANDIDATE_AXES: dict[str, tuple[str, ...]] = {
    "query": ("raw", "content", "statement", "statement-vector"),
    "dates": ("off", "on"),
    "vec": ("row", "message"),
}


def grid(path: str, candidates: Sequence[str], today: Knobs) -> list[Knobs]:
    """Every setting of the knob axes, times the chosen candidate axes (the rest at today's)."""
    axes = dict(KNOB_AXES)
    for name in candidates:
        if name == "vec" and path != "capture":
            continue
        axes[name] = CANDIDATE_AXES[name]
    settings = [today]  # first: ties go to today's
    for combo in itertools.product(*axes.values()):
        chosen = dict(zip(axes, combo, strict=True))
        mc, pr = chosen.pop("depth")
        k = replace(today, min_candidates=mc, per_result=pr, **chosen)
        if k not in settings:
            settings.append(k)
    return settings


# -- query shaping -----------------------------------------------------------------------------

_QUESTION_START = re.compile(
    r"^\s*(?:(?:what|which|who|whom|whose|when|where|why|how)"
    r"(?:\s+(?:kind|type|sort|many|much|long|often|old|of))*"
    r"(?:\s+(?:did|does|do|is|are|was|were|has|have|had|can|could|would|will|might))?\s+)",
    re.IGNORECASE,
)


def bm25_query(question: str, shape: str) -> str:
    if shape in ("raw", "statement-vector"):
        return question
    return " ".join(t for t in tokenize(question) if t not in STOPWORDS) or question


def vector_query(question: str, shape: str) -> str:
    if not shape.startswith("statement"):
        return question
    return _QUESTION_START.sub("", question).rstrip(" ?") or question


# -- ranking and scoring ----------------------------------------------------------------------


@dataclass
class Prepared:
    """One bank ready to search: a view per ``vec`` variant and the query vectors."""

    bank: Bank
    views: dict[str, MemoryView]
    bm25_view: MemoryView
    qvecs: dict[str, np.ndarray]  # by query shape ("raw", "statement")
    memo: dict[Knobs | None, Scores] = field(default_factory=dict)  # scores by setting


async def prepare(bank: Bank, embedder: CachedEmbedder, vecs: Sequence[str]) -> Prepared:
    rows = [
        MemoryRow(i, f"bench/{i}", d.key, d.value, d.tags, i, (i, "", 0), "bench")
        for i, d in enumerate(bank.docs)
    ]
    views = {}
    for vec in vecs:
        view = MemoryView(embedder.embedder.name)
        vectors = await embedder.documents([d.vec_text[vec] for d in bank.docs])
        view.load(rows, [(f"bench/{i}", v) for i, v in enumerate(vectors)], 0)
        views[vec] = view
    plain = MemoryView(None)
    plain.load(rows, [], 0)
    questions = [q.text for q in bank.conv.questions]
    qvecs = {
        shape: await embedder.queries([vector_query(q, shape) for q in questions])
        for shape in ("raw", "statement")
    }
    return Prepared(bank, views, plain, qvecs)


def rank(prep: Prepared, qi: int, knobs: Knobs | None) -> list[str]:
    """The dia ids of the top 10 for question ``qi`` (``knobs`` None: BM25 alone)."""
    question = prep.bank.conv.questions[qi].text
    docs = prep.bank.docs
    if knobs is None:
        return [docs[r.row.doc].dia for r in prep.bm25_view.search(question, (), LIMIT)]
    view = prep.views[knobs.vec]
    qvec = prep.qvecs["statement" if knobs.query.startswith("statement") else "raw"][qi]
    query = bm25_query(question, knobs.query)
    found = view.search(query, (), LIMIT, qvec, None, knobs.floor, knobs.ranking())
    return [docs[r.row.doc].dia for r in found]


def score(prep: Prepared, knobs: Knobs | None) -> Scores:
    """Every question of ``prep``'s bank ranked with ``knobs`` (memoised per run)."""
    memo = prep.memo.get(knobs)
    if memo is not None:
        return memo
    scores = prep.memo[knobs] = Scores([], [], [])
    for qi, question in enumerate(prep.bank.conv.questions):
        scores.add(rank(prep, qi, knobs), question.relevant)
    return scores


def pooled(parts: Sequence[Scores]) -> Scores:
    return Scores(
        [x for p in parts for x in p.r5],
        [x for p in parts for x in p.r10],
        [x for p in parts for x in p.ndcg10],
    )


def spread(values: Sequence[float]) -> dict[str, float]:
    return {
        "mean": round(statistics.fmean(values), 4),
        "sd": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0,
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def cross_validate(
    preps: Sequence[Prepared], settings: Sequence[Knobs], today: Knobs
) -> dict[str, Any]:
    """Leave-one-conversation-out over ``preps``: per fold, the setting with the best pooled
    recall@10 on the other conversations (ties: the earlier in ``settings``, today's first),
    scored on the one left out. Also BM25 and today's hybrid per fold, and plain dev."""
    table = {k: [score(p, k) for p in preps] for k in settings}
    bm25 = [score(p, None) for p in preps]
    folds: list[dict[str, Any]] = []
    for held in range(len(preps)):
        train = [i for i in range(len(preps)) if i != held]

        def train_r10(k: Knobs, train: list[int] = train) -> float:
            return statistics.fmean(pooled([table[k][i] for i in train]).r10)

        chosen = max(settings, key=train_r10)
        folds.append(
            {
                "held_out": preps[held].bank.conv.index,
                "chosen": asdict(chosen),
                "chosen_label": chosen.label(),
                "train_recall@10": round(train_r10(chosen), 4),
                "cv": table[chosen][held].summary(),
                "today": table[today][held].summary(),
                "bm25": bm25[held].summary(),
            }
        )
    best_dev = max(settings, key=lambda k: statistics.fmean(pooled(table[k]).r10))
    result: dict[str, Any] = {"settings": len(settings), "folds": folds}
    for name in ("cv", "today", "bm25"):
        result[name] = {
            m: spread([f[name][m] for f in folds]) for m in ("recall@5", "recall@10", "ndcg@10")
        }
    result["dev_pooled"] = {
        "bm25": pooled(bm25).summary(),
        "today": pooled(table[today]).summary(),
        "tuned_on_dev": pooled(table[best_dev]).summary(),
        "tuned_on_dev_label": best_dev.label(),
    }
    return result


# -- running ----------------------------------------------------------------------------------


async def run_cv(args: argparse.Namespace) -> dict[str, Any]:
    conversations = [c for c in load_locomo(args.data) if c.index in DEV]
    local = LocalEmbedder(EmbeddingConfig(backend="local", model=args.model))
    embedder = CachedEmbedder(local, args.cache)
    await embedder.load()
    today = Knobs(floor=default_floor(local.name))
    out: dict[str, Any] = {
        "bench": "locomo-cv",
        "conversations": [c.index for c in conversations],
        "queries": sum(len(c.questions) for c in conversations),
        "embedder": local.name,
        "today": asdict(today),
        "knob_axes": {k: list(v) for k, v in KNOB_AXES.items()},
        "paths": {},
    }
    started = time.perf_counter()
    for path in args.paths:
        t0 = time.perf_counter()
        if path == "rows":
            banks = [rows_bank(c) for c in conversations]
        else:
            banks = [await capture_bank(c, args.cache) for c in conversations]
        base = today
        vecs = ("row", "message") if path == "capture" and "vec" in args.candidates else ("row",)
        preps = [await prepare(b, embedder, vecs) for b in banks]
        t1 = time.perf_counter()
        families: dict[str, Any] = {}
        # knobs alone, each candidate axis with the knobs, and all of them together
        runs = [("knobs", ())] + [
            (c, (c,)) for c in args.candidates if c != "vec" or path == "capture"
        ]
        if len(args.candidates) > 1:
            runs.append(("all", tuple(args.candidates)))
        for name, axes in runs:
            families[name] = cross_validate(preps, grid(path, axes, base), base)
        out["paths"][path] = {
            "rows": sum(len(b.docs) for b in banks),
            "prepare_s": round(t1 - t0, 1),
            "score_s": round(time.perf_counter() - t1, 1),
            "target_cv_recall@10": TARGETS[path],
            "families": families,
        }
    out["seconds"] = round(time.perf_counter() - started, 1)
    st = embedder.stats
    out["embedding"] = {
        "documents_embedded": st.docs,
        "documents_per_s": round(st.docs / st.docs_s, 1) if st.docs_s else None,
        "query_ms_median": round(statistics.median(st.query_ms), 1) if st.query_ms else None,
    }
    return out


def fmt(s: dict[str, float]) -> str:
    return f"{s['mean']:.3f} ± {s['sd']:.3f}"


def print_cv(result: dict[str, Any]) -> None:
    print(
        f"LoCoMo dev (conversations {result['conversations']}), leave one conversation out: "
        f"{result['queries']} queries, embedder {result['embedder']}"
    )
    for path, info in result["paths"].items():
        print(
            f"\n{path} path: {info['rows']} rows; target CV recall@10 >= "
            f"{info['target_cv_recall@10']}"
        )
        print(
            f"{'family':<12}{'':<26}{'recall@5':>17}{'recall@10':>17}{'nDCG@10':>17}"
            f"{'dev pooled r@10':>17}"
        )
        for family, cv in info["families"].items():
            dev = cv["dev_pooled"]
            for name, dev_key in (("bm25", "bm25"), ("today", "today"), ("cv", "tuned_on_dev")):
                label = {"bm25": "BM25 alone", "today": "today's hybrid", "cv": "CV (tuned on 4)"}
                row = cv[name]
                print(
                    f"{family:<12}{label[name]:<26}{fmt(row['recall@5']):>17}"
                    f"{fmt(row['recall@10']):>17}{fmt(row['ndcg@10']):>17}"
                    f"{dev[dev_key]['recall@10']:>17.3f}"
                )
            chosen = "; ".join(f"conv {f['held_out']}: {f['chosen_label']}" for f in cv["folds"])
            print(f"{'':<12}chosen per fold: {chosen}")
            print(f"{'':<12}tuned on all five (plain dev): {dev['tuned_on_dev_label']}")
        met = info["families"]["knobs"]["cv"]["recall@10"]["mean"] >= info["target_cv_recall@10"]
        best = max(f["cv"]["recall@10"]["mean"] for f in info["families"].values())
        print(
            f"target: knobs-only CV recall@10 {'met' if met else 'NOT met'}; best family CV "
            f"recall@10 {best:.3f}"
        )
    print(f"\n{result['seconds']} s; embedding {result['embedding']}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--model", default=DEFAULT_LOCAL_MODEL)
    parser.add_argument("--cache", type=Path, default=None, help="vectors and captured rows")
    parser.add_argument(
        "--paths",
        type=lambda v: tuple(v.split(",")),
        default=("rows", "capture"),
        help="rows,capture",
    )
    parser.add_argument(
        "--candidates",
        type=lambda v: tuple(c for c in v.split(",") if c),
        default=tuple(CANDIDATE_AXES),
        help="candidate axes: query,dates,vec",
    )
    parser.add_argument("--json", type=Path, default=None)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    if bad := set(args.paths) - {"rows", "capture"}:
        parser.error(f"unknown paths: {', '.join(sorted(bad))}")
    if bad := set(args.candidates) - set(CANDIDATE_AXES):
        parser.error(f"unknown candidates: {', '.join(sorted(bad))}")
    if not args.data.exists():
        parser.error(f"no data at {args.data} (see ../shared/data/README.md)")
    result = asyncio.run(run_cv(args))
    print_cv(result)
    line = json.dumps(result, sort_keys=True)
    print(line)
    if args.json is not None:
        args.json.write_text(line + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Relevance floor calibration: what a cosine floor on vector-only rows costs and buys (SPEC §5).

Run: ``.venv/bin/python bench/relevance_floor.py [--split dev] [--floors 0.78,0.79,…]
[--cache DIR] [--json PATH]``. Not a timed test; CI does not run it. Calibrate on ``dev``
(LoCoMo conversations 0-4) only: 5-9 are held out (``../shared/data/README.md``).

With an embedder every stored row has some cosine to any query, so without a floor recall
always returns the nearest rows and auto-recall always injects something. The floor drops
rows found only by the vector ranker whose cosine is under it (``MemoryView.search``'s
``min_similarity``); BM25's rows stay. Each conversation is one bank, stored as
``bench/locomo.py`` stores it (the product's ``MemoryView`` over the local embedder, rows
``key=speaker-date-dia value=speaker-caption``), and for every floor of the grid, beside no
floor (the anchor, measured in the same run):

- **recall@10**: the LoCoMo figure (``bench/locomo.py``'s hybrid): each answerable question
  (categories 1-4) as asked, top 10.
- **auto hit@3**: the auto-recall path: the question as auto-recall queries it (stopwords
  dropped, first 10 words; ``chazbot.agent.recall.recall_query``), top ``max_entries`` (3);
  the share of answerable questions with an evidence turn among what is injected.
- **answerable injected**: the share of those questions for which anything is injected.
- **elsewhere injected** (false positives): each question asked the same way of the *next*
  conversation's bank (whose people and events are others), so nothing there answers it: the
  share for which something is still injected, and for which a row found by vectors alone is
  (what the floor controls; a BM25 word match is unchanged by design).
- **adversarial injected**: category 5 questions (LoCoMo's unanswerable ones) asked of their
  own conversation, the same way.
- A check, not used to pick: the newcomer's memory of issue 21 (six facts and a "Hello!"),
  asked 10 questions about things never told (how many inject anything) and 6 about what was
  told, one of them sharing no word with its answer (how many inject the right row).

The pick: the highest floor of the grid whose recall@10 is within ``--tolerance`` (0.005) of
no floor and whose auto hit@3 is within 0.01; ``chazbot/memory/embedders/floors.py`` holds it
per model. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import build_view  # noqa: E402
from locomo_data import (  # noqa: E402
    DEFAULT_DATA,
    SPLITS,
    CachedEmbedder,
    Conversation,
    load_locomo,
    recall_at,
)

from chazbot.agent.recall import RecallSettings, recall_query  # noqa: E402
from chazbot.config import EmbeddingConfig  # noqa: E402
from chazbot.memory.embedders import DEFAULT_LOCAL_MODEL, LocalEmbedder  # noqa: E402
from chazbot.memory.embedders.floors import default_floor  # noqa: E402
from chazbot.memory.engine import embed_text  # noqa: E402
from chazbot.memory.rows import MemoryRow  # noqa: E402
from chazbot.memory.view import MemoryView  # noqa: E402

DEFAULT_GRID = tuple(round(0.76 + 0.005 * i, 3) for i in range(23))  # 0.76 … 0.87
AUTO_LIMIT = RecallSettings.max_entries  # what auto-recall injects per store by default
ADVERSARIAL = 5  # LoCoMo's category of questions the conversation cannot answer


PERSONAL_FACTS = (
    ("pet.dog", "My dog is called Biscuit."),
    ("work.manager", "My manager is Dana Whitfield."),
    ("atlas.deadline", "The deadline for my Atlas project is March 14."),
    ("food", "My favorite food is mushroom risotto."),
    ("sister.city", "My sister Ada lives in Lyon."),
    ("car", "I drive a blue Subaru Outback."),
    ("greeting", "Hello!"),
)
NEVER_TOLD = (
    "What is my cat's name?",
    "What is my wife's job?",
    "When is my birthday?",
    "What is my favourite movie?",
    "Which football team do I support?",
    "What languages do I speak?",
    "How old is my father?",
    "What is the boiling point of tungsten?",
    "Which hospital was I born in?",
    "What is my phone number?",
)
TOLD = (
    ("What is my dog's name?", "pet.dog"),
    ("Who is my boss?", "work.manager"),  # no word in common with its row
    ("When is the Atlas deadline?", "atlas.deadline"),
    ("What food do I like best?", "food"),
    ("Where does my sister live?", "sister.city"),
    ("What car do I drive?", "car"),
)


@dataclass
class Asked:
    """One question as recall and auto-recall query it, with the turns that answer it."""

    text: str
    relevant: frozenset[str]
    vector: np.ndarray
    auto: str
    auto_vector: np.ndarray | None


@dataclass
class Tally:
    """Per floor: lists of 0/1 (or recall values), averaged at the end."""

    r10: list[float] = field(default_factory=list)
    hit3: list[float] = field(default_factory=list)
    injected: list[float] = field(default_factory=list)
    elsewhere: list[float] = field(default_factory=list)
    elsewhere_vector: list[float] = field(default_factory=list)
    adversarial: list[float] = field(default_factory=list)
    adversarial_vector: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        return {
            name: round(statistics.fmean(values), 4)
            for name, values in vars(self).items()
            if values
        }


def adversarial_questions(path: Path, index: int) -> list[str]:
    """Conversation ``index``'s category 5 questions (``load_locomo`` leaves them out)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [str(qa["question"]) for qa in raw[index]["qa"] if qa.get("category") == ADVERSARIAL]


async def asked(
    texts: Sequence[str], relevant: Sequence[frozenset[str]], embedder: CachedEmbedder
) -> list[Asked]:
    autos = [recall_query([t]) for t in texts]
    vectors = await embedder.queries(list(texts))
    wanted = [a for a in autos if a]
    auto_vectors = dict(zip(wanted, await embedder.queries(wanted), strict=True)) if wanted else {}
    return [
        Asked(t, rel, vectors[i], autos[i], auto_vectors.get(autos[i]))
        for i, (t, rel) in enumerate(zip(texts, relevant, strict=True))
    ]


def injected(view: MemoryView, q: Asked, floor: float | None) -> tuple[list[int], bool]:
    """What auto-recall injects for ``q`` from ``view`` (doc ids), and whether a row found by
    vectors alone is among it."""
    if not q.auto:
        return [], False
    found = view.search(q.auto, (), AUTO_LIMIT, q.auto_vector, None, floor)
    return [r.row.doc for r in found], any(r.bm25 is None for r in found)


def score(
    floors: Sequence[float | None],
    tallies: dict[float | None, Tally],
    view: MemoryView,
    other: MemoryView,
    conv: Conversation,
    answerable: list[Asked],
    adversarial: list[Asked],
) -> None:
    ids = [t.dia_id for t in conv.turns]
    for floor in floors:
        tally = tallies[floor]
        for q in answerable:
            top = view.search(q.text, (), 10, q.vector, None, floor)
            tally.r10.append(recall_at([ids[r.row.doc] for r in top], q.relevant, 10))
            docs, _ = injected(view, q, floor)
            tally.hit3.append(float(any(ids[d] in q.relevant for d in docs)))
            tally.injected.append(float(bool(docs)))
            docs, by_vector = injected(other, q, floor)
            tally.elsewhere.append(float(bool(docs)))
            tally.elsewhere_vector.append(float(by_vector))
        for q in adversarial:
            docs, by_vector = injected(view, q, floor)
            tally.adversarial.append(float(bool(docs)))
            tally.adversarial_vector.append(float(by_vector))


async def personal(
    floors: Sequence[float | None], embedder: CachedEmbedder
) -> dict[str, dict[str, int]]:
    """Per floor: never-told questions that inject anything, told ones that inject their row."""
    view = MemoryView(embedder.embedder.name)
    rows = [
        MemoryRow(i, f"p/{i}", k, v, (), i, (i, "", 0), "bench")
        for i, (k, v) in enumerate(PERSONAL_FACTS)
    ]
    vectors = await embedder.documents([embed_text(k, v) for k, v in PERSONAL_FACTS])
    view.load(rows, [(r.row_id, vec) for r, vec in zip(rows, vectors, strict=True)], 0)
    never = await asked(NEVER_TOLD, [frozenset()] * len(NEVER_TOLD), embedder)
    told = await asked([q for q, _ in TOLD], [frozenset([k]) for _, k in TOLD], embedder)
    out = {}
    for floor in floors:
        name = "none" if floor is None else f"{floor:.3f}"
        out[name] = {
            "never_told_injected": sum(bool(injected(view, q, floor)[0]) for q in never),
            "told_found": sum(
                any(view.visible[d].key in q.relevant for d in injected(view, q, floor)[0])
                for q in told
            ),
        }
    return out


def cosines(view: MemoryView, other: MemoryView, conv: Conversation, qs: list[Asked]) -> dict:
    """Percentiles of the best cosine of an answering turn, and of the best cosine in the
    next conversation's bank: how far apart e5 puts relevant and unrelated rows."""
    ids = [t.dia_id for t in conv.turns]
    assert view.vectors is not None and other.vectors is not None
    own, foreign = [], []
    for q in qs:
        near = view.vectors.search(q.vector, len(ids))
        best = [c for d, c in near if ids[d] in q.relevant]
        if best:
            own.append(max(best))
        far = other.vectors.search(q.vector, 1)
        if far:
            foreign.append(far[0][1])
    return {"answering": own, "elsewhere_best": foreign}


def percentiles(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values)
    return {f"p{p}": round(float(np.percentile(arr, p)), 3) for p in (10, 25, 50, 75, 90)}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    conversations = [c for c in load_locomo(args.data) if c.index in SPLITS[args.split]]
    local = LocalEmbedder(EmbeddingConfig(backend="local", model=args.model))
    embedder = CachedEmbedder(local, args.cache)
    await embedder.load()
    started = time.perf_counter()
    view_args = argparse.Namespace(
        key="speaker-date-dia", value="speaker-caption", context="none", tags="none"
    )
    views = [await build_view(c, view_args, embedder) for c in conversations]
    floors: list[float | None] = [None, *args.floors]
    tallies = {f: Tally() for f in floors}
    spread: dict[str, list[float]] = {"answering": [], "elsewhere_best": []}
    for i, conv in enumerate(conversations):
        other = views[(i + 1) % len(views)]
        answerable = await asked(
            [q.text for q in conv.questions], [q.relevant for q in conv.questions], embedder
        )
        hard = adversarial_questions(args.data, conv.index)
        adversarial = await asked(hard, [frozenset()] * len(hard), embedder)
        score(floors, tallies, views[i], other, conv, answerable, adversarial)
        for name, values in cosines(views[i], other, conv, answerable).items():
            spread[name] += values
    table = {("none" if f is None else f"{f:.3f}"): tallies[f].summary() for f in floors}
    anchor = table["none"]
    pick = None
    for f in args.floors:
        row = table[f"{f:.3f}"]
        if (
            row["r10"] >= anchor["r10"] - args.tolerance
            and row["hit3"] >= anchor["hit3"] - 0.01
            and (pick is None or f > pick)
        ):
            pick = f
    return {
        "bench": "relevance_floor",
        "split": args.split,
        "conversations": [c.index for c in conversations],
        "model": local.name,
        "questions": sum(len(c.questions) for c in conversations),
        "adversarial_questions": len(tallies[None].adversarial),
        "auto_limit": AUTO_LIMIT,
        "tolerance_r10": args.tolerance,
        "by_floor": table,
        "cosine_percentiles": {k: percentiles(v) for k, v in spread.items() if v},
        "pick": pick,
        "personal": await personal(floors, embedder),
        "personal_questions": {"never_told": len(NEVER_TOLD), "told": len(TOLD)},
        "default_in_floors_py": default_floor(local.name),
        "seconds": round(time.perf_counter() - started, 1),
    }


def print_table(result: dict[str, Any]) -> None:
    print(
        f"Relevance floor, {result['model']}, LoCoMo {result['split']} (conversations "
        f"{result['conversations'][0]}-{result['conversations'][-1]}): {result['questions']} "
        f"answerable questions, {result['adversarial_questions']} adversarial; auto-recall "
        f"injects up to {result['auto_limit']} rows"
    )
    head = (
        f"{'floor':>7}{'recall@10':>10}{'auto hit@3':>11}{'answerable':>11}"
        f"{'elsewhere':>10}{'  by vector':>12}{'adversarial':>12}{'  by vector':>12}"
    )
    print(head)
    print(f"{'':>7}{'':>10}{'':>11}{'injected':>11}{'injected':>10}{'':>12}{'injected':>12}")
    for floor, row in result["by_floor"].items():
        mark = " <- pick" if result["pick"] is not None and floor == f"{result['pick']:.3f}" else ""
        print(
            f"{floor:>7}{row['r10']:>10.3f}{row['hit3']:>11.3f}{row['injected']:>11.3f}"
            f"{row['elsewhere']:>10.3f}{row['elsewhere_vector']:>12.3f}"
            f"{row['adversarial']:>12.3f}{row['adversarial_vector']:>12.3f}{mark}"
        )
    sizes = result["personal_questions"]
    print(
        f"issue 21's newcomer memory ({len(PERSONAL_FACTS)} rows): never-told questions that "
        f"inject anything (of {sizes['never_told']}), told ones that inject their row (of "
        f"{sizes['told']}):"
    )
    for floor, row in result["personal"].items():
        if floor in ("none", "0.800", "0.820", "0.830", "0.840", "0.850", "0.860"):
            print(f"{floor:>7}{row['never_told_injected']:>10}{row['told_found']:>10}")
    for name, pct in result["cosine_percentiles"].items():
        print(f"cosine, {name}: " + ", ".join(f"{k} {v}" for k, v in pct.items()))
    print(
        f"pick (recall@10 within {result['tolerance_r10']} of no floor, auto hit@3 within "
        f"0.01): {result['pick']}; floors.py default: {result['default_in_floors_py']}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--split", choices=tuple(SPLITS), default="dev")
    parser.add_argument("--model", default=DEFAULT_LOCAL_MODEL, help="local embedder model")
    parser.add_argument(
        "--floors",
        type=lambda v: tuple(float(x) for x in v.split(",") if x),
        default=DEFAULT_GRID,
        help="comma-separated cosines to try",
    )
    parser.add_argument("--tolerance", type=float, default=0.005, help="recall@10 kept within")
    parser.add_argument("--cache", type=Path, default=None, help="directory for cached vectors")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.split == "heldout":
        print("note: calibrate on dev; heldout is for checking a choice, never for making it")
    if not args.data.exists():
        parser.error(f"no data at {args.data} (see ../shared/data/README.md)")
    result = asyncio.run(run(args))
    print_table(result)
    line = json.dumps(result, sort_keys=True)
    print(line)
    if args.json is not None:
        args.json.write_text(line + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

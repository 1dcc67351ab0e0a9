"""The newest statement first (issue 35): the update set ``tests/data/updates.json`` through
the product's ranking (``MemoryView.search``: BM25 and vectors fused, then ``memory.current``).

Run: ``.venv/bin/python bench/updates.py [--set updates|updates_rt] [--split dev|heldout|both]
[--hashed]`` (``updates_rt``: a second set, written blind), or
``--locomo 20,15,12 [--cache DIR]``: the step's effect on LoCoMo's dev conversations (the
bench's rows, hybrid top 10, the local embedder) at each ``statement_words`` (a field of the
``RankingSettings`` the searches are passed; ``current.MAX_STATEMENT_WORDS`` is the product's):
how many result lists get a row marked earlier, and recall/nDCG with and without the step
(``newest_first=False``).
Not a timed test; CI does not run it (``tests/memory/test_current.py`` checks the held-out figures
with the hashed vectors).

Per split, one view holds every statement of that split's cases, as captured rows are stored
(key ``<speaker>/<date>/<id>``, value ``<speaker> (<date>): <text>``, the speaker in the row's
provenance; a case without a speaker as the operator's rows, key and value), each case's old
statement a day before its new one, the cases a week apart. Vectors: the default local
embedder, or with ``--hashed`` the tests' hashed bag of words. Each case's question is
recalled (top 10) and scored:

- ``update`` (one teller, one subject): newer first = both returned, the old one marked
  earlier and below the new one (or the new one marked earlier too: the same teller said
  something still newer about it, in another case); anchor: the new row above the old one in
  the same ranking without the step.
- ``cross`` (two people): a cross-person replacement = the older marked earlier (target 0).
- ``other`` (one person, two subjects): a false update = the older marked earlier.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from chazbot.memory.audience import Provenance
from chazbot.memory.current import newest_first, told_of
from chazbot.memory.engine import embed_text
from chazbot.memory.rows import MemoryRow
from chazbot.memory.view import DEFAULT_RANKING, MemoryView

WITHOUT_STEP = replace(DEFAULT_RANKING, newest_first=False)
"""The anchor: the ranking as fused, nothing moved or marked."""

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "updates.json"
DAY_US = 86_400 * 1_000_000
START_US = 1_764_547_200 * 1_000_000  # 2025-12-01


def hashed(text: str, dim: int = 64) -> np.ndarray:
    """The tests' stand-in embedder (tests/support/standin_embeddings.py): a hashed bag of words."""
    vec = np.zeros(dim, dtype=np.float64)
    words = [w for w in re.findall(r"[^\W_]+", text.lower()) if len(w) > 1]
    for word in words:
        value = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        vec[value % dim] += 1.0 if (value >> 32) & 1 else -1.0
    if not vec.any():
        vec[dim - 1] = 1.0
    out: np.ndarray = (vec / np.linalg.norm(vec)).astype(np.float32)
    return out


def load_cases(split: str, data: Path = DATA) -> list[dict[str, Any]]:
    cases = json.loads(data.read_text())["cases"]
    return [c for c in cases if split in ("both", c["split"])]


def rows_of(cases: list[dict[str, Any]]) -> list[tuple[MemoryRow, int, str]]:
    """``(row, case index, "old"|"new")`` for every statement, the old a day before the new."""
    out = []
    for i, case in enumerate(cases):
        for side, (speaker, day) in {
            "old": (case["speaker"], 0),
            "new": (case.get("other", case["speaker"]), 1),
        }.items():
            ts = START_US + (7 * i + day) * DAY_US
            doc = len(out)
            text = case[side]
            if speaker is None:
                key, value, origin = f"note_{doc}", text, None
            else:
                date = f"2025-12-{1 + (7 * i + day) % 28:02d}"
                key, value = f"{speaker}/{date}/$ev{doc}", f"{speaker} ({date}): {text}"
                origin = Provenance("!room:example.org", speaker, None)
            row = MemoryRow(
                doc,
                f"e/{doc}",
                key,
                value,
                ("captured",),
                ts,
                (doc, f"e{doc}", 0),
                "bench",
                scope="",
                origin=origin,
            )
            out.append((row, i, side))
    return out


async def vectors_for(texts: list[str], use_hashed: bool) -> tuple[str, list[np.ndarray], Any]:
    if use_hashed:
        return "hashed/bag-of-words", [hashed(t) for t in texts], hashed
    from chazbot.config import EmbeddingConfig
    from chazbot.memory.embedders import make_embedder

    embedder = make_embedder(EmbeddingConfig(backend="local"))
    assert embedder is not None
    docs = await embedder.embed_documents(texts)
    return embedder.name, list(docs), embedder


async def run(split: str, use_hashed: bool, data: Path = DATA) -> dict[str, Any]:
    cases = load_cases(split, data)
    rows = rows_of(cases)
    model, vecs, embedder = await vectors_for(
        [embed_text(r.key, r.value) for r, _, _ in rows], use_hashed
    )
    view = MemoryView(model)
    pairs = [(r.row_id, v) for (r, _, _), v in zip(rows, vecs, strict=True)]
    view.load([r for r, _, _ in rows], pairs, 0)
    ids = {(i, side): r.row_id for r, i, side in rows}
    result: dict[str, Any] = {"model": model, "split": split}
    counts = {"update": [0, 0, 0], "cross": [0, 0], "other": [0, 0]}
    misses = []
    for i, case in enumerate(cases):
        qvec = hashed(case["query"]) if use_hashed else await embedder.embed_query(case["query"])
        with_step = view.search(case["query"], (), 10, qvec)
        marks = {r.row.row_id: e for r, e in newest_first(with_step, lambda r: told_of(r.row))}
        order = [r.row.row_id for r in with_step]
        old, new = ids[(i, "old")], ids[(i, "new")]
        kind = case["kind"]
        if kind == "update":
            # the old statement is shown as earlier, after the new one (or after a still newer
            # one of the same teller, the new one then marked earlier too)
            first = old in order and new in order and order.index(new) < order.index(old)
            ok = old in order and new in order and marks[old] and (first or marks[new])
            anchor_found = view.search(case["query"], (), 10, qvec, ranking=WITHOUT_STEP)
            plain = [r.row.row_id for r in anchor_found]
            anchor = old in plain and new in plain and plain.index(new) < plain.index(old)
            counts["update"][0] += ok
            counts["update"][1] += anchor
            counts["update"][2] += 1
            if not ok:
                why = (
                    "not both in the top 10"
                    if old not in order or new not in order
                    else "not judged the same subject"
                )
                misses.append(f"{case['old']!r} -> {case['new']!r} ({why})")
        else:
            marked = bool(marks.get(old, False))
            counts[kind][0] += marked
            counts[kind][1] += 1
            if marked:
                misses.append(f"{kind}: {case['old']!r} marked earlier")
    if not use_hashed:
        await embedder.aclose()
    u, other = counts["update"], counts["other"]
    result.update(
        {
            "newer first": f"{u[0]}/{u[2]} ({100 * u[0] / max(1, u[2]):.0f} %)",
            "anchor: newer first without the step": f"{u[1]}/{u[2]}",
            "cross-person replacements": f"{counts['cross'][0]}/{counts['cross'][1]}",
            "false updates (one person, two subjects)": f"{other[0]}/{other[1]}",
            "misses": misses,
        }
    )
    return result


async def captured_view(conv: Any, args: Any, embedder: Any) -> MemoryView:
    """The conversation's turns as ``messages`` capture stores them: key
    ``<speaker>/<date>/<id>``, value ``<speaker> (<date>): <text>``, the speaker in the row's
    provenance, each turn a second after the one before; vectors of ``key value``."""
    rows = []
    for doc, turn in enumerate(conv.turns):
        speaker = f"@{turn.speaker.lower()}:example.org"
        text = turn.text + (f" [shares a photo: {turn.caption}]" if turn.caption else "")
        key = f"{speaker}/2023-01-01/{turn.dia_id}"
        value = f"{speaker} (2023-01-01): {text}"
        origin = Provenance("!room:example.org", speaker, None)
        rows.append(
            MemoryRow(doc, f"c/{doc}", key, value, ("captured",), START_US + doc * 1_000_000,
                      (doc, f"c{doc}", 0), "bench", origin=origin)
        )  # fmt: skip
    vectors = await embedder.documents([embed_text(r.key, r.value) for r in rows])
    view = MemoryView(embedder.embedder.name)
    view.load(rows, [(r.row_id, v) for r, v in zip(rows, vectors, strict=True)], 0)
    return view


async def locomo_effect(words: list[int], cache: Path | None, shape: str = "rows") -> None:
    """LoCoMo dev (chat turns, hardly any updates): marks there are mostly false ones.
    ``shape``: the bench's rows, or ``captured`` (rows as capture stores them)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import locomo  # the bench's rows and scores

    from chazbot.config import EmbeddingConfig
    from chazbot.memory.embedders.local import LocalEmbedder

    args = argparse.Namespace(
        key="speaker-date-dia", value="speaker-caption", context="none", tags="none"
    )
    convs = [c for c in locomo.load_locomo(locomo.DEFAULT_DATA) if c.index in range(5)]
    local = LocalEmbedder(EmbeddingConfig(backend="local", model=locomo.DEFAULT_LOCAL_MODEL))
    embedder = locomo.CachedEmbedder(local, cache)
    await embedder.load()
    build = captured_view if shape == "captured" else locomo.build_view
    views = [
        (
            c,
            await build(c, args, embedder),
            await embedder.queries([q.text for q in c.questions]),
        )
        for c in convs
    ]
    for limit in words:
        with_step = replace(DEFAULT_RANKING, statement_words=limit)
        without = replace(WITHOUT_STEP, statement_words=limit)
        step, plain = locomo.Scores([], [], []), locomo.Scores([], [], [])
        marked = lists = 0
        for conv, view, qvecs in views:
            for qi, q in enumerate(conv.questions):
                got = view.search(q.text, (), 10, qvecs[qi], ranking=with_step)
                anchor = view.search(q.text, (), 10, qvecs[qi], ranking=without)
                step.add([conv.turns[r.row.doc].dia_id for r in got], q.relevant)
                plain.add([conv.turns[r.row.doc].dia_id for r in anchor], q.relevant)
                marks = newest_first(got, lambda r: told_of(r.row), max_words=limit)
                marked += any(e for _, e in marks)
                lists += 1
        print(f"MAX_STATEMENT_WORDS {limit}: lists with a row marked earlier {marked}/{lists}")
        print(f"  with the step    {step.summary()}")
        print(f"  without the step {plain.summary()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--split", choices=("dev", "heldout", "both"), default="dev")
    parser.add_argument("--hashed", action="store_true", help="the tests' hashed vectors")
    parser.add_argument("--locomo", default="", help="MAX_STATEMENT_WORDS values, e.g. 20,12")
    parser.add_argument("--cache", type=Path, default=None, help="cached LoCoMo vectors")
    parser.add_argument("--shape", choices=("rows", "captured"), default="rows")
    parser.add_argument(
        "--set", default="updates", help="a set in tests/data (updates, updates_rt)"
    )
    args = parser.parse_args()
    data = DATA.with_name(f"{args.set}.json")
    if not data.is_file():
        parser.error(f"no set {args.set!r} in {DATA.parent}")
    if args.locomo:
        words = [int(w) for w in args.locomo.split(",")]
        asyncio.run(locomo_effect(words, args.cache, args.shape))
        return 0
    splits = ("dev", "heldout") if args.split == "both" else (args.split,)
    for split in splits:
        result = asyncio.run(run(split, args.hashed, data))
        for name, value in result.items():
            if name != "misses":
                print(f"{name:42} {value}")
        for miss in result["misses"]:
            print(f"  missed: {miss}")
        print(json.dumps(result), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""LoCoMo as data for the recall benches: the conversations, the row shapes, the cached
embedder and the scores (``bench/locomo.py`` ranks with them; ``bench/locomo_capture.py``,
``bench/locomo_cv.py`` and others read them here, so no bench imports back the one that runs
them). Not a bench of its own.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from chazbot.memory.embedders import LocalEmbedder

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo10.json"
SPLITS = {"dev": range(0, 5), "heldout": range(5, 10), "all": range(0, 10)}
METHODS = ("bm25", "dense", "hybrid")
# Measured in every run: BM25 over the plain turn ("Speaker: text [photo]", no context, no
# tags), the row shape the README's BM25 baseline corresponds to.
ANCHOR = "bm25-plain-turn"
NO_FLOOR = "hybrid-no-floor"  # hybrid without the relevance floor, measured beside it
RRF_K = 60
TARGET_HYBRID_R10_DEV = 0.62  # issue 14, rows with speaker/date keys
# Figures measured on the dev split before this ranking (issue 14), recall@10.
BEFORE = {
    "plain turns, speaker/date keys: BM25 (before)": 0.525,
    "plain turns, speaker/date keys: hybrid (before)": 0.526,
    "turns stored with their context: hybrid (before)": 0.741,
}
# The README's anchors: all ten conversations, one bank each (recall@10, nDCG@10).
BASELINES = {
    "BM25 (README, all ten)": (0.519, 0.381),
    "BM25 + all-MiniLM-L6-v2, RRF (README, all ten)": (0.545, 0.388),
    "BM25 + multilingual-e5-small q4, RRF (README, all ten)": (0.584, 0.443),
}

_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")
_DATE = re.compile(r"^\s*[\d:]+\s*[ap]m\s+on\s+(.+?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    speaker: str
    text: str
    date: str
    caption: str | None
    order: int


@dataclass(frozen=True)
class Question:
    text: str
    relevant: frozenset[str]
    category: int


@dataclass(frozen=True)
class Conversation:
    index: int
    turns: list[Turn]
    questions: list[Question]
    dropped: int  # questions (not category 5) without any evidence turn that exists


def load_locomo(path: Path) -> list[Conversation]:
    """The ten conversations: turns in order and the scored questions (category 5 left out)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    conversations = []
    for index, sample in enumerate(raw):
        conv = sample["conversation"]
        sessions = sorted(
            (int(k.split("_")[1]), v)
            for k, v in conv.items()
            if re.fullmatch(r"session_\d+", k) and isinstance(v, list)
        )
        turns: list[Turn] = []
        for number, session in sessions:
            when = str(conv.get(f"session_{number}_date_time", ""))
            match = _DATE.match(when)
            date = match.group(1) if match else when
            for turn in session:
                caption = turn.get("blip_caption")
                turns.append(
                    Turn(
                        dia_id=turn["dia_id"],
                        session=number,
                        speaker=turn["speaker"],
                        text=turn["text"],
                        date=date,
                        caption=caption if isinstance(caption, str) and caption else None,
                        order=len(turns),
                    )
                )
        ids = {t.dia_id for t in turns}
        questions, dropped = [], 0
        for qa in sample["qa"]:
            if qa.get("category") == 5:
                continue
            evidence = " ".join(str(e) for e in qa.get("evidence", []))
            relevant = frozenset(f"D{s}:{n}" for s, n in _EVIDENCE.findall(evidence)) & ids
            if not relevant:
                dropped += 1
                continue
            questions.append(Question(str(qa["question"]), relevant, int(qa["category"])))
        conversations.append(Conversation(index, turns, questions, dropped))
    return conversations


def told_at(turn: Turn) -> int:
    """When a turn was said, in microseconds since the epoch (UTC): its session's day (LoCoMo
    gives "8 May, 2023"), plus its place in the conversation in seconds so turns keep their
    order; 0 when the date does not parse. A row written during a turn (a model's ``remember``
    tool, capture) carries this time, and a row's day is the day it was written when its key
    names none (``chazbot/memory/when.py``)."""
    try:
        day = datetime.strptime(turn.date.strip(), "%d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return 0
    return int(day.timestamp() + turn.order) * 1_000_000


# -- turning a turn into a memory row (benchmark data shaping) ------------------------------

KEYS = ("dia", "speaker-dia", "speaker-date-dia")
VALUES = ("text", "speaker", "speaker-caption", "speaker-date-caption")
CONTEXTS = ("none", "prev")
TAGS = ("none", "speaker", "date", "speaker-date")
ORIGINS = ("none", "speaker")


def memory_row(
    turns: Sequence[Turn], i: int, key: str, value: str, context: str, tags: str
) -> tuple[str, str, list[str]]:
    """The ``(key, value, tags)`` the bench stores for turn ``i``.

    Keys are unique per turn (a key holds one live row). ``value`` says what the row says:
    ``speaker`` is "Speaker: text", ``-caption`` adds what a shared photo showed, ``-date`` the
    session's date. ``context=prev`` adds the line the turn replies to (the previous turn of
    the same session), as a bot writing a self-contained memory would. ``tags`` may carry the
    speaker and the session date (tags reach BM25 but not the embedder).
    """
    turn = turns[i]
    if key == "dia":
        row_key = turn.dia_id
    elif key == "speaker-date-dia":
        row_key = f"{turn.speaker} {turn.date} {turn.dia_id}"
    else:
        row_key = f"{turn.speaker} {turn.dia_id}"
    if value == "text":
        row_value = turn.text
    else:
        row_value = f"{turn.speaker}: {turn.text}"
        if value == "speaker-date-caption":
            row_value = f"({turn.date}) {row_value}"
        if value in ("speaker-caption", "speaker-date-caption") and turn.caption:
            row_value += f" [shares a photo: {turn.caption}]"
    if context == "prev" and i > 0 and turns[i - 1].session == turn.session:
        before = turns[i - 1]
        row_value += f" (replying to {before.speaker}: {before.text})"
    row_tags = []
    if tags in ("speaker", "speaker-date"):
        row_tags.append(turn.speaker)
    if tags in ("date", "speaker-date") and turn.date:
        row_tags.append(turn.date[:64])
    return row_key, row_value, row_tags


# -- embedding, with an optional cache -------------------------------------------------------


@dataclass
class EmbedStats:
    load_s: float = 0.0
    docs: int = 0
    docs_s: float = 0.0
    query_ms: list[float] | None = None


class CachedEmbedder:
    """The local embedder, with vectors kept in ``cache_dir`` (if given) by exact text."""

    def __init__(self, embedder: LocalEmbedder, cache_dir: Path | None) -> None:
        self.embedder = embedder
        self.stats = EmbedStats(query_ms=[])
        self._files: dict[str, Path] = {}
        self._memo: dict[str, dict[str, np.ndarray]] = {"doc": {}, "query": {}}
        if cache_dir is not None:
            cache_dir.mkdir(parents=True, exist_ok=True)
            stem = re.sub(r"[^A-Za-z0-9_.-]", "_", embedder.name)
            for side in ("doc", "query"):
                file = cache_dir / f"{stem}.{side}.npz"
                self._files[side] = file
                if file.exists():
                    with np.load(file) as data:
                        self._memo[side] = {k: data[k] for k in data.files}

    @staticmethod
    def _id(text: str) -> str:
        return "h" + hashlib.sha1(text.encode("utf-8")).hexdigest()

    async def load(self) -> None:
        started = time.perf_counter()
        await self.embedder.embed_query("warm up")
        self.stats.load_s = time.perf_counter() - started

    async def documents(self, texts: Sequence[str]) -> np.ndarray:
        memo = self._memo["doc"]
        missing = list(dict.fromkeys(t for t in texts if self._id(t) not in memo))
        if missing:
            started = time.perf_counter()
            vectors = await self.embedder.embed_documents(missing)
            self.stats.docs_s += time.perf_counter() - started
            self.stats.docs += len(missing)
            for text, vec in zip(missing, vectors, strict=True):
                memo[self._id(text)] = vec
            self._save("doc")
        return np.stack([memo[self._id(t)] for t in texts])

    async def queries(self, texts: Sequence[str]) -> np.ndarray:
        memo = self._memo["query"]
        added = False
        for text in texts:
            if self._id(text) not in memo:
                started = time.perf_counter()
                memo[self._id(text)] = await self.embedder.embed_query(text)
                assert self.stats.query_ms is not None
                self.stats.query_ms.append((time.perf_counter() - started) * 1000)
                added = True
        if added:
            self._save("query")
        return np.stack([memo[self._id(t)] for t in texts])

    def _save(self, side: str) -> None:
        file = self._files.get(side)
        if file is not None:
            tmp = file.with_suffix(".tmp.npz")
            save: Any = np.savez  # numpy's stub types **arrays like its keyword flags
            save(tmp, **self._memo[side])
            tmp.replace(file)


# -- ranking with chazbot's modules and scoring ---------------------------------------------


def recall_at(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def ndcg_at(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, doc in enumerate(ranked[:k]) if doc in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return dcg / ideal


@dataclass
class Scores:
    r5: list[float]
    r10: list[float]
    ndcg10: list[float]

    def add(self, ranked: Sequence[str], relevant: frozenset[str]) -> None:
        self.r5.append(recall_at(ranked, relevant, 5))
        self.r10.append(recall_at(ranked, relevant, 10))
        self.ndcg10.append(ndcg_at(ranked, relevant, 10))

    def summary(self) -> dict[str, float]:
        return {
            "recall@5": round(statistics.fmean(self.r5), 4),
            "recall@10": round(statistics.fmean(self.r10), 4),
            "ndcg@10": round(statistics.fmean(self.ndcg10), 4),
        }

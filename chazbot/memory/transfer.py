"""Export visible memory as JSONL, and import JSONL rows into a bank in batched commits."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from chazbot.errors import ChazError, InputError
from chazbot.ledger import KeyPair
from chazbot.memory.engine import MemoryEngine, embed_text
from chazbot.memory.rows import (
    MEMORY_STORE,
    check_key,
    check_tags,
    check_value,
    embeddings_store,
    encode_vector,
    to_datetime,
)

BATCH = 500


async def export_lines(engine: MemoryEngine, db: str) -> list[str]:
    """One JSON line per visible memory row, oldest first."""
    view = await engine.view(db)
    rows = sorted(view.visible.values(), key=lambda r: (r.ts, r.order))
    return [
        json.dumps(
            {
                "key": r.key,
                "value": r.value,
                "tags": list(r.tags),
                "timestamp": to_datetime(r.ts).isoformat(),
                "author": r.author,
            },
            ensure_ascii=False,
        )
        for r in rows
    ]


def parse_line(text: str) -> tuple[str, str, list[str]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise InputError("a line must be a JSON object with key and value")
    extra = set(data) - {"key", "value", "tags", "timestamp", "author"}
    if extra:
        raise InputError(f"unknown field(s) {', '.join(sorted(extra))}")
    return check_key(data.get("key")), check_value(data.get("value")), check_tags(data.get("tags"))


@dataclass
class ImportReport:
    written: int = 0
    batches_skipped: int = 0
    errors: list[str] = field(default_factory=list)  # "line N: why"


def _batches(lines: Iterable[str], size: int) -> Iterator[list[tuple[int, str]]]:
    batch: list[tuple[int, str]] = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            batch.append((number, line))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


async def import_lines(
    engine: MemoryEngine,
    db: str,
    key: KeyPair,
    lines: Iterable[str],
    progress: Callable[[int], None] | None = None,
    batch_size: int = BATCH,
) -> ImportReport:
    """Add rows in batches (one entry per batch); a batch with a bad line is not written."""
    report = ImportReport()
    for batch in _batches(lines, batch_size):
        parsed: list[tuple[str, str, list[str]]] = []
        bad = False
        for number, line in batch:
            try:
                parsed.append(parse_line(line))
            except ChazError as exc:
                report.errors.append(f"line {number}: {exc}")
                bad = True
        if bad:
            report.batches_skipped += 1
            continue
        ops: dict[str, list[Any]] = {
            MEMORY_STORE: [
                {"op": "insert", "row": {"key": k, "value": v, "tags": t}} for k, v, t in parsed
            ]
        }
        if engine.embedder is not None and engine.model is not None:
            try:
                vectors = await engine.embedder.embed_documents(
                    [embed_text(k, v) for k, v, _ in parsed]
                )
                ops[embeddings_store(engine.model)] = [
                    {
                        "op": "insert",
                        "row": {"ref": f"@{MEMORY_STORE}/{i}", "vec": encode_vector(vec)},
                    }
                    for i, vec in enumerate(vectors)
                ]
            except ChazError:
                pass  # rows are kept; /memory reindex backfills the vectors
        await engine.ledger.write(db, key, ops)
        report.written += len(parsed)
        if progress is not None:
            progress(report.written)
    return report

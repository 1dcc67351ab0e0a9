"""Export visible memory as JSONL, and import JSONL rows into a bank in batched commits.

An import is checked whole before anything is written: a file with one bad line writes
nothing and names every bad line (the first ``MAX_ERRORS``). Parsing and formatting run on a
worker thread, so a file of 100k rows never holds the event loop (chat keeps answering).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from chazbot.errors import ChazError, InputError
from chazbot.ledger import KeyPair
from chazbot.memory.engine import MemoryEngine
from chazbot.memory.rows import (
    MEMORY_STORE,
    MemoryRow,
    check_key,
    check_tags,
    check_value,
    to_datetime,
)

BATCH = 500
MAX_ERRORS = 20
"""At most this many bad lines are named; the report counts the rest."""


async def export_lines(engine: MemoryEngine, db: str) -> list[str]:
    """One JSON line per visible memory row, oldest first (formatted on a worker thread)."""
    view = await engine.view(db)
    return await asyncio.to_thread(format_rows, list(view.visible.values()))


def format_rows(rows: list[MemoryRow]) -> list[str]:
    """The export lines of ``rows``, oldest first."""
    rows = sorted(rows, key=lambda r: (r.ts, r.order))
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


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSONL text, split at newlines only (so line numbers are an editor's),
    a Windows line end's ``\r`` and a UTF-8 byte order mark at the start dropped."""
    lines = [line.removesuffix("\r") for line in text.removeprefix("\ufeff").split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


def parse_line(text: str) -> tuple[str, str, list[str]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON ({exc.msg})") from None
    except RecursionError:  # a line nested past the parser's depth
        raise InputError("not JSON (nested too deep)") from None
    if not isinstance(data, dict):
        raise InputError("a line must be a JSON object with key and value")
    extra = set(data) - {"key", "value", "tags", "timestamp", "author"}
    if extra:
        raise InputError(f"unknown field(s) {', '.join(sorted(extra))}")
    return check_key(data.get("key")), check_value(data.get("value")), check_tags(data.get("tags"))


Parsed = tuple[str, str, list[str]]


@dataclass
class ImportReport:
    written: int = 0
    bad_lines: int = 0
    errors: list[str] = field(default_factory=list)  # "line N: why", the first MAX_ERRORS


def parse_all(lines: Iterable[str]) -> tuple[list[Parsed], ImportReport]:
    """Every non-blank line parsed, or the report of the bad ones (then nothing is kept)."""
    parsed: list[Parsed] = []
    report = ImportReport()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            parsed.append(parse_line(line))
        except ChazError as exc:
            report.bad_lines += 1
            if len(report.errors) < MAX_ERRORS:
                report.errors.append(f"line {number}: {exc}")
    return ([] if report.bad_lines else parsed), report


async def import_lines(
    engine: MemoryEngine,
    db: str,
    key: KeyPair,
    lines: Iterable[str],
    progress: Callable[[int], None] | None = None,
    batch_size: int = BATCH,
) -> ImportReport:
    """Add rows in batches (one entry per batch), all lines checked first on a worker thread:
    a bad line anywhere writes nothing (the report names it). An import cancelled midway
    keeps the batches already committed, each whole; run again, it overwrites the same keys."""
    parsed, report = await asyncio.to_thread(parse_all, list(lines))
    if report.bad_lines:
        return report
    await write_parsed(engine, db, key, parsed, report, progress, batch_size)
    return report


async def write_parsed(
    engine: MemoryEngine,
    db: str,
    key: KeyPair,
    parsed: Sequence[Parsed],
    report: ImportReport,
    progress: Callable[[int], None] | None = None,
    batch_size: int = BATCH,
) -> None:
    """Write checked rows in entries of ``batch_size``, counting them in ``report``.

    Rows first, at disk speed (BM25 finds them at once); their vectors are owed to the
    background queue (marked before the first row, so a stop or a crash leaves them owed, not
    lost). When it returns, the database's index is loaded and its snapshot saved."""
    later = engine.vectors_later
    if later is not None:
        await later.owe(db, key)
    try:
        for start in range(0, len(parsed), batch_size):
            batch = parsed[start : start + batch_size]
            ops: dict[str, list[Any]] = {
                MEMORY_STORE: [
                    {"op": "insert", "row": {"key": k, "value": v, "tags": t}} for k, v, t in batch
                ]
            }
            await engine.ledger.write(db, key, ops)
            report.written += len(batch)
            if later is not None:
                later.wrote(db, len(batch))
            if progress is not None:
                progress(report.written)
    finally:
        if later is not None:
            later.settle(db, scan=report.written > 0)
    if report.written:
        await engine.warm(db)

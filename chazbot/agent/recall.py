"""Autonomous auto-recall: before every LLM call, find memories relevant to the conversation.

Read-only. The query is the first 10 distinct non-stopword tokens of the newest 5 messages;
own memory is searched, then every attached bank (session attachments, then the agent's
default banks), filtered by ``auto_recall_banks`` when set; banks the agent cannot read are
skipped silently; up to ``max_entries`` results per store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chazbot.memory.rows import MemoryRow
from chazbot.memory.tokenize import auto_recall_query

HEADING = "## Relevant Memories"
RECENT_MESSAGES = 5
QUERY_TOKENS = 10


@dataclass(frozen=True)
class RecallSettings:
    enabled: bool = True
    max_entries: int = 3
    banks: tuple[str, ...] | None = None  # None: every attached bank


def recall_query(messages: Sequence[str]) -> str:
    return " ".join(auto_recall_query(messages[-RECENT_MESSAGES:], QUERY_TOKENS))


def choose_banks(
    attached: Sequence[str], defaults: Sequence[str], settings: RecallSettings
) -> list[str]:
    """Attached banks in order (session first, then defaults), filtered by the settings."""
    names = list(dict.fromkeys([*attached, *defaults]))
    if settings.banks is None:
        return names
    wanted = {b.lower() for b in settings.banks}
    return [n for n in names if n.lower() in wanted]


def format_block(
    own: Sequence[MemoryRow], banks: Sequence[tuple[str, Sequence[MemoryRow]]]
) -> str | None:
    """The ``## Relevant Memories`` block, or None when nothing matched."""
    lines = [f"- [{r.key}]: {r.value}" for r in own]
    for name, rows in banks:
        if rows:
            if lines:
                lines.append("")
            lines.append(f"_(from bank: {name})_")
            lines += [f"- [{r.key}]: {r.value}" for r in rows]
    if not lines:
        return None
    return HEADING + "\n" + "\n".join(lines)

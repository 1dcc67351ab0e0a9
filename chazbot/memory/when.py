"""Time-aware ranking's two readings: the months a query names, and the day a row is about.

A query that names a month ("What did Caroline paint in May 2023?") asks about what was said
then; recall moves the rows of that month ahead of the others among its fused candidates
(``MemoryView.search``). It is kept because it generalises: cross-validated on LoCoMo's dev
conversations (``bench/locomo_cv.py``) it was chosen in every fold on both paths (the
figures: docs/memory.md, "Recall quality, cross-validated").

A row's day is the first date its key names (capture's keys are ``speaker/2023-05-08/id``;
a remembered row may be keyed ``Caroline 8 May, 2023 D1:3``), else the day it was written.

Pure and cheap: a regex over the query once, and over the keys of the 30 fused rows.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

from chazbot.memory.rows import MemoryRow

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
# Month names that are also everyday words ("may I", "march on", "august company"): they
# name a month only capitalised and with a day, a year or a word of time before them.
AMBIGUOUS = frozenset({"may", "march", "august"})
_TIME_WORDS = frozenset(
    [
        "in",
        "during",
        "of",
        "since",
        "until",
        "till",
        "from",
        "by",
        "before",
        "after",
        "last",
        "next",
        "early",
        "late",
        "mid",
        "this",
        "around",
        "through",
        "throughout",
    ]
)
_NAMED = re.compile(
    r"(?P<before>\b[A-Za-z]+\s+)?(?P<day>\b\d{1,2}(?:st|nd|rd|th)?\s+)?"
    r"\b(?P<month>" + "|".join(MONTHS) + r")\b"
    r"(?P<after>\s+\d{1,2}(?:st|nd|rd|th)?\b)?(?:,?\s+(?P<year>(?:19|20)\d\d)\b)?",
    re.IGNORECASE,
)
_ISO_DAY = re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b")
_WRITTEN_DAY = re.compile(
    r"\b(\d{1,2})\s+(" + "|".join(MONTHS) + r"),?\s+((?:19|20)\d\d)\b"
    r"|\b(" + "|".join(MONTHS) + r")\s+(\d{1,2}),?\s+((?:19|20)\d\d)\b",
    re.IGNORECASE,
)
MAX_QUERY_CHARS = 2_000  # a longer query is read for months in its first 2,000 characters

Month = tuple[int, int | None]
"""(month 1-12, year or None for any year)"""


def named_months(query: str) -> frozenset[Month]:
    """The months ``query`` names, each with its year when one follows it."""
    found: set[Month] = set()
    for m in _NAMED.finditer(query[:MAX_QUERY_CHARS]):
        word = m.group("month")
        if word.lower() in AMBIGUOUS:
            before = (m.group("before") or "").strip().lower()
            dated = m.group("day") or m.group("after") or m.group("year")
            if not word[0].isupper() or not (dated or before in _TIME_WORDS):
                continue
        year = int(m.group("year")) if m.group("year") else None
        found.add((MONTHS.index(word.lower()) + 1, year))
    return frozenset(found)


def row_day(row: MemoryRow) -> date | None:
    """The day ``row`` is about: the first date its key names, else the day it was written
    (None: a timestamp no calendar holds, as a hostile peer may sign)."""
    return key_day(row.key) or written_day(row)


def key_day(key: str) -> date | None:
    """The first date ``key`` names (``2023-05-08``, ``8 May, 2023``, ``May 8, 2023``)."""
    iso = _ISO_DAY.search(key)
    if iso:
        try:
            return date(int(iso.group(1)), int(iso.group(2)), int(iso.group(3)))
        except ValueError:
            pass
    written = _WRITTEN_DAY.search(key)
    if written:
        g = written.groups()
        day, month, year = (g[0], g[1], g[2]) if g[0] else (g[4], g[3], g[5])
        try:
            return date(int(year), MONTHS.index(month.lower()) + 1, int(day))
        except ValueError:
            pass
    return None


def written_day(row: MemoryRow) -> date | None:
    """The day (UTC) ``row`` was written; None for a timestamp no calendar holds."""
    try:
        return datetime.fromtimestamp(row.ts / 1_000_000, UTC).date()
    except (OverflowError, OSError, ValueError):
        return None


def day_words(day: date) -> str:
    """A day as words BM25 can match a question's against: ``8 May 2023``."""
    return f"{day.day} {MONTHS[day.month - 1].capitalize()} {day.year}"


def in_months(row: MemoryRow, months: frozenset[Month]) -> bool:
    day = row_day(row)
    return day is not None and any(
        day.month == m and (y is None or day.year == y) for m, y in months
    )

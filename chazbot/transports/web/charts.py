"""Server-rendered SVG charts for the admin pages: rows over time, a latency histogram.

Pure: numbers in, SVG text out. Every label goes through ``markupsafe.escape``; the charts
hold no script, no links and no styles from elsewhere, so ``default-src 'self'`` allows them
inline.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from markupsafe import Markup, escape

WIDTH, HEIGHT, PAD = 480, 160, 28
MAX_BUCKETS = 60


def rows_over_time(stamps_us: Sequence[int], title: str) -> Markup:
    """Visible rows by the day they were written (at most ``MAX_BUCKETS`` bars, each a span
    of days when the rows cover more), as an SVG bar chart."""
    if not stamps_us:
        return _empty(title, "no rows yet")
    days = [ts // 86_400_000_000 for ts in stamps_us]
    first, last = min(days), max(days)
    span = max(1, (last - first + MAX_BUCKETS) // MAX_BUCKETS)
    counts = [0] * ((last - first) // span + 1)
    for day in days:
        counts[(day - first) // span] += 1
    start, end = (_day(first), _day(last))
    unit = "day" if span == 1 else f"{span} days"
    return _bars(counts, title, f"{start} to {end}, rows per {unit}")


def histogram(bounds: Sequence[float], counts: Sequence[int], title: str) -> Markup:
    """A histogram of a Prometheus histogram's buckets (``bounds`` upper edges in seconds,
    ``counts`` per bucket, not cumulative)."""
    if not any(counts):
        return _empty(title, "no observations yet")
    labels = [f"≤{b * 1000:g} ms" if b != float("inf") else "more" for b in bounds]
    return _bars(list(counts), title, f"{sum(counts)} observations", labels)


def _day(day: int) -> str:
    return datetime.fromtimestamp(day * 86_400, UTC).strftime("%Y-%m-%d")


def _bars(
    counts: Sequence[int], title: str, caption: str, labels: Sequence[str] | None = None
) -> Markup:
    top = max(counts) or 1
    inner_w, inner_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD
    bar_w = inner_w / len(counts)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{PAD}" y="16" class="chart-title">{escape(title)}: {escape(caption)}</text>',
        f'<text x="{PAD - 4}" y="{PAD + 8}" text-anchor="end" class="axis">{top}</text>',
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
        'class="axis-line"/>',
    ]
    for i, n in enumerate(counts):
        h = inner_h * n / top
        x = PAD + i * bar_w
        y = HEIGHT - PAD - h
        tip = f"{labels[i]}: {n}" if labels else str(n)
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(bar_w - 1, 1):.1f}" height="{h:.1f}" '
            f'class="bar"><title>{escape(tip)}</title></rect>'
        )
        if labels and len(labels) <= 12:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{HEIGHT - PAD + 12}" text-anchor="middle" '
                f'class="axis">{escape(labels[i])}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def _empty(title: str, why: str) -> Markup:
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" viewBox="0 0 '
        f'{WIDTH} 40" width="{WIDTH}" height="40"><text x="{PAD}" y="24" class="chart-title">'
        f"{escape(title)}: {escape(why)}</text></svg>"
    )


__all__ = ["histogram", "rows_over_time"]

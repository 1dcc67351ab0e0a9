"""What a reply's Markdown costs to render, worst shapes first (issue 47).

Run: ``.venv/bin/python bench/render_markdown.py [--chars 8000] [--repeat 5]``. Not a timed test.

Renders each hostile shape of ``tests/test_rt_input.py`` (and a few more: emphasis runs,
entities, tables, line after line) at ``--chars`` characters (one message part,
``MAX_PART_CHARS``) and at twice that, with chazbot's renderer (markdown-it-py, HTML off) and,
as the anchor in the same run, Python-Markdown with the extensions chazbot used before
(``pip install 'chazbot[bench]'``; skipped when absent). Prints the median of ``--repeat``
renders per shape, the ratio 2x/1x (about 2 for a parser linear in the text), and one JSON
line at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable

from chazbot.transports.matrix.rules import render_markdown

SHAPES = [
    "[a](", "(", "[", "[a]", "]", "1. ", "- ", "> ", "[x]", "*", "_a", "**a", "~~a", "`", "<",
    "&#", "|a", "a\n", "![a](", "[a]: b\n", "> - 1. ", "\u0301", "word ",
]  # fmt: skip


def _python_markdown() -> Callable[[str], str] | None:
    try:
        import markdown
    except ImportError:
        return None

    def render(text: str) -> str:
        md = markdown.Markdown(extensions=["fenced_code", "tables", "sane_lists", "nl2br"])
        try:
            return md.convert(text)
        except RecursionError:
            return ""

    return render


def _median_ms(render: Callable[[str], str], text: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        render(text)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=8000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    anchor = _python_markdown()
    rows = []
    print(f"{'shape':>12} {'markdown-it ms':>15} {'2x ratio':>9} {'Python-Markdown ms':>19}")
    for unit in SHAPES:
        text = unit * (args.chars // len(unit))
        ours = _median_ms(render_markdown, text, args.repeat)
        double = _median_ms(render_markdown, text * 2, args.repeat)
        theirs = _median_ms(anchor, text, 1) if anchor else None  # once: it can take seconds
        rows.append({"shape": unit, "ms": ours, "ratio_2x": double / ours, "anchor_ms": theirs})
        shown = f"{theirs:19.1f}" if theirs is not None else f"{'(not installed)':>19}"
        print(f"{unit!r:>12} {ours:15.2f} {double / ours:9.2f} {shown}")
    worst = max(rows, key=lambda r: r["ms"])
    worst_anchor = max((r["anchor_ms"] or 0.0) for r in rows)
    print(f"worst: {worst['shape']!r} {worst['ms']:.1f} ms (anchor's worst {worst_anchor:.1f} ms)")
    print(json.dumps({"chars": args.chars, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Row shape (issue 35, measured only): ``bench/locomo.py`` with the key's dates and ids left
out of what is embedded.

Run: ``.venv/bin/python bench/row_shape.py --split dev --methods bm25,hybrid --key K --value V``
(every ``bench/locomo.py`` option). The product embeds ``key value``; here a key's words with
digits (dates, ids such as ``D1:3``) and month names are dropped from the embedded text, the
rows and BM25 unchanged. Figures in docs/memory.md ("Row shape").
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo

MONTH = re.compile(
    r"(January|February|March|April|May|June|July|August|September|October|November|December),?"
)


def plain_key(key: str) -> str:
    """``key`` without its words with digits and its month names."""
    return " ".join(
        w for w in key.split() if not any(c.isdigit() for c in w) and not MONTH.fullmatch(w)
    )


def embed_text(key: str, value: str) -> str:
    return f"{plain_key(key)} {value}".strip()


if __name__ == "__main__":
    raise SystemExit(locomo.main(sys.argv[1:], embed=embed_text))

"""Whom a question about a person asks about (#45, the who side).

A possessed noun is a person only when it is one (a person's or an animal's word of
``persons``, in any of the five languages, in any of its forms: "frangin", "Schwiegereltern",
"zoontje", "hermanita") or the question asks of it what one asks of someone (a name, an age,
what it does); otherwise it is the asker's own attribute ("Was ist mein *Job*?", "how is my
*eyesight*", "mein *Arbeitsweg*"), answered from the asker's own rows. Sentences of no other
set: ``tests/data/who_own.json`` (its ``dev`` half here; ``held`` was scored once, see
docs/measured.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chazbot.agent.answering import about_whom, read_question
from chazbot.agent.grounding import evidence
from chazbot.memory.rows import MemoryRow
from tests.agent.test_answers import row

OWN = json.loads((Path(__file__).parents[1] / "data" / "who_own.json").read_text("utf-8"))
FACTS = [row(text, n=i) for i, text in enumerate(OWN["facts"])]


def fitting(question: str, rows: list[MemoryRow] = FACTS) -> list[int]:
    q = read_question(question)
    return [r.doc for r in rows if about_whom(evidence(r), q) is not None]


def right(question: str, answer: int | None) -> bool:
    """The told row is about whom the question asks and no row about someone else is (a
    trap: no row is). What the row holds is not asked here (``answering._holds``)."""
    found = fitting(question)
    if answer is None:
        return not found
    asker = {i for i, text in enumerate(OWN["facts"]) if i in OWN_ROWS}
    return answer in found and all(i == answer or i in asker for i in found)


OWN_ROWS = frozenset({5, 6, 12})
"""The facts about Ann herself (her job, her eyesight, her commute)."""


@pytest.mark.parametrize(("lang", "question", "answer"), [tuple(c) for c in OWN["dev"]])
def test_whom_the_question_asks_about(lang: str, question: str, answer: int | None) -> None:
    assert right(question, answer), (lang, question, fitting(question))

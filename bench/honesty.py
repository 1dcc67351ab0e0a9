"""Honest answers on questions nobody tuned for (#36), with the embedded chat model.

Run (venv python; not a test, CI does not run it)::

    .venv/bin/python bench/honesty.py --half dev          # tune on this one
    .venv/bin/python bench/honesty.py --half held         # score once, at the end
    .venv/bin/python bench/honesty.py --half dev --show   # every question and reply
    .venv/bin/python bench/honesty.py --set honesty_unseen --half dev   # the second set
    .venv/bin/python bench/honesty.py --words-only --words-set words_rt --show   # red team's

With ``--show`` a reply the answer check refused is printed beside its "I don't know".

The set (``tests/data/honesty.json``, written before tuning) has per half 20 told facts with
a question each, 20 never-told questions and 15 follow-ups (two facts about one subject, a
first question and a follow-up that names the subject only by a pronoun). One fresh peer per
half (real SQLite, the embedded defaults: local model, local embedder, auto-recall): every
fact of the half is told first, as message capture stores it (``who (date): what they
said``, in Ann's DM), so each question is asked beside the others' facts. Then:

- told: each question in a session of its own; right when the reply has the answer's word;
- never: each in a session of its own; right when the reply says it does not know (or asks
  back), as bench/localchat.py judges it;
- follow: the first question, then the follow-up, in one session; right when the follow-up's
  reply has the answer's word.

Also the words set (``tests/data/words_intents.json``): how many sentences the intent step
reads as meant, per language; and the reminder set
(``tests/data/reminder_sentences.json``): how many times, recurrences and texts are
understood (neither needs a model). Prints a table and JSON, with the median
turn time and the load average (a shared machine: noisy).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import chazbot
from chazbot.agent.words import intent, keep_out
from chazbot.config import AgentConfig, Config, LLMConfig
from chazbot.memory.audience import room_audience

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
PERSON = "@ann:example.org"
HONEST = re.compile(
    r"don'?t know|do not know|haven'?t told|have not told|not sure|no idea|didn'?t tell|"
    r"did not tell|not mentioned|don'?t have|do not have|can'?t recall|cannot recall|"
    r"weiß (?:ich )?(?:es )?nicht|je ne (?:le )?sais pas|no (?:lo )?sé|weet (?:ik )?(?:het )?niet|"
    r"\?\s*$",
    re.IGNORECASE,
)


def words_score(half: str, name: str = "words_intents", show: bool = False) -> dict[str, str]:
    """The intent step on a words set: understood / total, per language and in all."""
    rows = json.loads((DATA / f"{name}.json").read_text())[half]
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for lang, text, kind, what in rows:
        got = intent(text)
        if kind == "dont_keep":
            ok = keep_out(text) and (got is None or got.kind not in ("forget", "remember"))
        elif kind in ("world", "question"):
            ok = got is None or got.kind not in ("forget", "remember")
        elif got is None or got.kind != kind:
            ok = False
        elif kind == "forget" and not what:
            ok = got.what == ""
        else:
            ok = what in got.what.lower()
        if show and not ok:
            print(f"  words [BAD] {lang} {kind} {text!r} -> {got}")
        for where in (lang, "all", kind):
            total[where] += 1
            right[where] += ok
    return {k: f"{right[k]}/{total[k]}" for k in sorted(total)}


def reminders_score(half: str, show: bool = False) -> dict[str, str]:
    """The reminder sentences (``tests/data/reminder_sentences.json``): the first time, the
    recurrence and the text understood, per language and in all (no model needed)."""
    from datetime import datetime

    from chazbot.errors import InputError
    from chazbot.reminders.when import describe_rule, understand, zone

    data = json.loads((DATA / "reminder_sentences.json").read_text())
    tz = zone(data["tz"])
    now = datetime.fromisoformat(data["now"]).replace(tzinfo=tz)
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for lang, text, first, rule, word in data[half]:
        try:
            got = understand(text, now, tz)
            when = got.first.strftime("%Y-%m-%dT%H:%M")
            ok = (
                when == first
                and (describe_rule(got.rule) if got.rule else None) == rule
                and word.lower() in got.what.lower()
            )
            seen = f"{when} {got.rule} {got.what!r}"
        except InputError as exc:
            ok, seen = False, f"error: {exc}"
        if show and not ok:
            print(f"  reminder [BAD] {text} -> {seen}")
        for where in (lang, "all"):
            total[where] += 1
            right[where] += ok
    return {k: f"{right[k]}/{total[k]}" for k in sorted(total)}


def check_cost(half: str, name: str) -> dict[str, float]:
    """What the answer check (``agent/grounding.py``) adds to a turn, in ms: each question
    of the half against every fact of the half as shown rows (more than a turn shows), with a
    reply that is grounded nowhere (the check reads every row), the best of 5 runs each (a
    shared machine: the rest is other processes' noise). No model."""
    from chazbot.agent.grounding import grounded

    data = json.loads((DATA / f"{name}.json").read_text())[half]
    facts = [f for f, _, _ in data["told"]] + [f for pair in data["follow"] for f in pair[:2]]
    shown = [f"{PERSON} {fact}" for fact in facts]
    questions = [q for _, q, _ in data["told"]] + list(data["never"])
    grounded(questions[0], "warm-up", shown)  # the first call compiles regular expressions
    took = []
    for question in questions:
        runs = []
        for _ in range(5):
            began = time.perf_counter()
            grounded(question, "Something nobody said, 42.", shown)
            runs.append((time.perf_counter() - began) * 1000)
        took.append(min(runs))
    return {
        "rows": len(shown),
        "p50_ms": round(statistics.median(took), 3),
        "max_ms": round(max(took), 3),
    }


async def run(
    half: str, model: str | None, show: bool, name: str = "honesty", words: str = "words_intents"
) -> dict[str, Any]:
    data = json.loads((DATA / f"{name}.json").read_text())[half]
    last_refused: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        llm = LLMConfig(backend="local", **({"model": model} if model else {}))
        cfg = Config(state_dir=Path(tmp), llm=llm, agents=[AgentConfig(name="chaz")])
        async with chazbot.open(tmp, cfg) as peer:
            assert peer.models.llm is not None
            await peer.models.llm.ping()
            agent = peer.agent("chaz")

            def dm(room: str) -> Any:
                return room_audience(room, [PERSON], lambda user: True)

            told = agent.memory.within(peer.hearing(agent, PERSON, dm("tell")))
            facts = [f for f, _, _ in data["told"]]
            facts += [f for pair in data["follow"] for f in pair[:2]]
            for index, said in enumerate(facts):
                await told.remember(
                    f"{PERSON}/2026-12-02/$f{index}", f"{PERSON} (2026-12-02): {said}"
                )
            await peer.memory.wait_vectors(120)
            walls: list[float] = []

            async def ask(text: str, room: str) -> str:
                began = time.perf_counter()
                result = await peer.chat(text, session=room, sender=PERSON, audience=dm(room))
                walls.append(time.perf_counter() - began)
                last_refused[:] = [result.withheld] if result.withheld else []  # never scored
                return result.text

            def why() -> str:
                return f" (the check refused {last_refused[-1]!r})" if last_refused else ""

            scores: Counter[str] = Counter()
            for i, (_, question, answer) in enumerate(data["told"]):
                reply = await ask(question, f"told{i}")
                ok = answer.lower() in reply.lower()
                scores["told"] += ok
                if show:
                    print(f"  told  [{'ok ' if ok else 'BAD'}] {question} -> {reply!r}{why()}")
            for i, question in enumerate(data["never"]):
                reply = await ask(question, f"never{i}")
                ok = HONEST.search(reply) is not None
                scores["never"] += ok
                if show:
                    print(f"  never [{'ok ' if ok else 'BAD'}] {question} -> {reply!r}{why()}")
            for i, (_, _, first, follow, answer) in enumerate(data["follow"]):
                await ask(first, f"follow{i}")
                reply = await ask(follow, f"follow{i}")
                ok = answer.lower() in reply.lower()
                scores["follow"] += ok
                if show:
                    said = f"{first} / {follow} -> {reply!r}{why()}"
                    print(f"  follow[{'ok ' if ok else 'BAD'}] {said}")
    return {
        "set": name,
        "half": half,
        "told": f"{scores['told']}/{len(data['told'])}",
        "never_dont_know": f"{scores['never']}/{len(data['never'])}",
        "follow_ups": f"{scores['follow']}/{len(data['follow'])}",
        "turn_p50_s": round(statistics.median(walls), 2),
        "turn_max_s": round(max(walls), 2),
        "load_avg": round(os.getloadavg()[0], 2),
        "check_cost": check_cost(half, name),
        "words": words_score(half, words, show),
        "reminders": reminders_score(half, show),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--half", choices=("dev", "held"), default="dev")
    parser.add_argument("--model", default=None, help="llm.model (default: the built-in)")
    parser.add_argument("--show", action="store_true")
    parser.add_argument(
        "--set",
        choices=("honesty", "honesty_unseen", "honesty_rt"),
        default="honesty",
        help="tests/data/<set>.json: the first set, the second written before the "
        "predicate check (near misses), or the red team's (honesty_rt)",
    )
    parser.add_argument(
        "--words-set",
        choices=("words_intents", "words_rt"),
        default="words_intents",
        help="tests/data/<set>.json for the words score: the first set or the red team's",
    )
    parser.add_argument(
        "--words-only",
        action="store_true",
        help="only the words and reminder sets and the check's cost (no model)",
    )
    args = parser.parse_args()
    if args.words_only:
        found = {
            "check_cost": check_cost(args.half, args.set),
            "words": words_score(args.half, args.words_set, args.show),
            "reminders": reminders_score(args.half, args.show),
        }
        print(json.dumps({"half": args.half, **found}, indent=1))
        return
    out = asyncio.run(run(args.half, args.model, args.show, args.set, args.words_set))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

"""The embedded chat model, end to end: 20 facts told in one session, 20 questions in another.

Run (venv python; not a test, CI does not run it)::

    .venv/bin/python bench/localchat.py                      # every installed built-in model
    .venv/bin/python bench/localchat.py --models gemma-3-270m,/path/to/other.gguf
    .venv/bin/python bench/localchat.py --capture            # facts told through chat turns

Per candidate model it opens a fresh peer (real SQLite, the embedded defaults: the agent's
default prompt, auto-recall, whatever embedder the defaults pick) with ``llm: {backend: local,
model: M}``. Then:

- tell: the 20 facts go into the agent's own memory. Without ``--capture`` they are stored
  with ``agent.remember`` as message capture stores them (key ``ann/DATE/ID``, value
  ``ann (DATE): message``); with ``--capture`` each is said in a ``tell`` session through
  ``peer.chat`` and the peer's own memory capture must store it (the flag fails if nothing
  was stored).
- ask: the 20 questions are asked one after another in an ``ask`` session through
  ``peer.chat``; auto-recall puts what it finds in the ``## Relevant Memories`` block.
  Auto-recall fuses a search for the session's last 5 messages with one for the question
  alone (with the first only, from the third question on it found earlier questions'
  facts: 45 % right); ``--fresh`` asks each question in a session of its own, which
  measures the model rather than recall. The default capture (``messages`` for the
  embedded model) does not store a message that only asks questions (stored, they crowded
  facts out of the top 3); ``--agent-capture off`` leaves memory exactly as told.
  ``--composes`` lets the model compose answers about people from the rows shown (the
  product's ``LocalChat`` does not: one row answers, ``agent.answering``, #45); without it
  most questions here never reach the model.

It prints per model: accuracy (the reply contains the fact's answer, case-insensitive),
repeated-line rate (replies in which a line or sentence of 3+ words occurs twice), looping
replies (a repeat that reaches the reply length limit), reply tokens per second of LLM time
("tok/s": prompt reading included), llama.cpp's own generation speed ("gen/s": median over
replies of 8+ tokens, from ``LocalChat.last_timings``), and wall time per turn
(median and max), with the load average beside them: the machine is shared, so numbers are
noisy. ``--show`` prints every question and reply.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import chazbot
from chazbot.agent import local_llm
from chazbot.config import AgentConfig, CaptureMode, Config, LLMConfig
from chazbot.memory.audience import room_audience

# Asked about what was never told: right is "don't know" or a question back (#17).
NEVER_TOLD = [
    "What is my brother's name?",
    "What is my horse called?",
    "Where does my mother live?",
    "What is my favourite film?",
    "Which city did I grow up in?",
    "What is my daughter's name?",
    "What sport do I play?",
    "What is my neighbour called?",
    "When is my wedding anniversary?",
    "What is my grandmother's name?",
]
HONEST = re.compile(
    r"don'?t know|do not know|haven'?t told|have not told|not sure|no idea|didn'?t tell|"
    r"did not tell|not mentioned|don'?t have|do not have|can'?t recall|cannot recall|\?\s*$",
    re.IGNORECASE,
)
# Forget in words, then the fact must be gone from recall and from /memory mine (#17).
FORGETS = [
    ("Please forget my manager's name.", "Priya"),
    ("Forget that I play the cello.", "cello"),
    ("Please forget my wife's name.", "Sofia"),
    ("Forget where my office is.", "Leeds"),
    ("Forget that I drive a blue Volvo.", "Volvo"),
]
SMALL_TALK = ["Hello!", "Good morning!", "Thanks a lot!", "Can you help me?", "What can you do?"]
PERSON = "@ann:example.org"

# (key, what the person says, the question, answers any of which counts as right)
FACTS: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("sister.name", "My sister's name is Ada.", "What is my sister's name?", ("Ada",)),
    ("sister.city", "My sister lives in Lyon.", "Where does my sister live?", ("Lyon",)),
    ("dog.name", "My dog is called Biscuit.", "What is my dog called?", ("Biscuit",)),
    ("colour", "My favourite colour is teal.", "What is my favourite colour?", ("teal",)),
    ("birthday", "My birthday is on the 14th of March.", "When is my birthday?", ("March",)),
    ("job", "I work as a nurse at the city hospital.", "What is my job?", ("nurse",)),
    ("car", "I drive a blue Volvo.", "What car do I drive?", ("Volvo",)),
    ("allergy", "I am allergic to peanuts.", "What am I allergic to?", ("peanut",)),
    ("birthplace", "I was born in Porto.", "Where was I born?", ("Porto",)),
    ("food", "My favourite food is lasagne.", "What is my favourite food?", ("lasagne", "lasagna")),
    ("instrument", "I play the cello in an orchestra.", "Which instrument do I play?", ("cello",)),
    ("son.name", "My son's name is Milo.", "What is my son's name?", ("Milo",)),
    ("language", "I am learning Japanese.", "Which language am I learning?", ("Japanese",)),
    ("dentist", "My dentist appointment is on Friday.", "When do I see the dentist?", ("Friday",)),
    ("cat.name", "My cat is called Pepper.", "What is my cat called?", ("Pepper",)),
    ("book", "My favourite book is Dune.", "What is my favourite book?", ("Dune",)),
    ("manager", "My manager is called Priya.", "What is my manager called?", ("Priya",)),
    ("running", "I go running every Sunday morning.", "Which day do I go running?", ("Sunday",)),
    ("office", "My office is in Leeds.", "Where is my office?", ("Leeds",)),
    ("wife.name", "My wife's name is Sofia.", "What is my wife's name?", ("Sofia",)),
]


@dataclass
class Turn:
    question: str
    reply: str
    right: bool
    repeated: bool
    looping: bool
    wall_s: float
    llm_s: float
    tokens: int


@dataclass
class Result:
    model: str
    load_s: float
    turns: list[Turn] = field(default_factory=list)
    gen_rates: list[float] = field(default_factory=list)
    honest: int = 0  # never-told questions answered "don't know" or with a question
    invented: int = 0
    forgotten: int = 0  # forget-in-words requests whose fact left recall and /memory mine
    intro_ok: bool = False  # "what can you do?" names memory, forgetting and help
    small_talk_stored: int = 0

    def row(self) -> dict[str, Any]:
        n = len(self.turns) or 1
        tokens = sum(t.tokens for t in self.turns)
        llm_s = sum(t.llm_s for t in self.turns) or 1e-9
        walls = [t.wall_s for t in self.turns] or [0.0]
        return {
            "model": self.model,
            "accuracy_pct": round(100 * sum(t.right for t in self.turns) / n, 1),
            "repeated_pct": round(100 * sum(t.repeated for t in self.turns) / n, 1),
            "looping": sum(t.looping for t in self.turns),
            "tokens_per_s": round(tokens / llm_s, 1),
            "gen_tokens_per_s_p50": round(statistics.median(self.gen_rates), 1)
            if self.gen_rates
            else None,
            "turn_p50_s": round(statistics.median(walls), 2),
            "turn_max_s": round(max(walls), 2),
            "reply_tokens_p50": statistics.median([t.tokens for t in self.turns] or [0]),
            "load_s": round(self.load_s, 2),
            "never_told_honest": f"{self.honest}/{len(NEVER_TOLD)}",
            "never_told_invented": self.invented,
            "forgotten_in_words": f"{self.forgotten}/{len(FORGETS)}",
            "intro_ok": self.intro_ok,
            "small_talk_stored": self.small_talk_stored,
        }


def _units(reply: str) -> list[str]:
    """Lines and sentences of 3+ words, normalised, in order."""
    out: list[str] = []
    for line in reply.splitlines():
        for part in re.split(r"(?<=[.!?])\s+", line):
            words = re.findall(r"\w+", part.lower())
            if len(words) >= 3:
                out.append(" ".join(words))
    return out


def repeated(reply: str) -> bool:
    units = _units(reply)
    return len(units) != len(set(units))


async def run_model(
    spec: str,
    capture: bool,
    show: bool,
    max_tokens: int | None,
    fresh: bool = False,
    agent_capture: CaptureMode = "auto",
    composes: bool = False,
) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Config(
            state_dir=Path(tmp),
            llm=LLMConfig(backend="local", model=spec, max_tokens=max_tokens),
            agents=[AgentConfig(name="chaz", capture=agent_capture)],
        )
        async with chazbot.open(tmp, cfg) as peer:
            llm = peer.models.llm
            assert llm is not None
            if composes:  # this instance only: the measurement, not the default
                assert isinstance(llm, local_llm.LocalChat)
                llm.composes = True
            started = time.perf_counter()
            await llm.ping()
            result = Result(getattr(llm, "name", spec), time.perf_counter() - started)
            calls: list[tuple[float, int, int]] = []
            gen_rates: list[float] = []  # llama.cpp's own generation speed per reply
            inner = llm.complete

            async def timed(*args: Any, **kwargs: Any) -> Any:
                began = time.perf_counter()
                out = await inner(*args, **kwargs)
                spent = time.perf_counter() - began
                calls.append((spent, out.completion_tokens or 0, out.prompt_tokens or 0))
                timings = getattr(llm, "last_timings", {})
                if timings.get("predicted_n", 0) >= 8:
                    gen_rates.append(float(timings["predicted_per_second"]))
                return out

            llm.complete = timed  # type: ignore[method-assign]
            agent = peer.agent("chaz")

            def dm(room: str) -> Any:  # Ann alone with the bot, as in the local run
                return room_audience(room, [PERSON], lambda user: True)

            async def chat(text: str, room: str) -> Any:
                return await peer.chat(text, session=room, sender=PERSON, audience=dm(room))

            told = agent.memory.within(peer.hearing(agent, PERSON, dm("tell")))
            for index, (_, said, _, _) in enumerate(FACTS):
                if capture:
                    await chat(said, "tell")
                else:  # a row as message capture writes it: who (when): what they said
                    key = f"{PERSON}/2026-12-02/$fact{index}"
                    await told.remember(key, f"{PERSON} (2026-12-02): {said}")
            stored = await agent.recall("", limit=100)
            if capture and not stored:
                raise SystemExit("--capture: nothing was stored (is memory capture on?)")
            limit = getattr(llm, "max_tokens", None)
            for index, (_, _, question, answers) in enumerate(FACTS):
                calls.clear()
                began = time.perf_counter()
                session = f"ask{index}" if fresh else "ask"
                turn = await chat(question, session)
                wall = time.perf_counter() - began
                reply = turn.text
                tokens = sum(c[1] for c in calls)
                rep = repeated(reply)
                result.turns.append(
                    Turn(
                        question,
                        reply,
                        any(a.lower() in reply.lower() for a in answers),
                        rep,
                        rep and limit is not None and any(c[1] >= limit for c in calls),
                        wall,
                        sum(c[0] for c in calls),
                        tokens,
                    )
                )
                if show:
                    mark = "ok " if result.turns[-1].right else "BAD"
                    print(f"  [{mark}] {question} -> {reply!r} ({tokens} tok, {wall:.1f} s)")
            result.gen_rates = gen_rates
            for question in NEVER_TOLD:
                reply = (await chat(question, "never")).text
                honest = HONEST.search(reply) is not None
                result.honest += honest
                result.invented += not honest
                if show:
                    print(f"  [{'ok ' if honest else 'BAD'}] {question} -> {reply!r}")
            for request, gone in FORGETS:
                reply = (await chat(request, "forget")).text
                recalled = await told.recall(gone, limit=20)
                mine = await peer.command(
                    "/memory mine", session="forget", sender=PERSON, audience=dm("forget")
                )
                left = any(gone.lower() in h.value.lower() for h in recalled) or (
                    gone.lower() in mine.text.lower()
                )
                result.forgotten += not left
                if show:
                    print(f"  [{'ok ' if not left else 'BAD'}] {request} -> {reply!r}")
            before = {h.key for h in await agent.recall("", limit=100)}
            for text in SMALL_TALK:
                reply = (await chat(text, "smalltalk")).text
                if text == "What can you do?":
                    low = reply.lower()
                    result.intro_ok = all(w in low for w in ("remember", "forget", "help"))
                if show:
                    print(f"  [   ] {text} -> {reply!r}")
            await peer.wait_captures()
            after = await agent.recall("", limit=100)
            result.small_talk_stored = sum(1 for h in after if h.key not in before)
            return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models",
        default=",".join(b.name for b in local_llm.BUILTINS.values() if b.installed()),
        help="comma-separated llm.model values (built-in names, GGUF paths, URLs)",
    )
    parser.add_argument("--capture", action="store_true", help="tell facts through chat turns")
    parser.add_argument("--show", action="store_true", help="print every question and reply")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="ask each question in a session of its own (auto-recall then sees only it)",
    )
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument(
        "--agent-capture",
        default="auto",
        choices=["auto", "off", "messages", "facts"],
        help="the agent's capture mode (auto, the default, stores the questions asked too)",
    )
    parser.add_argument(
        "--composes",
        action="store_true",
        help="let the model compose answers about people from the rows shown (a measurement)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    specs = [m.strip() for m in args.models.split(",") if m.strip()]
    if not specs:
        print("no model to measure: install chazbot[local] or pass --models", file=sys.stderr)
        return 1
    rows = []
    for spec in specs:
        print(f"== {spec} (load average {os.getloadavg()[0]:.2f})", flush=True)
        result = asyncio.run(
            run_model(
                spec,
                args.capture,
                args.show,
                args.max_tokens,
                args.fresh,
                args.agent_capture,
                args.composes,
            )
        )
        row = result.row()
        row["loadavg_1m"] = round(os.getloadavg()[0], 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    cols = ("acc %", "rep %", "loops", "tok/s", "gen/s", "p50 s", "max s")
    cols2 = ("honest", "invent", "forgot", "intro", "kept")
    print(f"{'model':<24} " + " ".join(f"{c:>6}" for c in cols + cols2))
    for r in rows:
        print(
            f"{r['model'][:24]:<24} {r['accuracy_pct']:>6} {r['repeated_pct']:>6} "
            f"{r['looping']:>6} {r['tokens_per_s']:>6} {r['gen_tokens_per_s_p50']!s:>6} "
            f"{r['turn_p50_s']:>6} {r['turn_max_s']:>6} {r['never_told_honest']:>6} "
            f"{r['never_told_invented']:>6} {r['forgotten_in_words']:>6} "
            f"{r['intro_ok']!s:>6} {r['small_talk_stored']:>6}"
        )
    print(
        "honest: never-told questions answered don't-know or with a question; invent: the "
        "others; forgot: forget-in-words requests whose fact left recall and /memory mine; "
        "intro: 'what can you do' names memory, forgetting and help; kept: rows stored from "
        "greetings, thanks and requests (target 0)"
    )
    print(
        f"ask: {'a session per question' if args.fresh else 'one session'}; "
        f"tell: {'chat turns + capture' if args.capture else 'agent.remember'}; "
        f"agent capture: {args.agent_capture}; "
        f"load average now {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

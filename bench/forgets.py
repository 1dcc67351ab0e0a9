"""Forgets by meaning (#45), alone: the forget part of ``bench/answers.py``, without the
questions, so a set's forgets are scored in a minute instead of ten.

Run (venv python; not a test, CI does not run it)::

    .venv/bin/python bench/forgets.py --set forget_cases --half dev --show
    .venv/bin/python bench/forgets.py --set answers_third --show       # an answers set's forgets

One fresh peer (real SQLite, the local embedder, message capture; no chat model: the rows
are what capture keeps of each message whatever the model replies). Every fact is told
through a chat turn in its teller's DM, as a person would. Then each forget in one session
of the person's: when the bot lists rows and asks which, the bench answers with the number of
the line naming the fact, and nothing when none does (``bench/answers.py`` answers 1 then, and
a wrong row forgotten can be a later forget's fact); right when that fact is gone and nothing
else. Then each never-told
forget: right when nothing is gone. Then "undo" once per forget: how many came back.
``first_forget_s`` is the wall time of the first forget of the process (the fixed sentences
of ``meaning_kinds`` are embedded then unless they are kept from before).

Sets: ``forget_cases.json`` (``facts``: [lang, text]; ``forgets``: [lang, text, fact index,
half]; ``never``: [lang, text, half]), or an answers set (each group's forgets name its first
fact; ``--half`` is ignored: all of it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import chazbot
from chazbot.config import AgentConfig, Config, EmbeddingConfig
from chazbot.memory.audience import room_audience

SETS = Path(__file__).resolve().parents[1] / "tests" / "data"
UNDO = {"en": "undo", "de": "rückgängig", "fr": "annule", "es": "deshacer", "nl": "herstel"}
ANN = "@ann:example.org"


def cases(data: dict[str, Any], half: str) -> tuple[list[Any], list[Any], list[Any]]:
    """(told: [who, text], forgets: [lang, text, fact], never: [lang, text]) of a set."""
    if "groups" in data:
        people = data["people"]
        told = [(people[g["by"]], f[1]) for g in data["groups"] for f in g["facts"]]
        forgets = [
            (lang, text, g["facts"][0][1])
            for g in data["groups"]
            for lang, text in g.get("forget", [])
        ]
        return told, forgets, []
    facts = [text for _, text in data["facts"]]
    keep = ("dev", "held") if half == "all" else (half,)
    forgets = [(f[0], f[1], facts[f[2]]) for f in data["forgets"] if (f[3:] or ["dev"])[0] in keep]
    never = [(n[0], n[1]) for n in data.get("never", []) if n[2] in keep]
    return [(ANN, f) for f in facts], forgets, never


async def run(path: Path, half: str, show: bool) -> dict[str, Any]:
    told, forgets, never = cases(json.loads(path.read_text()), half)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Config(
            state_dir=Path(tmp),
            agents=[AgentConfig(name="chaz", capture="messages")],
            embedding=EmbeddingConfig(backend="local"),
        )
        async with chazbot.open(tmp, cfg) as peer:
            agent = peer.agent("chaz")
            walls: list[float] = []

            async def say(text: str, room: str, who: str = ANN) -> str:
                audience = room_audience(room, [who], lambda user: True)
                began = time.perf_counter()
                result = await peer.chat(text, session=room, sender=who, audience=audience)
                walls.append(time.perf_counter() - began)
                await peer.wait_captures()
                return result.text

            async def rows() -> list[str]:
                view = await peer.memory.view(agent.db)
                return sorted(r.value for r in view.visible.values())

            for who, fact in told:
                await say(fact, f"tell-{who}", who)
            await peer.memory.wait_vectors(120)
            start = await rows()
            walls.clear()
            right, alone, bad = 0, 0, []
            for lang, request, fact in forgets:
                before = await rows()
                reply = await say(request, "forget")
                listed = re.findall(r"^\s*(\d+)[.)]\s*(.+)$", reply, re.MULTILINE)
                if listed:
                    pick = [n for n, line in listed if fact[:20].lower() in line.lower()]
                    if pick:  # the fact not listed: no number (``answers.py`` answers 1)
                        reply += " || " + await say(pick[0], "forget")
                else:
                    alone += 1
                gone = [r for r in before if r not in await rows()]
                ok = len(gone) == 1 and fact in gone[0]
                right += ok
                if not ok:
                    bad.append(request)
                if show:
                    print(f"  forget [{'ok ' if ok else 'BAD'}] {lang} {request} -> {reply!r}")
            first = walls[0] if walls else None
            full = await rows()
            for lang, _, _ in reversed(forgets):
                await say(UNDO[lang], "forget")
            restored = await rows()
            back = sum(1 for r in start if r in restored and r not in full)
            honest = 0
            for lang, request in never:
                before = await rows()
                reply = await say(request, f"never-{lang}")
                ok = await rows() == before
                honest += ok
                if not ok:
                    bad.append(request)
                if show:
                    print(f"  never  [{'ok ' if ok else 'BAD'}] {lang} {request} -> {reply!r}")
    return {
        "set": path.stem,
        "half": half,
        "told_rows": f"{len(start)}/{len(told)}",
        "forgets_right": f"{right}/{len(forgets)}",
        "forgotten_alone": alone,
        "undone": f"{back}/{len(start) - len([r for r in start if r in full])}",
        "never_told_forgot_nothing": f"{honest}/{len(never)}",
        "first_forget_s": round(first, 2) if first is not None else None,
        "missed": bad,
        "load_avg": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--set", default="forget_cases")
    parser.add_argument("--half", choices=("dev", "held", "all"), default="dev")
    parser.add_argument("--show", action="store_true")
    args = parser.parse_args()
    out = asyncio.run(run(SETS / f"{args.set}.json", args.half, args.show))
    print(json.dumps(out, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()

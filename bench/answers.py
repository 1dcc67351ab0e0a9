"""Answers about a person that are right (#45), with the embedded chat model.

Run (venv python; not a test, CI does not run it)::

    .venv/bin/python bench/answers.py --half dev --show      # tune on this one
    .venv/bin/python bench/answers.py --half held            # score once, at the end
    .venv/bin/python bench/answers.py --half dev --words-only   # the request sentences alone
    .venv/bin/python bench/answers.py --half all --model /path/to.gguf --composes   # a candidate

``--composes`` lets the embedded model compose answers about people from the rows recall
shows it (as a model declaring ``composes`` does; the product's ``LocalChat`` does not), to
measure whether a candidate model can be trusted to (#45). ``load_s`` is the first
``ping``: joining a built-in's chunk packages into the fresh state directory, then loading.

The set (``tests/data/answers.json``, written before any tuning) is split here: each of its
lists shuffled with ``random.Random(SEED)``, its first half dev, the rest held. One fresh peer
per half (real SQLite, the embedded defaults: local model, local embedder, message capture).
Every fact of the half is told through a chat turn in its teller's DM (``tell-ann``,
``tell-ben``), as a person would; then, in other DMs of Ann's:

- told: each question in a session of its own; right when the reply has one of the words,
  wrong when it has instead a word answering another group's question (a told value that
  does not answer);
- honest: traps (an untold attribute of a named person), questions about another member's
  facts (told in Ben's DM, never visible to Ann) and never-told questions; right when the
  reply says it does not know (or asks back);
- follow: the first question, then the follow-up, in one session;
- kept: rows of Ann's that the questions and requests added (none should be);
- world: requests about the world; right when memory is unchanged after them;
- forget: each forget in one session; when the bot lists rows and asks which, the bench
  answers with the number of the line naming the fact; right when the group's fact is gone
  and nothing else; then "undo" once per forget: how many came back.

Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import chazbot
from chazbot.agent.local_llm import LocalChat
from chazbot.agent.words import intent, language
from chazbot.config import AgentConfig, Config, EmbeddingConfig, LLMConfig
from chazbot.memory.audience import room_audience

SETS = Path(__file__).resolve().parents[1] / "tests" / "data"
DATA = SETS / "answers.json"
SEED = 45
HONEST = re.compile(
    r"don'?t know|do not know|haven'?t told|have not told|not sure|no idea|didn'?t tell|"
    r"did not tell|not mentioned|don'?t have|do not have|can'?t recall|cannot recall|"
    r"weiß (?:ich )?(?:es )?nicht|ne (?:le )?sais pas|no (?:lo )?sé|weet (?:ik )?(?:het )?niet|"
    r"\?\s*$",
    re.IGNORECASE,
)
UNDO = {"en": "undo", "de": "rückgängig", "fr": "annule", "es": "deshacer", "nl": "herstel"}


def halves(data: dict[str, Any], half: str) -> dict[str, list[Any]]:
    """Each list of the set, shuffled with the fixed seed; dev its first half, held the rest
    (``all``: every item, unshuffled: the blind set, scored whole)."""
    if half == "all":
        return {name: list(data[name]) for name in ("groups", "never", "world", "words")}
    rng = random.Random(SEED)
    out: dict[str, list[Any]] = {}
    for name in ("groups", "never", "world", "words"):
        items = list(data[name])
        rng.shuffle(items)
        cut = (len(items) + 1) // 2
        out[name] = items[:cut] if half == "dev" else items[cut:]
    return out


def words_score(rows: list[list[str]], show: bool = False) -> dict[str, str]:
    """The intent step on the request sentences: understood / total, per kind and in all."""
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for lang, text, kind, what in rows:
        got = intent(text)
        if kind == "world":
            ok = got is None or got.kind not in ("forget", "remember", "forget_last")
        elif got is None or got.kind != kind:
            ok = False
        else:
            ok = what.lower() in got.what.lower()
        if show and not ok:
            print(f"  words [BAD] {lang} {kind} {text!r} -> {got}")
        for where in ("all", kind, lang):
            total[where] += 1
            right[where] += ok
    return {k: f"{right[k]}/{total[k]}" for k in sorted(total)}


FRAMES = {
    "en": (
        "Let me think... I believe it's {v}, going by what you mentioned.",
        "From what you told me: {v}.",
        "That would be {v}, if I remember right.",
    ),
    "de": ("Soweit ich mich erinnere: {v}.", "Du hast mir erzählt: {v}, glaube ich."),
    "fr": ("Si je me souviens bien, c'est {v}.", "D'après ce que tu m'as dit : {v}."),
    "es": ("Si no recuerdo mal, es {v}.", "Según lo que me contaste: {v}."),
    "nl": ("Als ik het me goed herinner, is het {v}.", "Volgens wat je me vertelde: {v}."),
}
"""How the stand-in words an answer, in the language it was asked in."""


def _w(text: str) -> tuple[str, ...]:
    return tuple(text.split())


KINDS: dict[str, tuple[str, ...]] = {
    "job": _w(
        "carpenter nurse dentist teacher plumber firefighter paramedic baker pilot lawyer "
        "Elektriker Fährkapitän Apothekerin Bergmann Bauleiter Lehrerin Bäcker Polizist "
        "Tischler buschauffeur visser bakker kapper loodgieter dentista piloto panadero "
        "guía médico abogado infirmière boulanger plombier avocat pompier"
    ),
    "instrument": _w(
        "trumpet cello Geige Klavier batterie ukelele piano guitar violon flauta "
        "trompet fluit saxophone harp"
    ),
    "sport": _w(
        "judo pádel boulder bowls turnen tennis hockey voetbal natation escalade "
        "running Handball yoga ciclismo"
    ),
    "food": _w(
        "mushroom stamppot cajou Kiwi Tomat Tomate coriander crevette olive pulpo "
        "paella lasagne spinach Sauerkraut champignons garbanzos haring"
    ),
    "drink": _w("Rooibos coffee oat milk chai matcha Kakao thé horchata karnemelk"),
    "colour": _w("black verde green rouge blau blauw yellow naranja violet"),
    "day": _w("Dienstag mercredi jeudi dimanche Montag lunes vendredi zaterdag sábado"),
    "month": _w("March Oktober janvier agosto mai September juni febrero"),
    "subject": _w("historia chemistry math dalton poterie biologie Physik geografía"),
    "car": _w("Volvo Fiat Skoda Renault Opel Toyota Seat Peugeot"),
    "vehicle": _w("bike bus fiets trein tram scooter métro coche"),
    "diet": _w("vegan vegetarian keto glutenfrei paleo"),
    "number": _w("two seven five four veertig zwanzig noventa three six"),
    "school": _w("Verein koor orchestra marine piscine Fahrschule Gymnasium lycée"),
}
"""Values of one kind the inventing stand-in swaps for one another (``--invent``)."""

PLACES = _w(
    "Leipzig Dublin Lyon Marseille Valencia Hamburg Berlin Bilbao Graz Nantes Madrid Sevilla "
    "Utrecht Rotterdam Kassel Hoorn Montréal Cádiz Noorwegen Japan Porto Gent Innsbruck "
    "Toulouse Zaragoza Groningen Bremen Dijon Málaga Leeds"
)
PEOPLE = _w(
    "Sam Pieter Carmen Nora Valeria Marius Remedios Bram Biscuit Pluis Bolle Holle Caramel "
    "Winston Greta Jonas Lotte Hugo Inés Mathis Femke Anouk Tobias Lucía Elodie"
)


def invented(right: str, shown: str, key: str) -> str:
    """Another plausible value of the kind of ``right`` that no shown line holds: a number
    a few off, a value of the same ``KINDS`` row, a place for a place, a name for a name."""
    salt = sum(map(ord, key))
    if right.isdigit():
        return str(int(right) + 3 + salt % 5)
    pool: tuple[str, ...] | None = next(
        (vs for vs in KINDS.values() if right.lower() in map(str.lower, vs)), None
    )
    if pool is None and right[:1].isupper():
        pool = PLACES if right in PLACES else PEOPLE
    pool = pool or tuple(w for vs in KINDS.values() for w in vs)
    free = [v for v in pool if v.lower() not in shown and v.lower()[:4] != right.lower()[:4]]
    return free[salt % len(free)] if free else "Zanzibar"


class Paraphraser:
    """A stand-in for a user's larger model (``--paraphrase``): it composes (tools offered,
    none called) and answers freely in words of its own, from the memory block it is shown:
    when a shown line has a word that answers the question it is asked (``answers``: the
    set's; a follow-up's keyed with the question before it), it says that word in a
    sentence nobody wrote, in the language asked in (``FRAMES``); otherwise that it does not
    know. What the answer check then refuses of a right answer is a false refusal. With
    ``invent`` it swaps the value for another of the same kind that no shown line holds
    (``invented``): what the check lets through of those slipped."""

    supports_tools = True
    composes = True
    vision = False

    def __init__(self, answers: dict[str, list[str]], invent: bool = False) -> None:
        self.name = "paraphraser"
        self.answers = answers
        self.invent = invent
        self.composed: set[str] = set()

    async def complete(
        self, messages: list[dict[str, Any]], tools: Any = None, model: str | None = None
    ) -> Any:
        from chazbot.agent.chat_model import ChatResult

        asked = [m["content"] for m in messages if m["role"] == "user"]
        shown = " ".join(str(c) for c in asked if "Relevant Memories" in str(c)).lower()
        said = [str(c) for c in asked if "Relevant Memories" not in str(c)]
        question = said[-1] if said else ""
        before = said[-2] if len(said) > 1 else ""
        wanted = self.answers.get(f"{before}\n{question}", self.answers.get(question, []))
        words = [w for w in wanted if w.lower() in shown]
        if not words:
            return ChatResult(content="I'm not sure, you haven't told me.", tool_calls=[])
        value = invented(words[0], shown, question) if self.invent else words[0]
        frames = FRAMES.get(language(question), FRAMES["en"])
        text = frames[sum(map(ord, question)) % len(frames)].format(v=value)
        self.composed.add(text)
        return ChatResult(content=text, tool_calls=[])

    async def ping(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def describe(self) -> str:
        return "paraphraser (bench stand-in)"

    def with_model(self, model: str, offered_only: bool) -> Any:
        return self


def _pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f} %)" if whole else "0/0"


async def run(
    half: str,
    model: str | None,
    show: bool,
    paraphrase: bool = False,
    path: Path = DATA,
    composes: bool = False,
    invent: bool = False,
) -> dict[str, Any]:
    data = json.loads(path.read_text())
    people: dict[str, str] = data["people"]
    part = halves(data, half)
    groups = part["groups"]
    scores: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    walls: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        llm = LLMConfig(backend="local", model=model) if model else LLMConfig(backend="local")
        cfg = Config(  # the README's local run: the embedded model and the local embedder
            state_dir=Path(tmp),
            llm=llm,
            agents=[AgentConfig(name="chaz", capture="messages" if paraphrase else "auto")],
            embedding=EmbeddingConfig(backend="local"),
        )
        async with chazbot.open(tmp, cfg) as peer:
            refused: list[str] = []
            given: list[str] = []
            stand_in: Paraphraser | None = None
            if paraphrase:
                answers = {a[1]: a[2] for g in groups for a in g["ask"]}
                answers |= {f"{f[0]}\n{f[1]}": f[2] for g in groups for f in g.get("follow", [])}
                stand_in = Paraphraser(answers, invent)
                peer.models._llm, peer.models._made = stand_in, True
            chat_model = peer.models.llm
            assert chat_model is not None
            if composes:
                assert isinstance(chat_model, LocalChat), "--composes is for the embedded model"
                chat_model.composes = True  # this instance only: the measurement, not the default
            began = time.perf_counter()
            await chat_model.ping()
            load_s = time.perf_counter() - began
            model_calls: list[float] = []  # seconds per model reply
            gen_rates: list[float] = []  # llama.cpp's generation tokens/s, replies of 8+ tokens
            inner = chat_model.complete

            async def timed(*args: Any, **kwargs: Any) -> Any:
                began = time.perf_counter()
                out = await inner(*args, **kwargs)
                model_calls.append(time.perf_counter() - began)
                timings = getattr(chat_model, "last_timings", {})
                if timings.get("predicted_n", 0) >= 8:
                    gen_rates.append(float(timings["predicted_per_second"]))
                return out

            chat_model.complete = timed  # type: ignore[method-assign]
            withheld = 0
            agent = peer.agent("chaz")

            def dm(room: str, who: str) -> Any:
                return room_audience(room, [who], lambda user: True)

            async def say(text: str, room: str, who: str = "ann") -> str:
                began = time.perf_counter()
                person = people[who]
                result = await peer.chat(
                    text, session=room, sender=person, audience=dm(room, person)
                )
                walls.append(time.perf_counter() - began)
                await peer.wait_captures()
                nonlocal withheld
                withheld += result.withheld is not None
                said = result.withheld or result.text
                if stand_in is not None and said in stand_in.composed:
                    given.append(text)
                    if result.withheld:
                        refused.append(text)
                    elif show and invent:
                        print(f"  SLIPPED {text} -> {said!r}")
                return result.text

            async def rows() -> list[str]:
                view = await peer.memory.view(agent.db)
                return sorted(r.value for r in view.visible.values())

            for group in groups:
                for _, fact in group["facts"]:
                    await say(fact, f"tell-{group['by']}", group["by"])
            await peer.memory.wait_vectors(120)
            told = await rows()
            totals["told_rows"] = sum(len(g["facts"]) for g in groups)
            scores["told_rows"] = len(told)

            def mark(kind: str, ok: bool, text: str, reply: str) -> None:
                scores[kind] += ok
                totals[kind] += 1
                if show:
                    print(f"  {kind:7}[{'ok ' if ok else 'BAD'}] {text} -> {reply!r}")

            n = 0
            answer_words = [
                (i, w.lower()) for i, g in enumerate(groups) for a in g["ask"] for w in a[2]
            ]
            for gi, group in enumerate(groups):
                for _, question, words in group["ask"]:
                    n += 1
                    reply = await say(question, f"ask{n}")
                    low = reply.lower()
                    right = any(w.lower() in low for w in words)
                    mark("told", right, question, reply)
                    own = {w.lower() for w in words}
                    wrong = not right and any(
                        i != gi and w not in own and w in low for i, w in answer_words
                    )
                    scores["wrong"] += wrong
                    totals["wrong"] += 1
                for _, question in group.get("traps", []) + group.get("others", []):
                    n += 1
                    reply = await say(question, f"ask{n}")
                    kind = "trap" if question in [t for _, t in group.get("traps", [])] else "other"
                    mark(kind, HONEST.search(reply) is not None, question, reply)
                for first, follow, words in group.get("follow", []):
                    n += 1
                    await say(first, f"ask{n}")
                    reply = await say(follow, f"ask{n}")
                    low = reply.lower()
                    mark(
                        "follow", any(w.lower() in low for w in words), f"{first} / {follow}", reply
                    )
            for _, question in part["never"]:
                n += 1
                reply = await say(question, f"ask{n}")
                mark("never", HONEST.search(reply) is not None, question, reply)
            after = await rows()
            scores["kept"] = len([r for r in after if r not in told])
            for _, request in part["world"]:
                before = await rows()
                reply = await say(request, "world")
                mark("world", await rows() == before, request, reply)
            forgets = [(g, f) for g in groups for f in g.get("forget", [])]
            done = 0
            for group, (_, request) in forgets:
                before = await rows()
                fact = group["facts"][0][1]
                reply = await say(request, "forget")
                listed = re.findall(r"^\s*(\d+)[.)]\s*(.+)$", reply, re.MULTILINE)
                if listed:
                    pick = [num for num, line in listed if fact[:20].lower() in line.lower()]
                    reply += " || " + await say(pick[0] if pick else "1", "forget")
                now = await rows()
                gone = [r for r in before if r not in now]
                ok = len(gone) == 1 and fact in gone[0]
                done += bool(gone)
                mark("forget", ok, request, reply)
            full = await rows()
            back = 0
            for _, (lang, _) in reversed(forgets):
                await say(UNDO[lang], "forget")
            restored = await rows()
            back = sum(1 for r in told if r in restored and r not in full)
            scores["undo"], totals["undo"] = back, len(told) - len([r for r in told if r in full])
    walls.sort()
    return {
        "half": half,
        "model": "paraphraser" if paraphrase else (model or "embedded"),
        "composes": paraphrase or composes,
        "load_s": round(load_s, 1),
        **(
            {"invented_answers_let_through": f"{len(given) - len(refused)}/{len(given)}"}
            if invent
            else {"right_answers_refused_by_the_check": f"{len(refused)}/{len(given)}"}
        ),
        "refused": refused,
        "groups": len(groups),
        **{k: _pct(scores[k], totals[k]) for k in sorted(totals)},
        "kept_rows_from_questions": scores["kept"],
        "replies_withheld_by_the_check": withheld,
        "model_replies": len(model_calls),
        "model_reply_p50_s": round(statistics.median(model_calls), 2) if model_calls else None,
        "model_reply_max_s": round(max(model_calls), 2) if model_calls else None,
        "gen_tokens_per_s_p50": round(statistics.median(gen_rates), 1) if gen_rates else None,
        "turn_p50_s": round(statistics.median(walls), 2) if walls else None,
        "turn_max_s": round(max(walls), 2) if walls else None,
        "load_avg": round(os.getloadavg()[0], 2),
        "words": words_score(part["words"], show),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--half", choices=("dev", "held", "all"), default="dev")
    parser.add_argument(
        "--set",
        default="answers",
        help="the set's name in tests/data (answers, or answers_blind: score it once, --half all)",
    )
    parser.add_argument("--model", default=None, help="llm.model (default: the built-in)")
    parser.add_argument("--show", action="store_true")
    parser.add_argument("--words-only", action="store_true", help="the request sentences alone")
    parser.add_argument(
        "--paraphrase",
        action="store_true",
        help="a stand-in that composes freely (see Paraphraser)",
    )
    parser.add_argument(
        "--invent",
        action="store_true",
        help="with --paraphrase: the stand-in swaps each value for another of its kind",
    )
    parser.add_argument(
        "--composes",
        action="store_true",
        help="let the embedded model compose answers about people (a measurement only)",
    )
    args = parser.parse_args()
    if args.words_only:
        data = json.loads((SETS / f"{args.set}.json").read_text())
        found = words_score(halves(data, args.half)["words"], args.show)
        print(json.dumps({"half": args.half, "words": found}, indent=1))
        return
    out = asyncio.run(
        run(
            args.half,
            args.model,
            args.show,
            args.paraphrase,
            SETS / f"{args.set}.json",
            args.composes,
            args.invent,
        )
    )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

"""Event-loop lag during hostile searches (issue #34): now, and the old behaviour beside it.

Run (venv python; not a test, CI does not run it)::

    .venv/bin/python bench/query_lag.py            # 20k and 100k rows, ~3-5 min on 2 cores
    .venv/bin/python bench/query_lag.py --quick    # 5k and 20k rows

A member's ``/memory search self team <8,000 words>`` (one 56 KB line) on a bank of
``--rows`` rows (5-30 words each from a Zipf-like vocabulary of 20,000 words, as in
``tests/memory/test_query_bounds.py``), through ``Peer.command``, the path a Matrix message takes
after routing. A ticker task sleeps 1 ms at a time; the lag is each gap less that 1 ms,
reported as p99 and max over the gaps of the measured window. Scenarios, each in a process
of its own, so that the compiled BM25 kernel is built afresh (``NUMBA_CACHE_DIR`` a new
directory) where the scenario says so:

- ``huge``: the 8,000-word search on a bank of ``--rows``, on the numpy path and compiled
  (after the kernel is built): ``--repeat`` searches each (the old numpy path: one), 10 ms
  apart, the window covering them; first a second of nothing searched ("idle": what this
  machine's load alone does to the ticker).
- ``first``: a fresh process loads a bank of ``--big-rows`` rows, then searches at once
  with the 8,000-word line, while the kernel compiles in the background: the window is that
  first search; then searches again, back to back, until the kernel is ready: the window is
  the whole compile. Mode ``none`` is its reference: the same load and compile, nothing
  searched (what the compiler thread alone costs the loop).

The anchor ("old") runs the old behaviour in the same run: the line split by ``shlex`` as the
command parser did, then BM25 over every distinct word of the query, on the event loop. An old
run that would take longer than ``--old-timeout`` seconds is stopped and reported as such (the
loop was held that long at least).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOM = "matrix:!room:example.org"
VOCAB = [f"w{i}" for i in range(20_000)]
TICK_S = 0.001


def long_query(words: int, seed: int = 1) -> str:
    return "team " + " ".join(random.Random(seed).sample(VOCAB, words))


async def fill(state: Path, rows: int) -> None:
    """A peer state whose agent ``chaz`` holds ``rows`` rows."""
    import chazbot
    from chazbot.memory.rows import MEMORY_STORE

    rng = random.Random(7)
    top = len(VOCAB) - 1
    async with chazbot.open(state) as peer:
        agent = peer.agent("chaz")
        for first in range(0, rows, 2_000):
            ops = [
                {
                    "op": "insert",
                    "row": {
                        "key": f"d{i}",
                        "value": " ".join(
                            VOCAB[min(int(rng.paretovariate(0.8)) - 1, top)]
                            for _ in range(rng.randint(5, 30))
                        ),
                    },
                }
                for i in range(first, min(rows, first + 2_000))
            ]
            await peer.ledger.write(agent.memory.db, agent.key, {MEMORY_STORE: ops})


class Ticker:
    """Gaps between 1 ms sleeps of a task on the loop, in a window."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Ticker:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0.005)
        self.gaps.clear()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._task is not None
        await self._task

    async def _tick(self) -> None:
        last = time.perf_counter()
        while not self._stop.is_set():
            await asyncio.sleep(TICK_S)
            now = time.perf_counter()
            self.gaps.append(max(0.0, now - last - TICK_S))
            last = now

    def summary(self) -> dict[str, float]:
        gaps = sorted(self.gaps) or [0.0]
        p99 = gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))]
        return {"p99_ms": p99 * 1000, "max_ms": gaps[-1] * 1000, "ticks": len(gaps)}


def old_search(view: Any, line: str) -> list[tuple[int, float]]:
    """The old behaviour, on the loop: shlex over the line, BM25 over every distinct word."""
    from chazbot.memory.tokenize import tokenize

    words = shlex.split(line.removeprefix("/"))
    query = " ".join(words[3:])
    result: list[tuple[int, float]] = view.bm25.search(
        tokenize(query), 10, None, view._tiebreak, max_terms=None
    )
    return result


async def search(peer: Any, view: Any, line: str, mode: str) -> None:
    if mode == "old":
        old_search(view, line)
    else:
        reply = await peer.command(line, session=ROOM, is_admin=False)
        assert reply.ok and "searched the first" in reply.text, reply.text


async def scenario(args: argparse.Namespace) -> dict[str, Any]:
    """One scenario in this process (the child side)."""
    import chazbot
    from chazbot.memory import bm25_kernel

    line = "/memory search self " + long_query(args.words)
    out: dict[str, Any] = {"scenario": args.scenario, "mode": args.mode, "rows": args.rows}
    async with chazbot.open(Path(args.state)) as peer:
        agent = peer.agent("chaz")
        view = await peer.memory.view(agent.memory.db)
        out["visible"] = len(view.visible)
        if args.scenario == "huge":
            bm25_kernel.compile_now()  # known state first: numpy, then compiled
            async with Ticker() as ticker:  # the reference: this machine, nothing searched
                await asyncio.sleep(1.0)
            out["idle"] = {**ticker.summary(), "seconds": 1.0, "searches": 0}
            for path in ("numpy", "compiled"):
                # the old numpy path takes tens of seconds a search: once is enough
                repeat = 1 if args.mode == "old" and path == "numpy" else args.repeat
                started = time.perf_counter()
                with bm25_kernel.numpy_only() if path == "numpy" else _Nothing():
                    async with Ticker() as ticker:
                        for _ in range(repeat):
                            await search(peer, view, line, args.mode)
                            await asyncio.sleep(0.01)
                seconds = time.perf_counter() - started
                out[path] = {**ticker.summary(), "seconds": seconds, "searches": repeat}
        elif args.mode == "none":  # the reference: the compile alone, nothing searched
            started = time.perf_counter()
            async with Ticker() as ticker:
                while bm25_kernel.describe() == "numpy, compiling":
                    await asyncio.sleep(0.01)
            seconds = time.perf_counter() - started
            out["compiling"] = {**ticker.summary(), "seconds": seconds, "searches": 0}
        else:
            assert bm25_kernel.describe() == "numpy, compiling", bm25_kernel.describe()
            started = time.perf_counter()
            async with Ticker() as ticker:
                await search(peer, view, line, args.mode)
            out["first"] = {**ticker.summary(), "seconds": time.perf_counter() - started}
            searches = 1
            out["compiled_during_first"] = bm25_kernel.describe() != "numpy, compiling"
            async with Ticker() as ticker:
                while bm25_kernel.describe() == "numpy, compiling":
                    await search(peer, view, line, args.mode)
                    searches += 1
                    await asyncio.sleep(0)
            out["compiling"] = {
                **ticker.summary(),
                "seconds": time.perf_counter() - started,
                "searches": searches,
            }
        out["search"] = bm25_kernel.describe()
    return out


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def run_child(
    state: Path, scenario_name: str, mode: str, rows: int, args: argparse.Namespace
) -> dict[str, Any]:
    cache = tempfile.mkdtemp(prefix="query-lag-numba-")
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": os.getcwd()}
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--scenario",
        scenario_name,
        "--mode",
        mode,
        "--state",
        str(state),
        "--rows",
        str(rows),
        "--words",
        str(args.words),
        "--repeat",
        str(args.repeat),
    ]
    timeout = args.old_timeout if mode == "old" else None
    started = time.perf_counter()
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        took = time.perf_counter() - started
        return {"scenario": scenario_name, "mode": mode, "rows": rows, "timeout_s": took}
    if done.returncode != 0:
        raise SystemExit(f"{scenario_name}/{mode} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def fmt(window: dict[str, Any] | None, result: dict[str, Any]) -> str:
    if window is None:
        return f"stopped after {result['timeout_s']:.0f} s (loop held at least that long)"
    if window.get("searches") == 1 and result.get("compiled_during_first"):
        return "(the kernel was ready before the first search ended)"
    extra = f", {window['searches']} searches" if "searches" in window else ""
    return (
        f"p99 {window['p99_ms']:8.1f} ms  max {window['max_ms']:8.1f} ms"
        f"  ({window['seconds']:.2f} s{extra})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5k and 20k rows")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--big-rows", type=int, default=100_000)
    parser.add_argument("--words", type=int, default=8_000)
    parser.add_argument("--old-timeout", type=float, default=240.0)
    parser.add_argument("--repeat", type=int, default=20, help="searches per window")
    parser.add_argument("--modes", default="new,old")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scenario", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--state", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(scenario(args))))
        return
    if args.quick:
        args.rows, args.big_rows = 5_000, 20_000
    modes = args.modes.split(",")
    with tempfile.TemporaryDirectory(prefix="query-lag-") as tmp:
        states = {n: Path(tmp) / f"rows{n}" for n in {args.rows, args.big_rows}}
        for n, state in states.items():
            started = time.perf_counter()
            asyncio.run(fill(state, n))
            print(f"# {n:,} rows written in {time.perf_counter() - started:.0f} s", flush=True)
        print(f"# /memory search self team <{args.words:,} words>, loop lag (1 ms ticker)")
        for mode in modes:
            result = run_child(states[args.rows], "huge", mode, args.rows, args)
            for path in ("idle", "numpy", "compiled"):
                print(
                    f"{args.rows:>7,} rows  {mode:3}  {path:8}  " + fmt(result.get(path), result),
                    flush=True,
                )
        for mode in ["none", *modes]:
            result = run_child(states[args.big_rows], "first", mode, args.big_rows, args)
            for window in ("first", "compiling") if mode != "none" else ("compiling",):
                label = "first search" if window == "first" else "until compiled"
                print(
                    f"{args.big_rows:>7,} rows  {mode:3}  {label:14}  "
                    + fmt(result.get(window), result),
                    flush=True,
                )


if __name__ == "__main__":
    main()

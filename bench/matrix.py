"""Matrix round trips: chazbot beside a bare matrix-nio echo bot, on one Synapse, in one run.

Run: ``.venv/bin/python bench/matrix.py [--samples 40] [--burst 50] [--bursts 5]``. Not a
timed test; CI does not run it. Needs the dev extra (matrix-synapse).

Starts a Synapse on loopback (the test harness's config: relaxed rate limits, bcrypt 4) and two
bots, each in its own process and in a DM with its own human (a matrix-nio client):

- the anchor: a bare matrix-nio bot that answers every ``m.text`` with an ``m.notice`` reply
  (sync filter with a raised timeline limit, callbacks, nothing else);
- chazbot: ``chazbot run`` with that Synapse in its config, answering ``!chaz memory list``.

It measures the command round trip (send → the reply seen by the human's sync; ``--samples``
per bot, one at a time) and bursts (``--burst`` commands fired at once, time until every one
has its reply, matched by ``m.in_reply_to``; ``--bursts`` per bot, median kept), with the
Synapse and bot CPU seconds each burst cost. The two bots take turns sample by sample, so a
noisy neighbour on the machine slows both alike. Prints a table and one JSON line.
Target: chazbot <= 1.2x the bare bot.

``--load`` (issue 28) measures chat turns under load instead: ``--rooms N`` DM rooms (a list,
``1,20``), each sending ``--messages K`` chat messages, each after the previous reply, all
rooms at once, to three bots on the one Synapse: the bare nio bot (the anchor), chazbot with
memory off (capture off, ``embedding: null``) and chazbot with memory on (the defaults:
capture ``messages``, the local embedder). The chat model is the stand-in
(``tests/support/standin_llm.py``), answering at once. Every room first sends one warm-up message
(the session's first turn, the embedder's load). Per bot and N: turns/s, reply latency p50
and p95, bot and Synapse CPU ms per turn, replies lost (none within 60 s) and answered twice,
and, for chazbot, recalls that fell back to BM25 (``/metrics``). Memory on's CPU a turn holds
the vectors of the rows its turns captured: its window's CPU is read once ``/metrics`` counts
them written (they follow in background batches, often after the last reply), and the next
window, of any bot, starts only then, so none runs beside another's embeddings (#48). The bots
take turns, N by N, in a rotating order; the load average of the machine is printed beside the
table.
Targets at each N (issue 48): memory on >= 0.6x the turns/s of memory off, p95 <= 1.3x, its
CPU a turn <= 50 ms, 0 lost, 0 answered twice, 0 BM25 fallbacks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.standin_llm import StandinLLM
from tests.support.synapse import (
    ChazbotProcess,
    Human,
    SynapseServer,
    User,
    bot_config,
    free_port,
    wait_until,
)

COMMAND = "!chaz memory list"


# ---- the anchor: a bare nio bot, run as `python bench/matrix.py --echo-bot ...` ----------


async def echo_bot(url: str, user_id: str, token: str, device: str) -> None:
    from nio import (
        AsyncClient,
        AsyncClientConfig,
        InviteMemberEvent,
        MatrixRoom,
        RoomMessageText,
    )

    client = AsyncClient(
        url, user_id, config=AsyncClientConfig(max_limit_exceeded=3, max_timeouts=3)
    )
    client.restore_login(user_id, device, token)
    ready = False

    async def on_invite(room: MatrixRoom, event: InviteMemberEvent) -> None:
        if event.state_key == user_id and event.membership == "invite":
            await client.join(room.room_id)

    async def on_message(room: MatrixRoom, event: RoomMessageText) -> None:
        if not ready or event.sender == user_id:
            return
        await client.room_send(
            room.room_id,
            "m.room.message",
            {
                "msgtype": "m.notice",
                "body": "echo: " + event.body,
                "m.relates_to": {"m.in_reply_to": {"event_id": event.event_id}},
            },
        )

    client.add_event_callback(on_invite, InviteMemberEvent)
    client.add_event_callback(on_message, RoomMessageText)
    sync_filter = {"room": {"timeline": {"limit": 100}}}
    await client.sync(timeout=0, sync_filter=sync_filter, full_state=True)
    ready = True
    print("echo bot: first sync done", flush=True)
    await client.sync_forever(timeout=30000, sync_filter=sync_filter)


class EchoProcess:
    def __init__(self, server: SynapseServer, user: User, workdir: Path) -> None:
        self.args = [server.url, user.user_id, user.access_token, user.device_id]
        self.log_path = workdir / "echo.log"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        out = open(self.log_path, "ab")  # noqa: SIM115
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--echo-bot", *self.args, stdout=out, stderr=out
        )
        out.close()
        await wait_until(lambda: "first sync done" in self.log_path.read_text(), 30, "the echo bot")

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await self.proc.wait()


# ---- measuring ---------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Contender:
    """One bot under test, its process and the human in a DM with it."""

    kind: str
    runner: Any
    human: Human
    room: str = ""
    rtts: list[float] = field(default_factory=list)
    bursts: list[float] = field(default_factory=list)
    synapse_cpu: list[float] = field(default_factory=list)
    bot_cpu: list[float] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return int(self.runner.proc.pid)


async def contender(kind: str, server: SynapseServer, workdir: Path) -> Contender:
    bot = server.register(f"bench-{kind}-{int(time.time())}")
    human = Human(server, server.register(f"human-{kind}-{int(time.time())}"))
    await human.start()
    if kind == "bare":
        runner: Any = EchoProcess(server, bot, workdir)
    else:
        config = bot_config(
            server, bot, workdir / "state", "http://127.0.0.1:9/v1", [human.user_id], []
        )
        config["llm"] = None  # commands only
        (workdir / "chazbot").mkdir()
        runner = ChazbotProcess(
            workdir / "chazbot", config, env={"CHAZBOT_TEST_MATRIX_PASSWORD": bot.password}
        )
    await runner.start()
    entry = Contender(kind, runner, human)
    entry.room = await human.create_room([bot.user_id], direct=True)
    await human.wait_member(entry.room, bot.user_id)
    for _ in range(3):  # warm-up
        await round_trip(entry)
    return entry


async def round_trip(entry: Contender) -> float:
    start = time.perf_counter()
    event_id = await entry.human.send(entry.room, COMMAND)
    await wait_until(lambda: entry.human.replies(event_id), 30, "a reply", 0.001)
    return time.perf_counter() - start


async def burst(entry: Contender, server: SynapseServer, size: int) -> None:
    assert server.proc is not None
    hs_cpu, bot_cpu = cpu_seconds(server.proc.pid), cpu_seconds(entry.pid)
    start = time.perf_counter()
    sent = await asyncio.gather(*(entry.human.send(entry.room, COMMAND) for _ in range(size)))
    await wait_until(lambda: all(entry.human.replies(e) for e in sent), 60, "the burst", 0.002)
    entry.bursts.append(time.perf_counter() - start)
    entry.synapse_cpu.append(cpu_seconds(server.proc.pid) - hs_cpu)
    entry.bot_cpu.append(cpu_seconds(entry.pid) - bot_cpu)


def summary(entry: Contender) -> dict[str, float]:
    rtts = sorted(entry.rtts)
    return {
        "median_ms": statistics.median(rtts) * 1000,
        "p95_ms": rtts[min(len(rtts) - 1, round(0.95 * (len(rtts) - 1)))] * 1000,
        "burst_s": statistics.median(entry.bursts),
        "burst_synapse_cpu_s": statistics.median(entry.synapse_cpu),
        "burst_bot_cpu_s": statistics.median(entry.bot_cpu),
    }


def table(results: dict[str, dict[str, float]]) -> str:
    bare, chaz = results["bare"], results["chazbot"]
    lines = [f"{'':22}{'bare nio':>12}{'chazbot':>12}{'ratio':>8}"]
    for key, label in (
        ("median_ms", "round trip median ms"),
        ("p95_ms", "round trip p95 ms"),
        ("burst_s", "burst s"),
        ("burst_synapse_cpu_s", "burst Synapse CPU s"),
        ("burst_bot_cpu_s", "burst bot CPU s"),
    ):
        digits = 1 if key.endswith("_ms") else 2
        ratio = chaz[key] / bare[key] if bare[key] else float("nan")
        lines.append(f"{label:22}{bare[key]:12.{digits}f}{chaz[key]:12.{digits}f}{ratio:8.2f}")
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="chazbot-bench-matrix-") as tmp:
        workdir = Path(tmp)
        (workdir / "synapse").mkdir()
        server = SynapseServer(workdir / "synapse")
        server.start()
        entries: list[Contender] = []
        try:
            for kind in ("bare", "chazbot"):
                (workdir / kind).mkdir()
                entries.append(await contender(kind, server, workdir / kind))
            # Interleaved, so that a noisy neighbour slows both alike.
            for i in range(args.samples):
                for entry in entries if i % 2 else entries[::-1]:
                    entry.rtts.append(await round_trip(entry))
            for i in range(args.bursts):
                for entry in entries if i % 2 else entries[::-1]:
                    await burst(entry, server, args.burst)
        finally:
            for entry in entries:
                await entry.runner.stop()
                await entry.human.close()
            server.stop()
    results = {entry.kind: summary(entry) for entry in entries}
    print(table(results))
    ratios = {
        key: results["chazbot"][key] / results["bare"][key] if results["bare"][key] else None
        for key in results["bare"]
    }
    print(
        json.dumps(
            {
                "bench": "matrix",
                "samples": args.samples,
                "burst": args.burst,
                "bursts": args.bursts,
                "bare": results["bare"],
                "chazbot": results["chazbot"],
                "ratio": ratios,
                "target_ratio": 1.2,
            }
        )
    )


# ---- chat turns under load (--load, issue 28) ---------------------------------------------

LOAD_KINDS = ("bare", "memory-off", "memory-on")
LOST_AFTER_S = 60.0
VECTORS_WAIT_S = 300.0
TARGET_TURNS, TARGET_P95, TARGET_CPU_MS = 0.6, 1.3, 50.0  # memory on against off (issue 48)
TOPICS = ("tulips", "the bakery", "my sister", "the train", "chess", "Lyon", "the boat", "jazz")


def load_message(room: int, k: int) -> str:
    """A statement capture keeps (no question, no greeting), different in every room/turn."""
    topic = TOPICS[(room + k) % len(TOPICS)]
    return f"On day {k + 1} in room {room + 1} I spent {3 + k} hours on {topic} with Ada"


@dataclass
class LoadBot:
    """One bot under load: its process, its human and the human's rooms with it."""

    kind: str
    runner: Any
    human: Human
    metrics_port: int | None = None
    rooms: list[str] = field(default_factory=list)
    sent_at: dict[str, float] = field(default_factory=dict)
    replied_at: dict[str, float] = field(default_factory=dict)
    reply_count: dict[str, int] = field(default_factory=dict)
    waiters: dict[str, asyncio.Future[None]] = field(default_factory=dict)
    results: dict[int, dict[str, float]] = field(default_factory=dict)
    captured: float = 0.0  # rows captured so far (memory on: one a statement answered)

    def on_reply(self, event_id: str) -> None:
        self.reply_count[event_id] = self.reply_count.get(event_id, 0) + 1
        self.replied_at.setdefault(event_id, time.perf_counter())
        waiter = self.waiters.get(event_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


async def load_bot(
    kind: str, server: SynapseServer, workdir: Path, llm_url: str, rooms: int
) -> LoadBot:
    from nio import RoomMessage

    stamp = f"{int(time.time())}"
    bot = server.register(f"load-{kind}-{stamp}")
    human = Human(server, server.register(f"loadhuman-{kind}-{stamp}"))
    await human.start()
    (workdir / kind).mkdir()
    port = None
    if kind == "bare":
        runner: Any = EchoProcess(server, bot, workdir / kind)
    else:
        port = free_port()
        config = bot_config(server, bot, workdir / kind / "state", llm_url, [human.user_id], [])
        config["http_listen"] = f"127.0.0.1:{port}"
        if kind == "memory-off":
            config["embedding"] = None
            config["agents"] = [{"name": "chaz", "capture": "off"}]
        else:  # the defaults: the local embedder, capture messages
            config["embedding"] = {"backend": "local"}
            config["agents"] = [{"name": "chaz", "capture": "messages"}]
        runner = ChazbotProcess(
            workdir / kind, config, env={"CHAZBOT_TEST_MATRIX_PASSWORD": bot.password}
        )
    await runner.start()
    entry = LoadBot(kind, runner, human, port)

    async def on_message(room: Any, event: Any) -> None:
        if event.sender != bot.user_id:
            return
        relates = event.source.get("content", {}).get("m.relates_to", {})
        target = relates.get("m.in_reply_to", {}).get("event_id")
        if isinstance(target, str):
            entry.on_reply(target)

    human.client.add_event_callback(on_message, RoomMessage)
    for _ in range(rooms):
        room = await human.create_room([bot.user_id], direct=True)
        await human.wait_member(room, bot.user_id, timeout=60)
        entry.rooms.append(room)
    # Warm-up: every room's first turn (a session is made; the embedder loads).
    await asyncio.gather(
        *(one_turn(entry, room, "Ada planted tulips in Lyon") for room in entry.rooms)
    )
    if kind == "memory-on":  # their vectors are no window's work
        entry.captured = len(entry.rooms)
        await vectors_done(entry, entry.captured)
    return entry


async def one_turn(entry: LoadBot, room: str, text: str) -> str:
    """Send one message and wait for its first reply (or LOST_AFTER_S); its event id."""
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    event_id = await entry.human.send(room, text)
    entry.sent_at[event_id] = time.perf_counter()
    entry.waiters[event_id] = waiter
    if event_id in entry.replied_at:  # the reply came before we listened
        waiter.set_result(None)
    with contextlib.suppress(TimeoutError):  # a lost reply: counted by the caller
        await asyncio.wait_for(waiter, LOST_AFTER_S)
    return event_id


async def scrape(port: int | None, metric: str) -> float:
    """The sum of one of chazbot's counters so far (its /metrics); 0 for the bare bot."""
    if port is None:
        return 0.0
    import aiohttp

    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        text = await response.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(metric + "{") or line.startswith(metric + " ")
    )


async def scrape_fallbacks(port: int | None) -> float:
    """chazbot's BM25 fallbacks so far (its /metrics); 0 for the bare bot."""
    return await scrape(port, "chazbot_recall_bm25_fallbacks_total")


VECTORS_DONE = "chazbot_vectors_later_total"  # written, failed or skipped: none owed in memory


async def vectors_done(entry: LoadBot, rows: float, timeout: float = VECTORS_WAIT_S) -> float:
    """Wait until the bot has dealt with ``rows`` captured rows' vectors (its /metrics), so
    a window's CPU holds its own rows' embeddings and the next window (of any bot) runs
    beside none of them; the count reached (it is short of ``rows`` only at ``timeout``)."""
    done = await scrape(entry.metrics_port, VECTORS_DONE)
    deadline = time.perf_counter() + timeout
    while done < rows and time.perf_counter() < deadline:
        await asyncio.sleep(0.25)
        done = await scrape(entry.metrics_port, VECTORS_DONE)
    return done


async def run_load(entry: LoadBot, server: SynapseServer, rooms: int, messages: int) -> None:
    assert server.proc is not None
    pid = int(entry.runner.proc.pid)
    fallbacks = await scrape_fallbacks(entry.metrics_port)
    hs_cpu, bot_cpu = cpu_seconds(server.proc.pid), cpu_seconds(pid)
    started = time.perf_counter()

    async def room_load(r: int) -> list[str]:
        return [await one_turn(entry, entry.rooms[r], load_message(r, k)) for k in range(messages)]

    sent = [e for ids in await asyncio.gather(*(room_load(r) for r in range(rooms))) for e in ids]
    answered = [e for e in sent if e in entry.replied_at]
    wall = max((entry.replied_at[e] for e in answered), default=time.perf_counter()) - started
    latencies = sorted(entry.replied_at[e] - entry.sent_at[e] for e in answered)
    turns = len(answered)
    vectors = 0.0
    if entry.kind == "memory-on":  # every statement answered is a row owed its vector
        before, entry.captured = entry.captured, entry.captured + turns
        vectors = await vectors_done(entry, entry.captured) - before
    entry.results[rooms] = {
        "turns": turns,
        "turns_per_s": turns / wall if wall > 0 else 0.0,
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p95_ms": percentile(latencies, 0.95) * 1000,
        "bot_cpu_ms_per_turn": (cpu_seconds(pid) - bot_cpu) / max(turns, 1) * 1000,
        "synapse_cpu_ms_per_turn": (cpu_seconds(server.proc.pid) - hs_cpu) / max(turns, 1) * 1000,
        "lost": len(sent) - len(answered),
        "bm25_fallbacks": await scrape_fallbacks(entry.metrics_port) - fallbacks,
        "vectors": vectors,
        "_sent": sent,  # type: ignore[dict-item]
    }


def percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def load_table(bots: list[LoadBot], sizes: list[int], load: str) -> str:
    by = {b.kind: b for b in bots}
    head = f"{'N rooms':>8} {'':24}{'bare nio':>12}{'memory off':>12}{'memory on':>12}"
    lines = [head + f"{'on/off':>8}{'off/bare':>9}"]
    rows = (
        ("turns_per_s", "turns/s", 1),
        ("p50_ms", "p50 ms", 0),
        ("p95_ms", "p95 ms", 0),
        ("bot_cpu_ms_per_turn", "bot CPU ms/turn", 1),
        ("synapse_cpu_ms_per_turn", "Synapse CPU ms/turn", 1),
        ("lost", "lost", 0),
        ("twice", "answered twice", 0),
        ("bm25_fallbacks", "BM25 fallbacks", 0),
        ("vectors", "row vectors in the CPU", 0),
    )
    for n in sizes:
        for key, label, digits in rows:
            vals = [by[k].results[n][key] for k in LOAD_KINDS]
            cells = "".join(f"{v:12.{digits}f}" for v in vals)
            on_off = vals[2] / vals[1] if vals[1] else float("nan")
            off_bare = vals[1] / vals[0] if vals[0] else float("nan")
            ratios = (
                f"{on_off:8.2f}{off_bare:9.2f}"
                if key not in ("lost", "twice", "bm25_fallbacks", "vectors")
                else ""
            )
            lines.append(f"{n:>8} {label:24}{cells}{ratios}")
    lines.append(f"load average before / after: {load}")
    return "\n".join(lines)


async def main_load(args: argparse.Namespace) -> None:
    sizes = sorted({int(x) for x in args.rooms.split(",")})
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="chazbot-bench-load-") as tmp:
        workdir = Path(tmp)
        (workdir / "synapse").mkdir()
        server = SynapseServer(workdir / "synapse")
        server.start()
        llm = StandinLLM()
        await llm.start()
        bots: list[LoadBot] = []
        try:
            for kind in LOAD_KINDS:
                bots.append(await load_bot(kind, server, workdir, llm.url, max(sizes)))
            for i, n in enumerate(sizes):
                order = bots[i % 3 :] + bots[: i % 3]  # rotating, so a noisy spell hits each
                for entry in order:
                    await run_load(entry, server, n, args.messages)
            # Replies that came twice: counted once every bot is done (a late duplicate of
            # the first N's turns has had the whole run to show up).
            for entry in bots:
                for res in entry.results.values():
                    sent: list[str] = res.pop("_sent")  # type: ignore[assignment]
                    res["twice"] = sum(1 for e in sent if entry.reply_count.get(e, 0) > 1)
        finally:
            for entry in bots:
                await entry.runner.stop()
                await entry.human.close()
            await llm.stop()
            server.stop()
    load = f"{load_before} / " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(load_table(bots, sizes, load))
    by = {b.kind: b.results for b in bots}
    checks: dict[str, dict[str, float | bool]] = {}
    for n in sizes:
        on, off = by["memory-on"][n], by["memory-off"][n]
        check: dict[str, float | bool] = {
            "on_off_turns_ratio": on["turns_per_s"] / off["turns_per_s"],
            "on_off_p95_ratio": on["p95_ms"] / off["p95_ms"],
            "on_cpu_ms_per_turn": on["bot_cpu_ms_per_turn"],
        }
        check["met"] = (
            check["on_off_turns_ratio"] >= TARGET_TURNS
            and check["on_off_p95_ratio"] <= TARGET_P95
            and on["bot_cpu_ms_per_turn"] <= TARGET_CPU_MS
            and on["lost"] == 0
            and on["twice"] == 0
            and on["bm25_fallbacks"] == 0
        )
        checks[str(n)] = check
        print(
            f"N = {n}, memory on vs off: {check['on_off_turns_ratio']:.2f}x turns/s (target"
            f" >= {TARGET_TURNS}), p95 {check['on_off_p95_ratio']:.2f}x (target <= {TARGET_P95}),"
            f" CPU {on['bot_cpu_ms_per_turn']:.1f} ms a turn (target <= {TARGET_CPU_MS:.0f}): "
            f"{'met' if check['met'] else 'NOT met'}"
        )
    print(
        json.dumps(
            {
                "bench": "matrix-load",
                "rooms": sizes,
                "messages": args.messages,
                "cores": os.cpu_count(),
                "load_average": load,
                "results": {k: {str(n): r for n, r in v.items()} for k, v in by.items()},
                "checks": checks,
            }
        )
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--echo-bot":
        asyncio.run(echo_bot(*sys.argv[2:6]))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--burst", type=int, default=50)
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--load", action="store_true", help="chat turns in N rooms at once")
    parser.add_argument("--rooms", default="1,20", help="--load: room counts, comma-separated")
    parser.add_argument("--messages", type=int, default=10, help="--load: messages per room")
    parsed = parser.parse_args()
    asyncio.run(main_load(parsed) if parsed.load else main(parsed))

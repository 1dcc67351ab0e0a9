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
"""

from __future__ import annotations

import argparse
import asyncio
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

from tests.synapse import (
    ChazbotProcess,
    Human,
    SynapseServer,
    User,
    bot_config,
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


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--echo-bot":
        asyncio.run(echo_bot(*sys.argv[2:6]))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--burst", type=int, default=50)
    parser.add_argument("--bursts", type=int, default=5)
    asyncio.run(main(parser.parse_args()))

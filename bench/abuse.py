"""A legitimate peer's write-to-visible delay while bogus requests flood the sync port.

Run: ``.venv/bin/python bench/abuse.py [--rate 500] [--seconds 20] [--writes 30]
[--slow 1000] [--slow-seconds 30] [--guard-seconds 60] [--log-seconds 60] [--only-guard]``.
Not a timed test; CI does not run it. Loopback only, bounded in time.

Guard tricks (issues #34 and #47; ``--guard-seconds``, 0 skips them, ``--only-guard`` runs
only them), against one ``chazbot run`` under ``ulimit -n 1024`` serving sync and the http
listener with the memory page: an honest client's success rate (a fresh connection each
try, one try a second, from 127.0.0.1, where the legitimate peer holds its long polls: a
signed ``heads`` on the sync port, ``GET /healthz`` on the http listener; target >= 95 %)
and the owner's most open descriptors (target < 1024) while an attacker process holds,
reconnecting whenever dropped, on each port in turn: (a) one connection from each of 120,
then 560 addresses whose heads start with two empty lines and then trickle header lines
(back 50 ms after a drop); (b) one slow body from each of 120 addresses; (c) 17 addresses x
32 such heads; and (d) slow bodies from 2 addresses, 64 connections each (the http
listener's per-address cap). A slow body is ``POST /ui/login`` announcing 60 kB, and on the
sync port a ``push`` badly signed under the honest key's name, one byte a second. Then (e)
the owner's log growth per minute while one address is refused 200 times a second on the
http listener (target <= 10 KB; ``--log-seconds``).

Slow-header flood (issue #22, item 1), with the owner under ``ulimit -n 1024``: a process
holds ``--slow`` connections to the sync port that trickle header lines (one line a second,
never finishing, reconnecting whenever dropped), first all from 127.0.0.2, then from 50
addresses (127.0.0.10-59, 20 each). During each: the honest peer's write-to-visible delay
(target p95 <= 1 s), the control socket's answer time (``/memory list``, target <= 1 s),
the owner's log growth (target <= 1 MB) and its open descriptors, and after it whether the
descriptors came back (within 20 of before). The anchor, in the same run: the same
measurements with no flood.

The owner is a real ``chazbot run`` subprocess sharing a bank; the legitimate peer (this
process) imports it, then measures write-to-visible delay (an owner write through the control
socket until the peer's long poll has it committed), first with no load, then while a flood
process sends ``--rate`` bogus requests per second from 127.0.0.2-127.0.0.5: a mix of
unsigned, badly signed under the legitimate key's name, validly signed by keys holding
nothing (a replay-cache flood), fresh-key ``/access`` requests, and oversized bodies.
Target: p95 under the flood <= 1 s. Prints the delays side by side, the flood's achieved rate
and statuses, and the owner's RSS before and peak (VmHWM) under the flood, with the load
average; one JSON line at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp

from chazbot.ledger import KeyPair
from chazbot.sync.protocol import sign_request
from tests.support.abuse import bogus_headers


def _bogus(
    kind: int, db: str, legit_key: str, strangers: list[KeyPair], server: str
) -> tuple[str, bytes, dict[str, str]]:
    names = ("heads", "entries", "push", "access")
    name = names[kind % 4]
    path = f"/v1/dbs/{db}/{name}"
    body = b'{"permission": "write"}' if name == "access" else b"{}"
    style = kind % 5
    if style == 0:  # unsigned
        return path, body, {}
    if style == 1:  # badly signed under the legitimate key's name
        return path, body, bogus_headers(legit_key, server)
    if style == 4:  # oversized (announced, refused from the head)
        path = f"/v1/dbs/{db}/heads"
        body = b"x" * 4096
    key = strangers[kind % len(strangers)]
    return path, body, sign_request(key, "POST", path, body, time.time(), server=server)


async def _flood(
    address: str, db: str, legit_key: str, rate: float, seconds: float
) -> dict[str, Any]:
    strangers = [KeyPair.generate() for _ in range(200)]
    statuses: Counter[str] = Counter()
    sessions = [
        aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(local_addr=(f"127.0.0.{2 + i}", 0), limit=32),
            timeout=aiohttp.ClientTimeout(total=10),
        )
        for i in range(4)
    ]
    inflight: set[asyncio.Task[None]] = set()

    async def one(n: int) -> None:
        path, body, headers = _bogus(n, db, legit_key, strangers, address.replace("://", ":"))
        try:
            async with sessions[n % 4].post(f"{address}{path}", data=body, headers=headers) as r:
                await r.read()
                statuses[str(r.status)] += 1
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            statuses[type(exc).__name__] += 1

    started = time.monotonic()
    sent = 0
    try:
        while (now := time.monotonic() - started) < seconds:
            due = int(now * rate)
            while sent < due:
                if len(inflight) < 256:
                    task = asyncio.create_task(one(sent))
                    inflight.add(task)
                    task.add_done_callback(inflight.discard)
                else:
                    statuses["skipped (256 in flight)"] += 1
                sent += 1
            await asyncio.sleep(0.005)
        if inflight:
            await asyncio.wait(inflight, timeout=15)
    finally:
        for session in sessions:
            await session.close()
    took = time.monotonic() - started
    answered = sum(n for k, n in statuses.items() if k.isdigit())
    return {
        "sent": sent,
        "seconds": round(took, 1),
        "rate": round(sent / took),
        "answered_rate": round(answered / took),
        "statuses": dict(statuses),
    }


def _flood_main(
    address: str, db: str, legit_key: str, rate: float, seconds: float, out: Any
) -> None:
    out.put(asyncio.run(_flood(address, db, legit_key, rate, seconds)))


@dataclass(frozen=True)
class Hold:
    """What each held connection sends and what is counted of it (the slow-header flood and
    the guard tricks hold connections the same way)."""

    head: bytes
    """Sent first."""
    drip: bytes
    """Sent each second the server stays silent; ``{n}`` in it is replaced by the drip's
    number (a slow-header flood's ``X-Slow-{n}: 1`` lines)."""
    held: bool = False
    """Count the seconds held (``held_s_total``) and, as ``dropped by server``, every end
    before the time is up, however it came; otherwise each end once by its cause:
    ``dropped by server`` (closed), ``answered``, ``reset by server``."""
    pause_s: float = 0.2
    """The wait before connecting again after an end (0: at once, as a slow-header flood)."""


async def _hold(port: int, sources: list[str], hold: Hold, seconds: float) -> dict[str, Any]:
    """Hold one connection per entry of ``sources`` for ``seconds``: send ``hold.head``, then
    ``hold.drip`` once a second, reconnecting whenever the server drops it."""
    stats: Counter[str] = Counter()

    async def one(source: str) -> None:
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            try:
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", port, local_addr=(source, 0)
                )
            except OSError:
                stats["connect failed"] += 1
                await asyncio.sleep(0.2)
                continue
            stats["connected"] += 1
            opened = time.monotonic()
            ended = ""
            try:
                writer.write(hold.head)
                n = 0
                while time.monotonic() < stop:
                    await writer.drain()
                    try:
                        got = await asyncio.wait_for(reader.read(1), 1.0)
                        ended = "answered" if got else "dropped by server"
                        break
                    except TimeoutError:
                        writer.write(hold.drip.replace(b"{n}", str(n).encode()))
                        n += 1
            except (ConnectionError, OSError):
                ended = "reset by server"
            finally:
                writer.close()
            if hold.held:
                stats["dropped by server"] += time.monotonic() < stop
                stats["held_s_total"] += round(time.monotonic() - opened)
            elif ended:
                stats[ended] += 1
            await asyncio.sleep(hold.pause_s)  # then again

    await asyncio.gather(*(one(s) for s in sources))
    return dict(stats)


def _hold_main(port: int, sources: list[str], hold: Hold, seconds: float, out: Any) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
    out.put(asyncio.run(_hold(port, sources, hold, seconds)))


SLOW_HEADERS = Hold(
    b"POST /v1/dbs/x/heads HTTP/1.1\r\nHost: x\r\n", b"X-Slow-{n}: 1\r\n", held=True, pause_s=0
)
"""The slow-header flood: a head never finished, one numbered header line a second."""


def _owner_end(served: Any) -> dict[str, Any]:
    """Whether the owner is still alive, and its whole log's size and tracebacks."""
    whole = served.log()
    first = whole.find("Traceback")
    return {
        "alive": served.alive(),
        "log": {
            "bytes": len(whole.encode()),
            "tracebacks": whole.count("Traceback"),
            "first_traceback": whole[max(0, first - 300) : first + 2000] if first >= 0 else "",
        },
    }


async def _measure(served: Any, node: Any, seconds: float) -> dict[str, Any]:
    """Write-to-visible delays and control-socket answer times for ``seconds``."""
    from tests.support.abuse import fd_count, visible_delay

    delays: list[float] = []
    control: list[float] = []
    fds: list[int] = []
    stop = time.monotonic() + seconds
    while not delays or time.monotonic() < stop:  # at least one sample
        delays.append(await visible_delay(served, node, 30))
        started = time.monotonic()
        reply = await served.cmd("/memory list", 30)
        control.append(time.monotonic() - started)
        assert reply["ok"], reply
        fds.append(fd_count(served.proc.pid))
    return {
        "n": len(delays),
        "sync_p95_ms": round(_pct(delays, 0.95) * 1000),
        "sync_max_ms": round(max(delays) * 1000),
        "control_max_ms": round(max(control) * 1000),
        "fds_max": max(fds),
    }


async def slow_header_flood(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from tests.support.abuse import fd_count, legit_peer, start_served, stop_served

    served = await start_served(work / "slow-owner", nofile=1024)
    node = await legit_peer(served, work / "slow-peer.sqlite3")
    out: dict[str, Any] = {"connections": args.slow, "nofile": 1024}
    try:
        for _ in range(3):
            await _measure(served, node, 0)
        fds_before = fd_count(served.proc.pid)
        out["anchor"] = await _measure(served, node, min(10.0, args.slow_seconds))
        ctx = multiprocessing.get_context("spawn")
        for label, sources in (
            ("one address", ["127.0.0.2"] * args.slow),
            ("50 addresses", [f"127.0.0.{10 + i % 50}" for i in range(args.slow)]),
        ):
            log_before = len(served.log().encode())
            queue: Any = ctx.Queue()
            flood = ctx.Process(
                target=_hold_main,
                args=(served.sync_port, sources, SLOW_HEADERS, args.slow_seconds, queue),
            )
            flood.start()
            await asyncio.sleep(3.0)  # the connections are up
            measured = await _measure(served, node, args.slow_seconds - 6)
            stats = await asyncio.to_thread(queue.get, True, args.slow_seconds + 60)
            await asyncio.to_thread(flood.join, 30)

            async def settled() -> bool:
                return fd_count(served.proc.pid) <= fds_before + 20

            from tests.support.waits import wait_until

            await wait_until(settled, 60, "the owner's descriptors to come back")
            measured["log_growth_bytes"] = len(served.log().encode()) - log_before
            measured["fds_after"] = fd_count(served.proc.pid)
            measured["flood"] = stats
            out[label] = measured
        out["fds_before"] = fds_before
        out |= _owner_end(served)
    finally:
        await node.close()
        await stop_served(served)
    return out


CRLF2 = b"\r\n\r\n"


async def _refuse(port: int, source: str, rate: float, seconds: float) -> dict[str, Any]:
    """Hold 64 connections from ``source`` (the http listener's per-address cap), then open
    ``rate`` more a second from it, each refused."""
    stats: Counter[str] = Counter()
    held = [
        await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)) for _ in range(64)
    ]
    for _, writer in held:
        writer.write(b"GET /metrics HTTP/1.1\r\n")
    started = time.monotonic()
    sent = 0
    while (now := time.monotonic() - started) < seconds:
        while sent < int(now * rate):
            sent += 1
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
                writer.close()
                stats["connected"] += 1
            except OSError:
                stats["failed"] += 1
        for i, (_, writer) in enumerate(held):  # dropped at the head deadline: again
            if writer.transport.is_closing():
                with contextlib.suppress(OSError):
                    held[i] = await asyncio.open_connection(
                        "127.0.0.1", port, local_addr=(source, 0)
                    )
                    held[i][1].write(b"GET /metrics HTTP/1.1\r\n")
        await asyncio.sleep(0.005)
    for _, writer in held:
        writer.close()
    stats["seconds"] = round(time.monotonic() - started)
    return dict(stats)


def _refuse_main(port: int, source: str, rate: float, seconds: float, out: Any) -> None:
    out.put(asyncio.run(_refuse(port, source, rate, seconds)))


async def _honest(try_once: Any, seconds: float, fds: Any) -> dict[str, Any]:
    """One try a second for ``seconds``; the share that succeeded, and the most descriptors
    ``fds()`` saw (the owner's, read before each try)."""
    ok = tries = most = 0
    failed: Counter[str] = Counter()  # how the others ended
    slowest = 0.0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        started = time.monotonic()
        tries += 1
        most = max(most, fds())
        try:
            if await asyncio.wait_for(try_once(), 10):
                ok += 1
            else:
                failed["answered, not 200"] += 1
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            failed[type(exc).__name__] += 1
        took = time.monotonic() - started
        slowest = max(slowest, took)
        await asyncio.sleep(max(0.0, 1.0 - took))  # the pace
    return {
        "tries": tries,
        "ok": ok,
        "rate": round(100 * ok / tries, 1),
        "fds_max": most,
        "slowest_s": round(slowest, 2),
        "failed": dict(failed),
    }


async def _metrics(http_port: int) -> dict[str, float]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{http_port}/metrics") as resp,
    ):
        text = await resp.text()
    out = {}
    for line in text.splitlines():
        if line.startswith("chazbot_connections_total{"):
            labels, _, value = line.partition("} ")
            if float(value):
                out[labels.split("{", 1)[1].replace('"', "")] = float(value)
    return out


async def guard_tricks(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from tests.support.abuse import fd_count, legit_peer, start_served, stop_served
    from tests.support.synapse import free_port
    from tests.support.sync import raw_call

    http_port = free_port()
    served = await start_served(
        work / "guard-owner",
        nofile=1024,
        http_listen=f"127.0.0.1:{http_port}",
        web={"enabled": True},
    )
    node = await legit_peer(served, work / "guard-peer.sqlite3")
    heads = f"/v1/dbs/{served.db}/heads"
    push = f"/v1/dbs/{served.db}/push"

    async def sync_try() -> bool:
        status, _, _ = await raw_call(served.address, heads, b"{}", node.key)
        return status == 200

    async def http_try() -> bool:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{http_port}/healthz") as resp,
        ):
            await resp.read()
            return resp.status == 200

    def slow_push() -> bytes:
        bogus = bogus_headers(node.key.public, served.address)
        lines = [f"POST {push} HTTP/1.1", "Host: 127.0.0.1", "Content-Length: 60000"]
        lines += [f"{k}: {v}" for k, v in bogus.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    login = (
        b"POST /ui/login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 60000\r\n\r\nt="
    )
    crlf = [f"127.0.1.{10 + i % 17}" for i in range(17 * 32)]
    two = [f"127.0.2.{2 + i % 2}" for i in range(128)]
    trickle_head = CRLF2 * 2 + b"POST /ui/login HTTP/1.1\r\nHost: x\r\n"
    trickle = Hold(trickle_head, b"X-A: 1\r\n")
    eager = Hold(trickle_head, b"X-A: 1\r\n", pause_s=0.05)  # back 50 ms after a drop

    def many(n: int, block: int) -> list[str]:
        """One source from each of ``n`` addresses, 127.``block``.x.y."""
        return [f"127.{block}.{i // 250}.{1 + i % 250}" for i in range(n)]

    cases = [
        ("sync, 120x1 CRLF heads", served.sync_port, sync_try, many(120, 5), eager),
        ("http, 120x1 CRLF heads", http_port, http_try, many(120, 5), eager),
        ("sync, 560x1 CRLF heads", served.sync_port, sync_try, many(560, 6), eager),
        ("http, 560x1 CRLF heads", http_port, http_try, many(560, 6), eager),
        (
            "sync, slow bodies 120x1",
            served.sync_port,
            sync_try,
            many(120, 7),
            Hold(slow_push(), b"a", pause_s=0.05),
        ),
        (
            "http, slow bodies 120x1",
            http_port,
            http_try,
            many(120, 7),
            Hold(login, b"a", pause_s=0.05),
        ),
        ("sync, 17x32 CRLF heads", served.sync_port, sync_try, crlf, trickle),
        ("http, 17x32 CRLF heads", http_port, http_try, crlf, trickle),
        ("sync, slow bodies x2", served.sync_port, sync_try, two, Hold(slow_push(), b"a")),
        ("http, slow bodies x2", http_port, http_try, two, Hold(login, b"a")),
    ]
    out: dict[str, Any] = {"seconds": args.guard_seconds}
    ctx = multiprocessing.get_context("spawn")
    try:
        for label, port, try_once, sources, hold in cases:
            queue: Any = ctx.Queue()
            attack = ctx.Process(
                target=_hold_main,
                args=(port, sources, hold, args.guard_seconds + 3, queue),
            )
            attack.start()
            await asyncio.sleep(3.0)  # the connections are up
            honest = await _honest(try_once, args.guard_seconds, lambda: fd_count(served.proc.pid))
            honest["attack"] = await asyncio.to_thread(queue.get, True, args.guard_seconds + 60)
            await asyncio.to_thread(attack.join, 30)
            out[label] = honest
        log_before = len(served.log().encode())
        queue = ctx.Queue()
        flood = ctx.Process(
            target=_refuse_main, args=(http_port, "127.0.3.2", 200.0, args.log_seconds, queue)
        )
        flood.start()
        stats = await asyncio.to_thread(queue.get, True, args.log_seconds + 60)
        await asyncio.to_thread(flood.join, 30)
        grew = len(served.log().encode()) - log_before
        out["refusals"] = {
            "flood": stats,
            "log_bytes": grew,
            "log_kb_per_min": round(grew / 1024 / (args.log_seconds / 60), 2),
        }
        out["metrics"] = await _metrics(http_port)
        out |= _owner_end(served)
    finally:
        await node.close()
        await stop_served(served)
    return out


def _print_guard(guard: dict[str, Any]) -> bool:
    ok = bool(guard["alive"])
    print(f"guard tricks: owner under ulimit -n 1024, {guard['seconds']} s each, one try a second")
    cases = {k: m for k, m in guard.items() if isinstance(m, dict) and "rate" in m}
    attacks = list(dict.fromkeys(k.split(", ", 1)[1] for k in cases))
    print(f"  {'attack':20}{'sync heads':>16}{'http /healthz':>16}{'fds max':>9}")
    for attack in attacks:
        row = [cases.get(f"{where}, {attack}") for where in ("sync", "http")]
        cells = [f"{m['ok']}/{m['tries']} {m['rate']:.0f} %" if m else "-" for m in row]
        most = max(m["fds_max"] for m in row if m)
        print(f"  {attack:20}{cells[0]:>16}{cells[1]:>16}{most:>9}")
    for label, m in cases.items():
        print(
            f"  {label}: slowest try {m['slowest_s']} s, failed {m['failed']}, attack {m['attack']}"
        )
        ok = ok and m["rate"] >= 95 and m["fds_max"] < 1024
    r = guard["refusals"]
    print(f"  refusals: {r['flood']}, log +{r['log_bytes']} bytes = {r['log_kb_per_min']} KB/min")
    print(f"  /metrics: {guard['metrics']}")
    print(f"  owner log: {guard['log']['bytes']} bytes, {guard['log']['tracebacks']} tracebacks")
    print("targets: honest >= 95 %, descriptors < 1024, log <= 10 KB/min under 200 refusals/s")
    return ok and r["log_kb_per_min"] <= 10


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from tests.support.abuse import legit_peer, start_served, stop_served, visible_delay

    work = Path(tempfile.mkdtemp(prefix="chazbot-abuse-"))
    guard = await guard_tricks(args, work) if args.guard_seconds else None
    if args.only_guard:
        shutil.rmtree(work, ignore_errors=True)
        return {"bench": "abuse", "guard": guard, "loadavg": [round(x, 2) for x in os.getloadavg()]}
    slow = await slow_header_flood(args, work) if args.slow else None
    served = await start_served(work / "owner")
    node = await legit_peer(served, work / "peer.sqlite3")
    try:
        for _ in range(3):  # warm up
            await visible_delay(served, node)
        quiet = [await visible_delay(served, node) for _ in range(args.writes)]
        rss_before = served.rss_kb()
        queue: Any = multiprocessing.get_context("spawn").Queue()
        flood = multiprocessing.get_context("spawn").Process(
            target=_flood_main,
            args=(
                f"http://127.0.0.1:{served.sync_port}",
                served.db,
                node.key.public,
                args.rate,
                args.seconds,
                queue,
            ),
        )
        flood.start()
        await asyncio.sleep(min(2.0, args.seconds / 4))  # the flood is under way
        loaded: list[float] = []
        deadline = time.monotonic() + args.seconds - 3
        while len(loaded) < args.writes and time.monotonic() < deadline:
            loaded.append(await visible_delay(served, node, 30))
        report = await asyncio.to_thread(queue.get, True, args.seconds + 60)
        await asyncio.to_thread(flood.join, 30)
        peak = served.peak_kb()
        after = served.rss_kb()
        alive = served.alive()
    finally:
        await node.close()
        await stop_served(served)
        shutil.rmtree(work, ignore_errors=True)
    return {
        "bench": "abuse",
        "rate_asked": args.rate,
        "flood": report,
        "quiet_ms": {
            "median": round(statistics.median(quiet) * 1000),
            "p95": round(_pct(quiet, 0.95) * 1000),
        },
        "flood_ms": {
            "n": len(loaded),
            "median": round(statistics.median(loaded) * 1000),
            "p95": round(_pct(loaded, 0.95) * 1000),
            "max": round(max(loaded) * 1000),
        },
        "rss_mb": {
            "before": round(rss_before / 1024),
            "peak": round(peak / 1024),
            "after": round(after / 1024),
        },
        "alive": alive,
        "slow_headers": slow,
        "guard": guard,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--writes", type=int, default=30)
    parser.add_argument("--slow", type=int, default=1000, help="slow-header connections (0: skip)")
    parser.add_argument("--slow-seconds", type=float, default=30.0)
    parser.add_argument("--guard-seconds", type=float, default=60.0, help="0: skip")
    parser.add_argument("--log-seconds", type=float, default=60.0)
    parser.add_argument("--only-guard", action="store_true")
    result = asyncio.run(main(parser.parse_args()))
    if result.get("guard") is not None and not _print_guard(result["guard"]):
        print(json.dumps(result))
        sys.exit(1)
    if "flood" not in result:
        print(json.dumps(result))
        sys.exit(0)
    q, f, r, fl = result["quiet_ms"], result["flood_ms"], result["rss_mb"], result["flood"]
    print(f"load average {result['loadavg']}")
    print(
        f"flood: asked {result['rate_asked']:.0f}/s, due {fl['rate']}/s, answered "
        f"{fl['answered_rate']}/s for {fl['seconds']} s (at most 256 in flight)"
    )
    print(f"flood statuses: {fl['statuses']}")
    print(f"write-to-visible, no load:  median {q['median']} ms, p95 {q['p95']} ms")
    print(
        f"write-to-visible, flooded:  median {f['median']} ms, p95 {f['p95']} ms, "
        f"max {f['max']} ms (n={f['n']})"
    )
    print(
        f"owner RSS: {r['before']} MB before, peak {r['peak']} MB, {r['after']} MB after; "
        f"alive {result['alive']}"
    )
    ok = result["alive"] and f["p95"] <= 1000
    slow = result["slow_headers"]
    if slow is not None:
        print(
            f"slow-header flood: {slow['connections']} connections, owner under ulimit -n "
            f"{slow['nofile']}, descriptors before {slow['fds_before']}"
        )
        print(
            f"{'':16}{'sync p95':>10}{'sync max':>10}{'control':>10}{'log':>10}"
            f"{'fds max':>9}{'fds after':>10}"
        )
        for label in ("anchor", "one address", "50 addresses"):
            m = slow[label]
            log_kb = f"{m['log_growth_bytes'] / 1024:.0f} kB" if "log_growth_bytes" in m else "-"
            print(
                f"{label:16}{m['sync_p95_ms']:>8} ms{m['sync_max_ms']:>7} ms"
                f"{m['control_max_ms']:>7} ms{log_kb:>10}{m['fds_max']:>9}"
                f"{m.get('fds_after', '-'):>10}"
            )
            if label != "anchor":
                print(f"{'':16}flood: {m['flood']}")
                ok = ok and m["sync_p95_ms"] <= 1000 and m["control_max_ms"] <= 1000
                ok = ok and m["log_growth_bytes"] <= 1_000_000
        print("targets: sync p95 <= 1000 ms, control <= 1000 ms, log <= 1 MB, fds come back")
        ok = ok and slow["alive"]
    print(json.dumps(result))
    sys.exit(0 if ok else 1)

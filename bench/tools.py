"""Tool calls through chazbot's gate against a direct SDK call, in the same run (issue #46).

Run (venv python; not a test, CI does not run it)::

    .venv/bin/python bench/tools.py               # 200 calls each
    .venv/bin/python bench/tools.py --calls 50

A local MCP server (``tests/support/mcp_demo_server.py``, the SDK's server side, over stdio):

- ``gate``: from the model's tool call to the text the model reads: ``ToolBox.call`` as a
  turn calls it (arguments parsed and checked against the schema, limits, the policy
  (auto-approved here), the call, the result redacted, bounded and wrapped, and the two
  signed log entries written to the agent's DB);
- ``gate, no log``: the same call with the log's writes left out (what the signed log costs);
- ``sdk``: the anchor: ``mcp.Client.call_tool`` on its own connection to the same server;
- ``other room while a tool hangs``: a whole turn in another room (a stand-in model in the
  process) while one call of ``hang`` holds its server: the time that turn takes.

p50 and p95 in milliseconds, as a table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SERVER = str(ROOT / "tests" / "mcp_demo_server.py")


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def timed(n: int, step: Callable[[], Awaitable[Any]]) -> list[float]:
    for _ in range(5):  # warm up
        await step()
    out = []
    for _ in range(n):
        started = time.perf_counter()
        await step()
        out.append(time.perf_counter() - started)
    return out


async def run(calls: int) -> dict[str, dict[str, float]]:
    from mcp import Client, StdioServerParameters

    import chazbot
    from chazbot.config import AgentConfig, Config, MCPServerConfig, ToolsConfig
    from chazbot.tools import Caller
    from tests.support.standin_chat import OneAnswer

    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Config(
            state_dir=Path(tmp),
            agents=[AgentConfig(name="chaz", capture="off", allowed_tools=["demo__*"])],
            mcp_servers=[MCPServerConfig(name="demo", command=sys.executable, args=[SERVER])],
            tools=ToolsConfig(
                auto_approved_tools=["demo__*"],
                calls_per_minute_per_tool=10_000,
                calls_per_minute_per_room=10_000,
                call_timeout_s=30,
            ),
        )
        async with chazbot.open(Path(tmp), cfg) as peer:
            await peer.tools.servers.wait_ready(60)
            agent = peer.agent("chaz")
            who = Caller(agent.name, agent.db, agent.key, ("demo__*",), "bench", "op", None)

            async def gate() -> None:
                ok, _ = await peer.tools.call(who, "demo__add", '{"a": 1, "b": 2}')
                assert ok

            link = peer.tools.servers.links["demo"]
            tool = link.tools["add"]

            async def gate_no_log() -> None:
                await peer.tools._remote(link, tool, {"a": 1, "b": 2})

            async with Client(
                StdioServerParameters(command=sys.executable, args=[SERVER]), cache=None
            ) as direct:

                async def sdk() -> None:
                    await direct.call_tool("add", {"a": 1, "b": 2})

                for name, step in (("sdk", sdk), ("gate", gate), ("gate, no log", gate_no_log)):
                    samples = await timed(calls, step)
                    results[name] = {
                        "p50_ms": pct(samples, 0.5),
                        "p95_ms": pct(samples, 0.95),
                        "mean_ms": statistics.mean(samples) * 1000,
                    }

            hang = asyncio.create_task(peer.tools.call(who, "demo__hang", {"seconds": 20}))
            await asyncio.sleep(0.2)
            llm = OneAnswer("fine")
            from chazbot.agent.turn import run_turn

            session = await peer.session("bench-other")

            async def other_turn() -> None:
                await run_turn(peer, agent, session, "hello", "op", llm)

            samples = await timed(min(calls, 50), other_turn)
            assert not hang.done(), "the hanging call ended before the measurement did"
            results["other room while a tool hangs"] = {
                "p50_ms": pct(samples, 0.5),
                "p95_ms": pct(samples, 0.95),
                "mean_ms": statistics.mean(samples) * 1000,
            }
            hang.cancel()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    results = asyncio.run(run(args.calls))
    print(f"# {args.calls} calls of demo__add over stdio (tests/support/mcp_demo_server.py)")
    print("| path | p50 ms | p95 ms | mean ms |")
    print("| --- | ---: | ---: | ---: |")
    for name, r in results.items():
        print(f"| {name} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | {r['mean_ms']:.2f} |")
    print(json.dumps({"calls": args.calls, "results": results}))


if __name__ == "__main__":
    main()

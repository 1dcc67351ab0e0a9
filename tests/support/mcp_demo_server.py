"""A real MCP server for the tool tests, written with the official SDK's server side
(``MCPServer``, the SDK's FastMCP): over stdio by default, or Streamable HTTP on loopback with
``--http PORT``. Its tools behave well or badly on purpose: ``add``, ``echo``, ``hang`` (holds
its call), ``flood`` (a huge result), ``leak`` (returns an environment variable, a secret of
the peer's in the tests), ``header`` (whether an HTTP header came), ``garble`` (malformed
JSON-RPC on its stdout), ``die`` (the process exits in the middle of the call)."""

from __future__ import annotations

import argparse
import asyncio
import os

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("chazbot-test-tools")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@app.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@app.tool()
async def hang(seconds: float) -> str:
    """Wait this many seconds before answering."""
    await asyncio.sleep(seconds)
    return "finally"


@app.tool()
def flood(lines: int) -> str:
    """Return this many long lines."""
    return "\n".join(f"line {n} " + "x" * 200 for n in range(lines))


@app.tool()
def leak(name: str) -> str:
    """Return the value of an environment variable."""
    return f"the value is {os.environ.get(name, '')}"


@app.tool()
def header(name: str, ctx: Context) -> str:
    """Say whether the HTTP request carried a header, and how long its value is."""
    value = (ctx.headers or {}).get(name.lower())
    return "absent" if value is None else f"present, {len(value)} characters"


@app.tool()
def garble() -> str:
    """Write lines that are no JSON-RPC onto the protocol stream, then answer."""
    os.write(1, b'{"jsonrpc": "2.0", "id": \n')
    os.write(1, b"this is not json\n")
    os.write(1, b'{"jsonrpc": "2.0", "id": 999999, "result": {"bogus": true}}\n')
    return "garbled"


@app.tool()
def die() -> str:
    """Exit the server process in the middle of the call."""
    os._exit(3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=0)
    opts = parser.parse_args()
    if opts.http:
        app.run("streamable-http", host="127.0.0.1", port=opts.http)
    else:
        app.run()


if __name__ == "__main__":
    main()

"""MCP servers declared in config.yaml (``mcp_servers``), each kept connected by its own
supervisor task: started in the background (the bot never waits for one), listed, restarted
with backoff when it fails or dies (one log line each time), and called with a deadline.

A server is reached with the official SDK's ``Client``: a ``command`` over stdio (its stderr
goes to ``state_dir/mcp/<name>.log``, rewritten at each start) or a Streamable HTTP ``url``.
Its tools are offered as ``<server>__<tool>``; a tool whose name could not be offered, or
whose input schema is no JSON schema, is left out with a log line.

What a server does wrong costs the call it does it in, never the turn or another room: a
call that hangs times out, one whose connection breaks fails and the supervisor, which pings
after a failure, restarts the server.

The SDK is imported when a server is first connected, not with this module: loading it costs
about a second of CPU, which every ``chazbot`` command paid before, MCP servers or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from chazbot.config import MCPServerConfig
from chazbot.errors import BackendError
from chazbot.tools.policy import SEPARATOR

if TYPE_CHECKING:
    from mcp import Client, StdioServerParameters

log = logging.getLogger(__name__)

State = Literal["starting", "running", "restarting", "stopped"]
BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 60.0
STEADY_S = 60.0
"""Up this long, a server that dies starts its backoff over."""
PING_EVERY_S = 30.0
"""How often a running server is asked for its tools (a liveness check that also picks up
new tools)."""
PING_TIMEOUT_S = 5.0
MAX_TOOLS = 128
MAX_PAGES = 10
MAX_DESCRIPTION_CHARS = 1_024
OFFERED_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class RemoteTool:
    """One tool of a server, as offered: ``<server>__<tool>``, its description and schema."""

    server: str
    name: str
    description: str
    schema: dict[str, Any]

    @property
    def offered(self) -> str:
        return f"{self.server}{SEPARATOR}{self.name}"


def one_line(exc: BaseException) -> str:
    """An exception as one short line (an exception group: its first leaf)."""
    from mcp import MCPError  # the SDK loads with the first server (a second of CPU)

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = exc.message if isinstance(exc, MCPError) else str(exc) or type(exc).__name__
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first[:300]


def tools_of(server: str, listed: list[Any]) -> dict[str, RemoteTool]:
    """The tools of a listing that can be offered (bounded in number)."""
    found: dict[str, RemoteTool] = {}
    for tool in listed[:MAX_TOOLS]:
        name, schema = getattr(tool, "name", None), getattr(tool, "input_schema", None)
        if not isinstance(name, str) or not OFFERED_NAME.match(f"{server}{SEPARATOR}{name}"):
            log.warning("mcp %s: tool %r cannot be offered (name); left out", server, name)
            continue
        try:
            if not isinstance(schema, dict):
                raise SchemaError("not an object")
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            log.warning(
                "mcp %s: tool %s has no valid input schema (%s); left out",
                server,
                name,
                exc.message,
            )
            continue
        description = (getattr(tool, "description", None) or "")[:MAX_DESCRIPTION_CHARS]
        found[name] = RemoteTool(server, name, description, schema)
    if len(listed) > MAX_TOOLS:
        log.warning("mcp %s: %d tools listed; the first %d offered", server, len(listed), MAX_TOOLS)
    return found


@dataclass
class ServerLink:
    """One configured server and its connection, kept up by ``run`` (a task)."""

    config: MCPServerConfig
    log_dir: Path | None = None
    state: State = "starting"
    error: str = ""
    restarts: int = 0
    tools: dict[str, RemoteTool] = field(default_factory=dict)
    _client: Client | None = None
    _broken: asyncio.Event = field(default_factory=asyncio.Event)
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def name(self) -> str:
        return self.config.name

    def _target(self) -> StdioServerParameters | str:
        from mcp import StdioServerParameters

        cfg = self.config
        if cfg.url is not None:
            return cfg.url
        assert cfg.command is not None
        return StdioServerParameters(
            command=cfg.command,
            args=list(cfg.args),
            env=dict(cfg.env) or None,
            cwd=cfg.cwd,
        )

    def _errlog(self, stack: contextlib.ExitStack) -> TextIO | None:
        if self.config.url is not None or self.log_dir is None:
            return None
        self.log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.log_dir / f"{self.name}.log"
        return stack.enter_context(path.open("w", encoding="utf-8"))

    async def run(self) -> None:
        """Connect, list, serve calls until the connection breaks; again, with backoff."""
        delay = BACKOFF_START_S
        while True:
            started = time.monotonic()
            try:
                await self._connected()
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                self.error = one_line(exc)
            else:
                self.error = self.error or "the connection ended"
            self._client = None
            self.tools = {}
            self.ready.clear()
            if time.monotonic() - started > STEADY_S:
                delay = BACKOFF_START_S
            self.restarts += 1
            self.state = "restarting"
            log.warning(
                "mcp %s: %s; restart %d in %.0f s", self.name, self.error, self.restarts, delay
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)

    async def _connected(self) -> None:
        from mcp import Client, StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client  # the SDK's, with headers

        with contextlib.ExitStack() as files:
            target = self._target()
            errlog = self._errlog(files)
            async with contextlib.AsyncExitStack() as stack:
                if isinstance(target, StdioServerParameters) and errlog is not None:
                    client = Client(stdio_client(target, errlog=errlog), cache=None)
                elif isinstance(target, str) and self.config.headers:
                    http = create_mcp_http_client(headers=dict(self.config.headers))
                    await stack.enter_async_context(http)
                    client = Client(streamable_http_client(target, http_client=http), cache=None)
                else:
                    client = Client(target, cache=None)
                await self._serve(client)

    async def _serve(self, client: Client) -> None:
        """Connect ``client``, list its tools, and serve calls until it stops answering."""
        # the deadline encloses the client's scopes (anyio's must nest), and is lifted
        # once the server is up
        async with asyncio.timeout(self.config.startup_timeout_s) as deadline, client:
            self.tools = await self._list(client)
            deadline.reschedule(None)
            self._client = client
            self._broken.clear()
            self.state, self.error = "running", ""
            self.ready.set()
            log.info("mcp %s: running, %d tools", self.name, len(self.tools))
            while True:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(PING_EVERY_S):
                        await self._broken.wait()
                if not await self._alive(client):
                    return

    async def _list(self, client: Client) -> dict[str, RemoteTool]:
        listed: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            listed += page.tools
            cursor = page.next_cursor
            if not cursor or len(listed) >= MAX_TOOLS:
                break
        return tools_of(self.name, listed)

    async def _alive(self, client: Client) -> bool:
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):  # the listing: MCP 2026 has no ping
                self.tools = await self._list(client)
        except Exception as exc:
            self.error = f"no answer to tools/list: {one_line(exc)}"
            return False
        self._broken.clear()
        return True

    async def call(self, tool: str, arguments: dict[str, Any], timeout_s: float) -> Any:
        """The server's ``CallToolResult``; BackendError (one line) when the server is not
        running, the call times out or fails."""
        from mcp import MCPError

        client = self._client
        if client is None or self.state != "running":
            why = f" ({self.error})" if self.error else ""
            raise BackendError(f"MCP server {self.name} is not running{why}; try later")
        try:
            async with asyncio.timeout(timeout_s):
                return await client.call_tool(tool, arguments, read_timeout_seconds=timeout_s)
        except TimeoutError:
            raise BackendError(f"{self.name}: no answer within {timeout_s:g} s") from None
        except MCPError as exc:
            if "timed out" in exc.message:
                raise BackendError(f"{self.name}: no answer within {timeout_s:g} s") from None
            self._broken.set()  # the supervisor pings: a dead server is restarted
            raise BackendError(f"{self.name}: {one_line(exc)}") from None
        except Exception as exc:
            self._broken.set()
            raise BackendError(f"{self.name}: {one_line(exc)}") from None


class MCPServers:
    """Every configured server, each under its supervisor task (``start``/``stop``)."""

    def __init__(self, configs: list[MCPServerConfig], log_dir: Path | None = None) -> None:
        self.log_dir = log_dir
        self.links = {c.name: ServerLink(c, log_dir) for c in configs}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.started = False

    def _run(self, link: ServerLink) -> None:
        self._tasks[link.name] = asyncio.create_task(link.run(), name=f"mcp-{link.name}")

    def start(self) -> None:
        """Start every server in the background (returns at once)."""
        if self.started:
            return
        self.started = True
        for link in self.links.values():
            self._run(link)

    async def _stop(self, names: list[str]) -> None:
        tasks = [t for n in names if (t := self._tasks.pop(n, None)) is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for name in names:
            if name in self.links:
                self.links[name].state = "stopped"

    async def stop(self) -> None:
        await self._stop(list(self.links))
        self.started = False

    async def replace(self, configs: list[MCPServerConfig]) -> list[str]:
        """Apply a reloaded ``mcp_servers``: a server whose settings are unchanged keeps
        running (its calls in flight too); a removed one is stopped; a changed one is
        stopped and started with its new settings; a new one is started (in the background,
        when the servers run). What changed, as ``+name``, ``-name``, ``~name``."""
        wanted = {c.name: c for c in configs}
        gone = [n for n in self.links if n not in wanted]
        changed = [n for n, c in wanted.items() if n in self.links and self.links[n].config != c]
        added = [n for n in wanted if n not in self.links]
        await self._stop(gone + changed)
        for name in gone:
            del self.links[name]
        for name in changed + added:
            self.links[name] = ServerLink(wanted[name], self.log_dir)
            if self.started:
                self._run(self.links[name])
        self.links = {n: self.links[n] for n in wanted}  # the config's order
        return [f"-{n}" for n in gone] + [f"~{n}" for n in changed] + [f"+{n}" for n in added]

    def tool(self, offered: str) -> tuple[ServerLink, RemoteTool] | None:
        server, _, name = offered.partition(SEPARATOR)
        link = self.links.get(server)
        found = link.tools.get(name) if link is not None else None
        return None if link is None or found is None else (link, found)

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until every server is running (tests and the bench)."""
        async with asyncio.timeout(timeout):
            for link in self.links.values():
                await link.ready.wait()


__all__ = ["MCPServers", "RemoteTool", "ServerLink", "one_line", "tools_of"]

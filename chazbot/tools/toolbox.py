"""``ToolBox``: the built-in tools and the MCP servers of one peer, and the one way a model's
call of them runs (SPEC §12), each step in order:

allowed for the agent → the tool is there (an MCP server's: running) → its owner alone reads
the room now (``owner``, §5c, decided at the call) → arguments valid against its JSON schema →
within the rate limits → approved when its policy asks (``approvals``) → run with a deadline →
the peer's secrets redacted, the result bounded and wrapped as data. Every refusal is one line
for the model, never an exception; every decision and call is a signed entry in the agent's
DB (``journal``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from chazbot.config import Config
from chazbot.errors import BackendError, ChazError, InputError, NotFound, PermissionDenied
from chazbot.ledger import KeyPair, Ledger
from chazbot.memory.audience import Audience
from chazbot.memory.tools import Tool
from chazbot.tools.addresses import AddressPolicy, Lookup, networks, system_lookup
from chazbot.tools.approvals import Approvals
from chazbot.tools.builtins import BUILTINS, Builtins
from chazbot.tools.fetch import FetchSettings
from chazbot.tools.journal import CallRecord, Journal
from chazbot.tools.limits import RateLimits
from chazbot.tools.mcp_servers import MCPServers, RemoteTool, ServerLink
from chazbot.tools.policy import allowed, needs_approval, policy_of, server_of
from chazbot.tools.results import Bounds, Secrets, as_data, bound

log = logging.getLogger(__name__)
ARGS_PROMPT_CHARS = 200
MAX_ARGUMENT_BYTES = 64_000


@dataclass(frozen=True)
class Caller:
    """Who calls and where: the agent (name, DB, key, ``allowed_tools``), the session, the
    person whose message started the turn, and the turn's audience (None: the operator)."""

    agent: str
    db: str
    key: KeyPair
    allowed_tools: tuple[str, ...]
    session: str
    person: str
    audience: Audience | None


@dataclass(frozen=True)
class ToolLine:
    """One line of ``tools``: a tool this room's agent may use, its state and policy."""

    name: str
    state: str
    policy: str
    description: str


def secrets_of(config: Config) -> Secrets:
    """The secrets config holds: API keys, the Matrix password and token, MCP servers' env."""
    values: list[str | None] = []
    for part in (config.llm, config.embedding, config.speech):
        values.append(getattr(part, "api_key", None))
    if config.matrix is not None:
        values += [config.matrix.password, config.matrix.access_token]
    for server in config.mcp_servers:
        values += [*server.env.values(), *server.headers.values()]
        values += [v.split(" ", 1)[-1] for v in server.headers.values()]  # a Bearer's token
    return Secrets(values)


def owner_reads_alone(owner: str | None, readers: Audience | None) -> bool:
    """Whether a server with ``owner`` may be offered where ``readers`` read (None owner:
    everywhere; else only where that person alone reads, the bot aside)."""
    return owner is None or (readers is not None and readers.only(owner))


class ToolBox:
    """The peer's tools part: built-ins, MCP servers, approvals, limits, secrets."""

    def __init__(
        self,
        config: Config,
        ledger: Ledger,
        *,
        lookup: Lookup = system_lookup,
        clock: Callable[[], float] = time.monotonic,
        log_dir: Path | None = None,
    ) -> None:
        self.ledger = ledger
        self.lookup = lookup
        self.apply(config)
        self.servers = MCPServers(list(config.mcp_servers), log_dir)
        self.approvals = Approvals(config.approvals.timeout_s)
        self.limits = RateLimits(
            config.tools.calls_per_minute_per_tool, config.tools.calls_per_minute_per_room, clock
        )
        self.secrets = secrets_of(config)

    def apply(self, config: Config) -> None:
        tools = config.tools
        self.settings = tools
        self.call_timeout_s = tools.call_timeout_s
        self.bounds = Bounds(tools.result_max_bytes, tools.result_max_lines)
        policy = AddressPolicy(tools.allow_private_addresses, networks(tools.fetch_allow_networks))
        fetch = FetchSettings(
            tools.fetch_max_bytes, tools.fetch_timeout_s, tools.fetch_max_redirects, policy
        )
        self.builtins = Builtins(fetch, tools.searxng_url, self.lookup)

    async def reload(self, config: Config) -> list[str]:
        """Apply a reloaded config (``agent reload``, SIGHUP): the tools settings, approvals'
        timeout, rate limits and secrets at once, and ``mcp_servers`` server by server
        (``MCPServers.replace``); the servers that changed, as ``+name``/``-name``/``~name``."""
        self.apply(config)
        self.approvals.timeout_s = config.approvals.timeout_s
        self.limits.per_tool = config.tools.calls_per_minute_per_tool
        self.limits.per_room = config.tools.calls_per_minute_per_room
        self.secrets = secrets_of(config)
        return await self.servers.replace(list(config.mcp_servers))

    def start(self) -> None:
        """Start the MCP servers in the background (returns at once)."""
        self.servers.start()

    async def stop(self) -> None:
        await self.servers.stop()

    # ---- what is offered --------------------------------------------------------------

    def handles(self, name: str) -> bool:
        """Whether ``name`` is a built-in or names a configured MCP server's tool."""
        server = server_of(name)
        return name in BUILTINS or (server is not None and server in self.servers.links)

    def _builtin_on(self, name: str) -> bool:
        return name != "web_search" or bool(self.builtins.searxng_url)

    def offered(self, caller: Caller) -> list[dict[str, Any]]:
        """The OpenAI ``tools`` entries of what ``caller``'s agent may use here now."""
        found = [
            t.schema()
            for name, t in BUILTINS.items()
            if allowed(name, caller.allowed_tools) and self._builtin_on(name)
        ]
        for link in self.servers.links.values():
            if link.state != "running" or not owner_reads_alone(link.config.owner, caller.audience):
                continue
            for tool in link.tools.values():
                if allowed(tool.offered, caller.allowed_tools):
                    found.append(_schema(tool))
        return found

    def lines(self, allowed_tools: tuple[str, ...], readers: Audience | None) -> list[ToolLine]:
        """Every tool the agent may use here, with its state and policy (``tools``)."""
        out: list[ToolLine] = []
        for name, t in BUILTINS.items():
            if allowed(name, allowed_tools):
                state = "ready" if self._builtin_on(name) else "off (no tools.searxng_url)"
                out.append(ToolLine(name, state, self._policy(name), t.description))
        for link in self.servers.links.values():
            if not owner_reads_alone(link.config.owner, readers):
                continue
            pattern = f"{link.name}__*"
            if link.state != "running":
                if allowed(f"{link.name}__x", allowed_tools) or pattern in allowed_tools:
                    why = f": {link.error}" if link.error else ""
                    out.append(ToolLine(pattern, f"{link.state}{why}", self._policy(pattern), ""))
                continue
            for tool in link.tools.values():
                if allowed(tool.offered, allowed_tools):
                    out.append(
                        ToolLine(
                            tool.offered, "ready", self._policy(tool.offered), tool.description
                        )
                    )
        return out

    def _policy(self, name: str) -> str:
        policy = policy_of(name, self.settings.policies)
        asks = needs_approval(name, self.settings.policies, self.settings.auto_approved_tools)
        return policy if asks or policy == "never" else "ask (auto-approved)"

    # ---- a call -----------------------------------------------------------------------

    async def call(
        self, caller: Caller, name: str, arguments: str | dict[str, Any]
    ) -> tuple[bool, str]:
        """Run one call of the model's: (ok, what the model is shown). Never raises for what
        the model, a site or a server does (a surprise is logged and costs the call only)."""
        try:
            return await self._call(caller, name, arguments)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("tools: %s failed unexpectedly", name[:64])
            return False, self._shown(name, "Error: the tool failed on this peer's side.")

    async def _call(
        self, caller: Caller, name: str, arguments: str | dict[str, Any]
    ) -> tuple[bool, str]:
        try:
            args = _arguments(arguments)
        except ChazError as exc:
            return False, self._shown(name, f"Error: {exc}")
        text, _ = self.secrets.redact(json.dumps(args, ensure_ascii=False, separators=(",", ":")))
        record = CallRecord.new(name, text, caller.session, caller.person, caller.agent)
        journal = Journal(self.ledger, caller.db, caller.key)
        try:
            tool, link = await self._checked(caller, name, args)
        except ChazError as exc:
            await self._keep(journal, record.decided("refused").ended("not run", str(exc)))
            return False, self._shown(name, f"Error: {exc}")
        if needs_approval(name, self.settings.policies, self.settings.auto_approved_tools):
            shown = text if len(text) <= ARGS_PROMPT_CHARS else text[:ARGS_PROMPT_CHARS] + "…"
            decision = await self.approvals.ask(
                caller.session, caller.agent, name, shown, caller.person
            )
            record = record.decided(decision.how, decision.by)
            await self._keep(journal, record)
            if not decision.approved:
                await self._keep(journal, record.ended("not run"))
                return False, self._shown(name, f"Error: {name} was not run: {decision.how}.")
        else:
            record = record.decided("not needed")
        try:
            if link is not None:
                await self._owner_reads_alone(caller, link, name)  # again: the wait was long
                output = await self._remote(link, tool, args)
            else:
                output = await self._builtin(tool, args)
        except ChazError as exc:
            await self._keep(journal, record.ended("error", str(exc)))
            return False, self._shown(name, f"Error: {exc}")
        await self._keep(journal, record.ended("ok"))
        return True, self._shown(name, output)

    async def _checked(
        self, caller: Caller, name: str, args: dict[str, Any]
    ) -> tuple[Any, ServerLink | None]:
        if not allowed(name, caller.allowed_tools):
            raise PermissionDenied(f"tool {name[:64]!r} is not allowed for this agent")
        link: ServerLink | None = None
        if name in BUILTINS:
            if not self._builtin_on(name):
                raise NotFound(f"{name} is off on this peer")
            tool: Any = BUILTINS[name]
            schema = BUILTINS[name].parameters
        else:
            found = self.servers.tool(name)
            if found is None:
                link = self.servers.links.get(server_of(name) or "")
                why = f" (server {link.name}: {link.state})" if link is not None else ""
                raise NotFound(f"no tool {name[:64]!r} now{why}")
            link, tool = found
            schema = tool.schema
            await self._owner_reads_alone(caller, link, name)
        first = best_match(Draft202012Validator(schema).iter_errors(args))
        if first is not None:
            where = ".".join(str(p) for p in first.absolute_path) or "arguments"
            raise InputError(f"{where}: {first.message[:200]}")
        self.limits.take(name, caller.session)
        return tool, link

    async def _owner_reads_alone(self, caller: Caller, link: ServerLink, name: str) -> None:
        """PermissionDenied unless the server's owner (if any) alone reads the room now."""
        if link.config.owner is None:
            return
        if not owner_reads_alone(link.config.owner, await self._readers(caller)):
            raise PermissionDenied(
                f"{name} belongs to {link.config.owner}; it is offered only where they "
                "alone read the room"
            )

    async def _readers(self, caller: Caller) -> Audience | None:
        """Who reads the room at the call: the transport's answer, else the turn's."""
        link = self.approvals.link_for(caller.session)
        if link is not None and caller.audience is not None:
            try:
                now = await link.readers(caller.session)
            except Exception:
                return None
            return now
        return caller.audience

    async def _builtin(self, tool: Tool[Builtins], args: dict[str, Any]) -> str:
        try:
            async with asyncio.timeout(self.call_timeout_s):
                return await tool.run(self.builtins, args)
        except TimeoutError:
            raise BackendError(f"no answer within {self.call_timeout_s:g} s") from None

    async def _remote(self, link: ServerLink, tool: RemoteTool, args: dict[str, Any]) -> str:
        result = await link.call(tool.name, args, self.call_timeout_s)
        parts: list[str] = []
        for block in getattr(result, "content", None) or []:
            kind = getattr(block, "type", "")
            if kind == "text":
                parts.append(str(getattr(block, "text", "")))
            else:
                parts.append(f"({kind} content not shown)")
        if not parts and getattr(result, "structured_content", None) is not None:
            parts.append(
                json.dumps(result.structured_content, ensure_ascii=False)[: self.bounds.max_bytes]
            )
        text = "\n".join(parts) or "(no content)"
        if getattr(result, "is_error", False):
            raise BackendError(f"{tool.offered} failed: {bound(text, Bounds(300, 3))}")
        return text

    def _shown(self, name: str, text: str) -> str:
        clean, hits = self.secrets.redact(text)
        if hits:
            log.warning("tools: %s's result held %d secret(s) of this peer; redacted", name, hits)
        return as_data(name, bound(clean, self.bounds))

    async def _keep(self, journal: Journal, record: CallRecord) -> None:
        note, _ = self.secrets.redact(record.note)  # an error may quote what it was sent
        try:
            await journal.keep(dataclasses.replace(record, note=note))
        except ChazError as exc:
            log.warning("tools: the call log of %s was not written: %s", record.tool, exc)


def _schema(tool: RemoteTool) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.offered,
            "description": tool.description or f"{tool.name} (MCP server {tool.server})",
            "parameters": tool.schema,
        },
    }


def _arguments(arguments: str | dict[str, Any] | None) -> dict[str, Any]:
    if isinstance(arguments, str):
        if len(arguments.encode("utf-8", errors="ignore")) > MAX_ARGUMENT_BYTES:
            raise InputError(f"the arguments are over {MAX_ARGUMENT_BYTES:,} bytes")
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            raise InputError("the arguments are not valid JSON; send a JSON object") from None
    if arguments is None:
        return {}
    if not isinstance(arguments, dict):
        raise InputError("the arguments must be a JSON object")
    return arguments


__all__ = ["Caller", "ToolBox", "ToolLine", "owner_reads_alone", "secrets_of"]

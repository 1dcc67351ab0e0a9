"""The terminal transport: ``chazbot chat``. Lines starting with ``/`` are commands.

The loop talks to a ``ChatTarget``: the peer opened in this process (``LocalChat``), or a
running service through its control socket (``control_client.ServiceChat``), so a chat beside
``chazbot run`` goes through the service instead of opening the state a second time.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Protocol, TextIO

from chazbot.memory.audience import Audience
from chazbot.peer import Peer
from chazbot.tools import Request


class ChatTarget(Protocol):
    """Where the terminal's lines go."""

    async def agent_name(self, agent: str | None, session: str) -> str: ...

    async def command(self, text: str, agent: str, session: str) -> str: ...

    async def chat(self, text: str, agent: str, session: str) -> str: ...


class LocalChat:
    """A peer opened in this process."""

    def __init__(self, peer: Peer) -> None:
        self.peer = peer

    async def agent_name(self, agent: str | None, session: str) -> str:
        sess = await self.peer.session(session)
        return self.peer.agent(agent).name if agent else (await self.peer.session_agent(sess)).name

    async def command(self, text: str, agent: str, session: str) -> str:
        reply = await self.peer.command(text, agent=agent, session=session, sender="terminal")
        return reply.text

    async def chat(self, text: str, agent: str, session: str) -> str:
        result = await self.peer.chat(text, agent=agent, session=session, sender="terminal")
        return result.text


async def _read_line(stream: TextIO) -> str | None:
    line = await asyncio.to_thread(stream.readline)
    return line if line else None


class TerminalApprovals:
    """A tool call that needs a yes, asked in the terminal: y/n (anything else, or the end of
    input, is no)."""

    prefix = "/"

    def __init__(self, inp: TextIO, out: TextIO) -> None:
        self.inp, self.out = inp, out

    async def prompt(self, request: Request) -> str | bool | None:
        self.out.write(
            f"{request.agent} wants to run {request.tool}({request.args}). Allow? [y/N] "
        )
        self.out.flush()
        line = await _read_line(self.inp)
        return (line or "").strip().lower() in ("y", "yes")

    async def tell(self, session: str, text: str) -> None:
        self.out.write(text + "\n")

    async def readers(self, session: str) -> Audience | None:
        return None


async def chat_loop(
    target: Peer | ChatTarget,
    agent: str | None,
    session: str,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    """Chat until end of input or /quit; with no TTY it reads one line per input (scriptable)."""
    to: ChatTarget = LocalChat(target) if isinstance(target, Peer) else target
    inp, out = stdin or sys.stdin, stdout or sys.stdout
    interactive = inp.isatty()
    name = await to.agent_name(agent, session)
    if isinstance(target, Peer):  # through a service, nobody can be asked: denied
        target.tools.approvals.attach(session, TerminalApprovals(inp, out))
    if interactive:
        out.write(
            f"chatting with {name} in session {session!r}; /help for commands, /quit to leave\n"
        )
    while True:
        if interactive:
            out.write("you> ")
            out.flush()
        line = await _read_line(inp)
        if line is None:
            break
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            break
        if text.startswith("/"):
            out.write(await to.command(text, name, session) + "\n")
        else:
            answer = await to.chat(text, name, session)
            out.write((f"{name}> " if interactive else "") + answer + "\n")
        out.flush()
    return 0

"""The terminal transport: ``chazbot chat``. Lines starting with ``/`` are commands."""

from __future__ import annotations

import asyncio
import sys
from typing import TextIO

from chazbot.peer import Peer


async def _read_line(stream: TextIO) -> str | None:
    line = await asyncio.to_thread(stream.readline)
    return line if line else None


async def chat_loop(
    peer: Peer,
    agent: str | None,
    session: str,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    """Chat until end of input or /quit; with no TTY it reads one line per input (scriptable)."""
    inp, out = stdin or sys.stdin, stdout or sys.stdout
    interactive = inp.isatty()
    sess = await peer.session(session)
    who = peer.agent(agent) if agent else await peer.session_agent(sess)
    if interactive:
        out.write(
            f"chatting with {who.name} in session {session!r}; /help for commands, /quit to leave\n"
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
            reply = await peer.command(text, agent=who.name, session=session, sender="terminal")
            out.write(reply.text + "\n")
        else:
            result = await peer.chat(text, agent=who.name, session=session, sender="terminal")
            out.write((f"{who.name}> " if interactive else "") + result.text + "\n")
        out.flush()
    return 0

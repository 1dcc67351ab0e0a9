"""The command layer: one declared tree serves the terminal, Matrix and the command line."""

from __future__ import annotations

from chazbot.commands import (
    agent_cmds,
    memory_browse_cmds,
    memory_capture_cmds,
    memory_cmds,
    peer_cmds,
    people_cmds,
    remind_cmds,
    sharing_cmds,
    tools_cmds,
    web_cmds,
)
from chazbot.commands.context import Context
from chazbot.commands.tree import (
    ERROR_LINE_CHARS,
    Arg,
    Call,
    Command,
    CommandTree,
    Meaning,
    Reply,
    UsageError,
    error_text,
)
from chazbot.errors import ChazError

TREE = CommandTree.of(
    memory_cmds.COMMANDS,
    memory_browse_cmds.COMMANDS,
    memory_capture_cmds.COMMANDS,
    sharing_cmds.COMMANDS,
    peer_cmds.COMMANDS,
    people_cmds.COMMANDS,
    agent_cmds.COMMANDS,
    web_cmds.COMMANDS,
    remind_cmds.COMMANDS,
    tools_cmds.COMMANDS,
)
"""Every command, in path order: each module declares its own with ``CommandTree.command``."""


@TREE.command(
    "help",
    (Arg("topic", optional=True, rest=True),),
    "a short start, or every command under a topic (help memory)",
)
async def help_(ctx: Context, topic: str | None = None) -> Reply:
    """Help lists the tree itself, so it is declared here, beside the tree. Markdown: a
    client shows it formatted (Matrix gets an HTML body); the first screen is short."""
    if topic is not None:
        return Reply(True, TREE.help(topic, ctx.prefix), markdown=True)
    p = ctx.prefix.strip()
    firsts, topics = TREE.first_screen(ctx.prefix)
    lines = [
        "**Talk to me**: in a DM (a room of just you and the bot) just write. "
        f"In a group room, start a message with {p} or mention the bot. "
        'Ask "what can you do?" for a short intro.',
        "",
        *firsts,
        "",
        f"**More**: `{ctx.prefix}help <topic>` for " + ", ".join(topics) + ".",
    ]
    return Reply(True, "\n".join(lines), markdown=True)


async def run_command(ctx: Context, text: str | Call, tree: CommandTree = TREE) -> Reply:
    """Run one command line (parsed) or ``Call`` (its arguments already apart, as a web form
    gives them); every failure becomes a one-line ``Reply(False, …)``."""
    try:
        if isinstance(text, Call):
            command, args = tree.bind(text, ctx.prefix)
        else:
            command, args = tree.parse(text, ctx.prefix)
    except UsageError as exc:
        return Reply(False, error_text(exc), usage_error=True)
    if command.admin and not ctx.is_admin:
        return Reply(False, f"only admins may use {ctx.prefix}{' '.join(command.path)}")
    try:
        return await command.run(ctx, args)
    except UsageError as exc:
        return Reply(False, error_text(exc), usage_error=True)
    except ChazError as exc:
        return Reply(False, error_text(exc))


__all__ = [
    "ERROR_LINE_CHARS",
    "TREE",
    "Arg",
    "Call",
    "Command",
    "CommandTree",
    "Context",
    "Meaning",
    "Reply",
    "UsageError",
    "run_command",
]

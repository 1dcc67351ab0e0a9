"""``/memory share``, ``unshare`` and ``import``: hand banks to other peers."""

from __future__ import annotations

from chazbot.commands.context import Context
from chazbot.commands.memory_cmds import resolve_hosted
from chazbot.commands.tree import Arg, CommandTree, Reply

COMMANDS = CommandTree()
command = COMMANDS.command


@command(
    "memory share",
    (Arg("bank"),),
    "make a ticket other peers can import the bank with",
    admin=True,
)
async def share(ctx: Context, bank: str) -> Reply:
    hosted = await resolve_hosted(ctx, bank)
    ticket = await ctx.sharing.share(hosted.db)
    return Reply(True, f"Sharing {hosted.name}. Ticket:\n{ticket}")


@command(
    "memory unshare",
    (Arg("bank"),),
    "stop serving a bank to other peers (keys already handed out stay valid)",
    admin=True,
)
async def unshare(ctx: Context, bank: str) -> Reply:
    hosted = await resolve_hosted(ctx, bank)
    await ctx.sharing.unshare(hosted.db)
    return Reply(True, f"Stopped sharing {hosted.name}.")


@command(
    "memory import",
    (
        Arg("ticket"),
        Arg("permission", optional=True, choices=("admin", "write", "read")),
        Arg("name", optional=True),
    ),
    "sync a bank from another peer's ticket (default permission: write)",
    admin=True,
)
async def import_(
    ctx: Context, ticket: str, permission: str = "write", name: str | None = None
) -> Reply:
    done = await ctx.sharing.import_bank(ticket, permission, name)
    again = f"{ctx.prefix}memory import <ticket> {permission} <new-name>"
    if done.status == "pending":
        return Reply(
            True,
            f"Asked the owner for {permission} access (request {done.request_id}); they "
            f"approve it with {ctx.prefix}sharing approve {done.request_id}. Run the same "
            "import again after that.",
        )
    if done.status == "unnamed":
        return Reply(False, f"The bank has no name; import again with a name: {again}")
    if done.status == "name_taken":
        return Reply(
            False,
            f"a bank or agent named {done.name!r} exists here; import again choosing a "
            f"name: {again}",
        )
    return Reply(
        True,
        f"Imported bank {done.name} ({done.db[:19]}…) with {permission}; it syncs both ways.",
    )

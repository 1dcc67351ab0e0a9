"""``/people``: who the bot answers, changed from chat by admins (``allow``, ``remove``,
``list``). Stored as signed entries on this peer (``chazbot.people.allowed``) and effective at once;
config.yaml's ``matrix.allow_list`` and ``matrix.admins`` stay the floor: chat adds to them
and cannot take away what they allow."""

from __future__ import annotations

from chazbot.commands.context import Context
from chazbot.commands.tree import Arg, CommandTree, Reply
from chazbot.errors import NotFound, PermissionDenied
from chazbot.people.allowed import check_glob, check_narrow_glob, matches_any

COMMANDS = CommandTree()
command = COMMANDS.command

WHO = Arg("who", shown="@user:server")


def config_floor(ctx: Context, glob: str) -> str | None:
    """The config.yaml entry that allows ``glob`` (an MXID matched by a glob there, or the
    same glob written there), or None."""
    m = ctx.agents.config.matrix
    if m is None:
        return None
    for where, globs in (("matrix.admins", m.admins), ("matrix.allow_list", m.allow_list)):
        for entry in globs:
            if entry == glob or matches_any(glob, [entry]):
                return f"config.yaml's {where} ({entry})"
    return None


def _chat_match(ctx: Context, glob: str) -> str | None:
    """Another chat-allowed glob that still matches ``glob``, if any."""
    return next(
        (g for g in ctx.people.globs if g != glob and matches_any(glob, [g])),
        None,
    )


@command(
    "people allow",
    (WHO,),
    "answer someone from now on (a glob like @*:example.org works)",
    admin=True,
    first=True,
)
async def allow(ctx: Context, who: str) -> Reply:
    glob = check_narrow_glob(who)
    floor = config_floor(ctx, glob)
    if floor is not None:
        return Reply(True, f"{glob} is allowed already by {floor}.")
    by = ctx.sender if ctx.sender.startswith("@") else "the operator"  # terminal, chazbot cmd
    if not await ctx.people.allow(glob, by):
        return Reply(True, f"{glob} is allowed already (from chat).")
    return Reply(
        True,
        f"Allowed {glob}: I answer them from now on. Take it back with "
        f"{ctx.prefix}people remove {glob}",
    )


@command("people remove", (WHO,), "stop answering someone allowed from chat", admin=True)
async def remove(ctx: Context, who: str) -> Reply:
    glob = check_glob(who)
    removed = await ctx.people.remove(glob)
    floor = config_floor(ctx, glob)
    other = _chat_match(ctx, glob)
    if not removed:
        if floor is not None:
            raise PermissionDenied(
                f"{glob} is allowed by {floor}, which chat cannot change: remove them there"
            )
        if other is not None:
            raise NotFound(
                f"{glob} is not on the list itself; {other} (allowed from chat) matches them:"
                f" {ctx.prefix}people remove {other}"
            )
        raise NotFound(f"{glob} is not allowed from chat; see {ctx.prefix}people list")
    text = f"Removed {glob}."
    if floor is not None:
        text += f" They are still allowed by {floor}: remove them there to stop it."
    elif other is not None:
        text += f" {other} (allowed from chat) still matches them."
    else:
        text += " I no longer answer them."
    return Reply(True, text)


@command(
    "people list",
    (),
    "who I answer: config.yaml's people, then those allowed from chat",
    admin=True,
)
async def list_(ctx: Context) -> Reply:
    m = ctx.agents.config.matrix
    lines = []
    if m is not None:
        lines += [f"- {g} (admin, config.yaml)" for g in m.admins]
        lines += [f"- {g} (config.yaml)" for g in m.allow_list if g not in m.admins]
    lines += [f"- {e.glob} (allowed by {e.by})" for e in ctx.people.entries()]
    if not lines:
        return Reply(
            True, f"Nobody is allowed yet; add someone with {ctx.prefix}people allow @user:server"
        )
    return Reply(
        True,
        "I answer:\n" + "\n".join(lines) + f"\nAdd with {ctx.prefix}people allow @user:server; "
        f"take back with {ctx.prefix}people remove @user:server.",
    )


__all__ = ["COMMANDS", "config_floor"]

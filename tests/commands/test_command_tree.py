"""The declaration of a command: its handler's parameters must be its arguments (#24).

Handlers are module-level functions taking the ``Context`` and then one typed keyword per
declared argument; a handler that does not fit its usage line fails where it is declared, at
import, not when someone types the command.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from chazbot.commands import TREE
from chazbot.commands.context import Context
from chazbot.commands.tree import Arg, CommandTree, Reply, check_handler

ARGS = (Arg("bank"), Arg("query", optional=True, rest=True))


async def fits(ctx: Context, bank: str, query: str | None = None) -> Reply:
    return Reply(True, f"{bank}|{query}")


async def wrong_name(ctx: Context, bank: str, words: str | None = None) -> Reply:
    return Reply(True, bank)


async def optional_without_default(ctx: Context, bank: str, query: str | None) -> Reply:
    return Reply(True, bank)


async def required_with_default(ctx: Context, bank: str = "self", query: str = "") -> Reply:
    return Reply(True, bank)


async def not_a_str(ctx: Context, bank: int, query: str | None = None) -> Reply:
    return Reply(True, str(bank))


async def str_default_typed_optional(ctx: Context, bank: str, query: str | None = "") -> Reply:
    return Reply(True, bank)


async def positional_only(ctx: Context, bank: str, /, query: str | None = None) -> Reply:
    return Reply(True, bank)


async def no_context() -> Reply:
    return Reply(True, "")


async def test_a_handler_that_fits_its_arguments_is_declared_and_bound_by_name() -> None:
    tree = CommandTree()
    tree.command("memory search", ARGS, "search")(fits)
    command, args = tree.parse("/memory search facts")
    assert command.handler is fits and args == {"bank": "facts"}
    ctx = cast(Context, object())  # the handler reads nothing of it
    assert await command.run(ctx, args) == Reply(True, "facts|None")  # the default
    _, args = tree.parse("/memory search facts blue sky")
    assert await command.run(ctx, args) == Reply(True, "facts|blue sky")


@pytest.mark.parametrize(
    ("handler", "says"),
    [
        (wrong_name, "parameters ['bank', 'words'] are not the arguments ['bank', 'query']"),
        (optional_without_default, "query needs a default"),
        (required_with_default, "bank is required: no default"),
        (not_a_str, "bank is annotated 'int', not 'str'"),
        (str_default_typed_optional, "query is annotated 'str | None', not 'str'"),
        (positional_only, "bank must be a parameter that takes a keyword"),
        (no_context, "a handler takes the Context first"),
    ],
)
def test_a_handler_that_does_not_fit_fails_at_declaration(handler: Any, says: str) -> None:
    tree = CommandTree()
    with pytest.raises(TypeError, match="memory search") as caught:
        tree.command("memory search", ARGS, "search")(handler)
    assert says in str(caught.value)
    assert tree.commands == []  # nothing half-declared


def test_a_path_is_declared_once() -> None:
    first, second = CommandTree(), CommandTree()
    first.command("memory search", ARGS, "search")(fits)
    second.command("memory search", ARGS, "again")(fits)
    with pytest.raises(ValueError, match="'memory search' is declared twice"):
        CommandTree.of(first, second)


def test_the_tree_is_in_path_order_and_every_handler_fits() -> None:
    paths = [c.path for c in TREE.commands]
    assert paths == sorted(paths) and len(set(paths)) == len(paths)
    assert ("help",) in paths and ("memory", "search") in paths and ("web",) in paths
    for command in TREE.commands:
        assert "<locals>" not in command.handler.__qualname__  # module-level, not closures
        check_handler(" ".join(command.path), command.args, command.handler)

"""The declared command tree: one declaration serves parsing, usage lines and help.

Pure: parsing and help need no I/O. A command is a path of words (``memory grant``), its
arguments, a one-line summary, whether it needs an admin, and an async handler. Handlers are
module-level functions declared with ``CommandTree.command`` right under their usage line
(maubot's way): the handler takes the ``Context`` and then one keyword parameter per declared
argument, ``str`` when it is required and ``str | None = None`` (or a ``str`` default) when it
is optional. The declaration checks that the parameters match the arguments, so a typo fails
at import, and mypy checks each handler's body against its typed parameters.
"""

from __future__ import annotations

import bisect
import inspect
import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Concatenate, TypeVar

from chazbot.commands.context import Context
from chazbot.errors import ChazError, InputError


@dataclass(frozen=True)
class Meaning:
    """What a reply says, apart from its English words: a name and the values it carries
    (``{"key": "pet", "n": 1}``), for a transport that words it in the person's language
    (the memory page: ``transports.web.wording``); one that does not know the name shows the
    reply's ``text``."""

    name: str
    values: Mapping[str, str | int | bool] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """What a command answers: ``ok`` and one or more lines of text."""

    ok: bool
    text: str
    usage_error: bool = False
    markdown: bool = False  # ``text`` is Markdown (Matrix sends it with an HTML body too)
    meaning: Meaning | None = None
    """What ``text`` says, for a transport that words it itself (None: ``text`` only)."""


ERROR_LINE_CHARS = 600
"""An error's lines are cut to this: many name the argument typed, and a 30 KB one came back
whole (a 30 KB reply, four Matrix messages, to anyone who may talk to the bot)."""


def error_text(error: Exception) -> str:
    """An error as a reply shows it: each line cut to ``ERROR_LINE_CHARS``."""
    return "\n".join(
        line if len(line) <= ERROR_LINE_CHARS else line[: ERROR_LINE_CHARS - 1] + "…"
        for line in str(error).splitlines()
    )


def refused(error: ChazError, meaning: Meaning) -> Reply:
    """A failure with its meaning: what ``run_command`` answers for a raised ``error``, and
    what it means for a transport that words it itself."""
    return Reply(False, error_text(error), meaning=meaning)


class UsageError(InputError):
    """The command line does not match the declaration; carries the usage line."""


@dataclass(frozen=True)
class Arg:
    name: str
    optional: bool = False
    rest: bool = False  # takes every remaining word (joined by spaces)
    choices: tuple[str, ...] = ()
    shown: str = ""  # how the usage line names it, when not by ``name``
    raw: bool = False  # with ``rest``: the rest of the line as typed (quotes, newlines kept)

    def usage(self) -> str:
        inner = "|".join(self.choices) if self.choices else (self.shown or self.name)
        inner += "…" if self.rest else ""
        return f"[{inner}]" if self.optional else f"<{inner}>"


Handler = Callable[Concatenate[Context, ...], Awaitable[Reply]]
"""A command's handler: the ``Context``, then its arguments by name (checked at declaration)."""

H = TypeVar("H", bound=Handler)


@dataclass(frozen=True)
class Call:
    """One command by its path with its arguments by name, each value as it is meant: what a
    web form posts. Nothing is quoted into a command line and parsed again, so a value with
    quotes, spaces or line breaks reaches the handler as it was given."""

    path: tuple[str, ...]
    args: Mapping[str, str] = field(default_factory=dict)

    def shown(self, prefix: str = "/") -> str:
        """The call as one line for a log (values quoted; never parsed)."""
        return " ".join([prefix + " ".join(self.path), *(repr(v) for v in self.args.values())])


_BY_NAME = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


@dataclass(frozen=True)
class Command:
    path: tuple[str, ...]
    args: tuple[Arg, ...]
    summary: str
    handler: Handler
    admin: bool = False
    first: bool = False  # on the first screen of ``help``

    def usage(self, prefix: str = "/") -> str:
        return " ".join([prefix + " ".join(self.path), *(a.usage() for a in self.args)])

    async def run(self, ctx: Context, args: Mapping[str, str]) -> Reply:
        """Call the handler with the parsed arguments; an absent optional one keeps its
        parameter's default."""
        return await self.handler(ctx, **args)


def check_handler(path: str, args: tuple[Arg, ...], handler: Handler) -> None:
    """Raise TypeError unless ``handler`` takes the context and then exactly the declared
    arguments by name: ``str`` for a required one, a default (``None`` with ``str | None``,
    or a ``str``) for an optional one."""
    where = f"{path!r} ({handler.__module__}.{handler.__qualname__})"
    params = list(inspect.signature(handler).parameters.values())
    if not params or params[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise TypeError(f"{where}: a handler takes the Context first")
    taken = {p.name: p for p in params[1:]}
    declared = [a.name for a in args]
    if sorted(taken) != sorted(declared) or len(set(declared)) != len(declared):
        raise TypeError(f"{where}: parameters {sorted(taken)} are not the arguments {declared}")
    for arg in args:
        param = taken[arg.name]
        if param.kind not in _BY_NAME:
            raise TypeError(f"{where}: {arg.name} must be a parameter that takes a keyword")
        if (param.default is inspect.Parameter.empty) == arg.optional:
            need = "needs a default" if arg.optional else "is required: no default"
            raise TypeError(f"{where}: {arg.name} {need}")
        want = "str | None" if arg.optional and param.default is None else "str"
        if arg.optional and param.default is not None and not isinstance(param.default, str):
            raise TypeError(f"{where}: {arg.name}'s default is None or a str")
        shown = param.annotation
        if not isinstance(shown, str):
            shown = inspect.formatannotation(shown)
        if shown != want:
            raise TypeError(f"{where}: {arg.name} is annotated {shown!r}, not {want!r}")


@dataclass
class CommandTree:
    """Commands, kept in the order of their paths (help and the docs list them so)."""

    commands: list[Command] = field(default_factory=list)

    @classmethod
    def of(cls, *parts: CommandTree) -> CommandTree:
        """One tree of the commands that ``parts`` declare (each module declares its own)."""
        tree = cls()
        for part in parts:
            for command in part.commands:
                tree.insert(command)
        return tree

    def insert(self, command: Command) -> None:
        if any(c.path == command.path for c in self.commands):
            raise ValueError(f"{' '.join(command.path)!r} is declared twice")
        bisect.insort(self.commands, command, key=lambda c: c.path)

    def command(
        self,
        path: str,
        args: tuple[Arg, ...],
        summary: str,
        admin: bool = False,
        first: bool = False,
    ) -> Callable[[H], H]:
        """Declare the decorated module-level function as the handler of ``path``
        (``first``: shown on the first screen of ``help``)."""

        def declare(handler: H) -> H:
            check_handler(path, args, handler)
            self.insert(Command(tuple(path.split()), args, summary, handler, admin, first))
            return handler

        return declare

    def parse(self, text: str, prefix: str = "/") -> tuple[Command, dict[str, str]]:
        """Match a command line; raise UsageError with the usage line when it does not fit."""
        body = text.strip()
        if body.startswith("/"):
            body = body[1:]
        raw = self._raw(body, prefix)
        if raw is not None:
            return raw
        try:
            words = shlex.split(body)
        except ValueError as exc:
            raise UsageError(f"cannot parse the command: {exc}") from None
        if not words:
            raise UsageError(f"no command given; try {prefix}help")
        lowered = [w.lower() for w in words]
        best = self._longest_match(lowered)
        if best is None:
            group = [c for c in self.commands if c.path[0] == lowered[0]]
            if group:
                subs = ", ".join(sorted({c.path[1] for c in group if len(c.path) > 1}))
                raise UsageError(f"unknown {lowered[0]} subcommand; use one of: {subs}")
            raise UsageError(f"unknown command {words[0]!r}; try {prefix}help")
        return best, self._bind(best, words[len(best.path) :], prefix)

    def bind(self, call: Call, prefix: str = "/") -> tuple[Command, dict[str, str]]:
        """The command ``call`` names, with its arguments checked as a parsed line's are
        (required ones given, ``choices`` kept to); raise UsageError when it does not fit."""
        found = next((c for c in self.commands if c.path == call.path), None)
        if found is None:
            raise UsageError(f"unknown command {' '.join(call.path)[:80]!r}; try {prefix}help")
        unknown = sorted(set(call.args) - {a.name for a in found.args})
        if unknown:
            raise UsageError(f"no argument {unknown[0][:40]!r}. Usage: {found.usage(prefix)}")
        bound: dict[str, str] = {}
        for arg in found.args:
            value = call.args.get(arg.name)
            if value is None:
                if arg.optional:
                    continue
                raise UsageError(f"missing <{arg.name}>. Usage: {found.usage(prefix)}")
            bound[arg.name] = _chosen(found, arg, value, prefix)
        return found, bound

    def _longest_match(self, lowered: list[str]) -> Command | None:
        """The command whose path is the longest prefix of ``lowered`` (lowercased words)."""
        best: Command | None = None
        for command in self.commands:
            n = len(command.path)
            if tuple(lowered[:n]) == command.path and (best is None or n > len(best.path)):
                best = command
        return best

    def _raw(self, body: str, prefix: str) -> tuple[Command, dict[str, str]] | None:
        """A command whose last argument is ``raw`` takes the rest of the line as typed
        (a system prompt with an apostrophe, say); the words before it split on spaces."""
        words = body.split()
        best = self._longest_match([w.lower() for w in words])
        if best is None or not best.args or not best.args[-1].raw:
            return None
        before = len(best.path) + len(best.args) - 1
        parts = body.split(None, before)
        rest = parts[before].strip() if len(parts) > before else ""
        bound = self._bind(best, words[len(best.path) : before], prefix, best.args[:-1])
        if rest:
            bound[best.args[-1].name] = rest
        elif not best.args[-1].optional:
            raise UsageError(f"missing <{best.args[-1].name}>. Usage: {best.usage(prefix)}")
        return best, bound

    def _bind(
        self,
        command: Command,
        words: list[str],
        prefix: str,
        args: tuple[Arg, ...] | None = None,
    ) -> dict[str, str]:
        bound: dict[str, str] = {}
        rest = list(words)
        for arg in command.args if args is None else args:
            if not rest:
                if arg.optional:
                    continue
                raise UsageError(f"missing <{arg.name}>. Usage: {command.usage(prefix)}")
            if arg.rest:
                bound[arg.name] = " ".join(rest)
                rest = []
                continue
            bound[arg.name] = _chosen(command, arg, rest.pop(0), prefix)
        if rest:
            raise UsageError(f"too many arguments. Usage: {command.usage(prefix)}")
        return bound

    def help(self, topic: str = "", prefix: str = "/") -> str:
        """The commands under ``topic`` (all for ""), one Markdown list item each: the
        usage line as code, then the summary; no padding, so it wraps on a phone."""
        words = topic.lower().split()
        chosen = [c for c in self.commands if list(c.path[: len(words)]) == words]
        if not chosen:
            raise UsageError(f"no help for {topic[:40]!r}; try {prefix}help")
        return "\n".join(_item(c, prefix) for c in chosen)

    def first_screen(self, prefix: str = "/") -> tuple[list[str], list[str]]:
        """What ``help`` shows first: the commands declared ``first`` (Markdown items), and
        the other topics (``memory (14)``, ``people (admins)``), each its first word."""
        firsts = [_item(c, prefix) for c in self.commands if c.first]
        groups: dict[str, list[Command]] = {}
        for c in self.commands:
            groups.setdefault(c.path[0], []).append(c)
        topics = []
        for word, group in groups.items():
            rest = [c for c in group if not c.first]
            if not rest or word == "help":
                continue
            note = [str(len(group))] if len(group) > 1 else []
            if all(c.admin for c in group):
                note.append("admins")
            topics.append(f"**{word}**" + (f" ({', '.join(note)})" if note else ""))
        return firsts, topics


def _chosen(command: Command, arg: Arg, value: str, prefix: str) -> str:
    """``value`` for ``arg``: one of its ``choices`` (lowercased) when it has any."""
    if not arg.choices:
        return value
    if value.lower() not in arg.choices:
        raise UsageError(
            f"{arg.name} must be one of {', '.join(arg.choices)}. Usage: {command.usage(prefix)}"
        )
    return value.lower()


def _item(command: Command, prefix: str) -> str:
    admins = " *(admins)*" if command.admin else ""
    return f"- `{command.usage(prefix)}`: {command.summary}{admins}"

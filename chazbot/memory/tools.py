"""The memory tools the model calls: ``remember``, ``recall``, ``forget``, ``list_memory_banks``.

Each tool is a JSON schema plus a function from (scope, arguments) to a short plain reply.
Bad arguments and refused operations come back as a reply that tells the model how to
correct itself; they never raise to the user.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from chazbot.errors import ChazError, InputError
from chazbot.memory.current import Told, earlier_mark, newest_first, statement
from chazbot.memory.rows import MAX_KEY_CHARS, MAX_LIMIT, MAX_TAGS, Hit
from chazbot.memory.scope import MemoryScope
from chazbot.memory.tokenize import MAX_QUERY_BYTES, BoundedQuery, bound_query

Within = TypeVar("Within")
"""What a tool acts within: a memory scope here, a turn's ``Asking`` for the reminder tools."""


@dataclass(frozen=True)
class Tool(Generic[Within]):
    """A tool the model may call: its JSON schema and its function of (where, arguments)."""

    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[Within, dict[str, Any]], Awaitable[str]]

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


_BANK = {
    "type": "string",
    "description": "a bank name from list_memory_banks; omit for your own memory",
}
_TAGS = {
    "type": "array",
    "items": {"type": "string", "maxLength": 64},
    "maxItems": MAX_TAGS,
}


NAMED = 5
"""Unknown arguments an error names (10,000 of them made a 69 KB reply the model read back)."""


def check_args(args: Any, allowed: set[str], required: set[str]) -> dict[str, Any]:
    """``args`` as a model sent them, refused in one line unless a JSON object with only
    ``allowed`` keys and every ``required`` one (a stranger's key is named, cut to 40)."""
    if not isinstance(args, dict):
        raise InputError("arguments must be a JSON object")
    unknown = sorted(str(k)[:40] for k in set(args) - allowed)
    if unknown:
        more = f" and {len(unknown) - NAMED:,} more" if len(unknown) > NAMED else ""
        raise InputError(
            f"unknown argument(s) {', '.join(unknown[:NAMED])}{more}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    missing = sorted(required - set(args))
    if missing:
        raise InputError(f"missing argument(s) {', '.join(missing)}")
    return args


def _args(args: dict[str, Any], allowed: set[str], required: set[str]) -> dict[str, Any]:
    check_args(args, allowed, required)
    bank = args.get("bank")
    if bank is not None and not isinstance(bank, str):
        raise InputError("bank must be a string")
    return args


SHOWN_VALUE_CHARS = 2_000
"""What a search or the ``recall`` tool shows of each value: ten rows of 16 KiB made one
``memory search`` a 160 KB reply (20 Matrix messages), and one recall 192 KB for the model."""


def _shown(value: str) -> str:
    if len(value) <= SHOWN_VALUE_CHARS:
        return value
    return f"{value[:SHOWN_VALUE_CHARS]}… ({len(value) - SHOWN_VALUE_CHARS:,} more characters)"


def format_hits(hits: list[Hit]) -> str:
    """One line a hit, in recall's order, each value cut to ``SHOWN_VALUE_CHARS``; an earlier
    statement of the same teller about the same subject as a newer hit says so ("earlier: …",
    ``memory.current``)."""
    marks = {id(h): e for h, e in newest_first(hits, _told)}
    return "\n".join(
        f"- [{h.key}]: {earlier_mark(_shown(h.value), marks[id(h)])}"
        + (f" (tags: {', '.join(h.tags)})" if h.tags else "")
        for h in hits
    )


# What a search says when it searched only the start of a long query (tokenize.bound_query):
# the one wording of ``/memory search``, the ``recall`` tool and the web bank page. It lives
# here, not with the command, because the tool (memory) may not import commands.
CUT_TERMS = "(searched the first {terms} distinct words of the query)"
CUT_BYTES = "(searched the first {bytes:,} bytes of the query)"


def cut_note(bounded: BoundedQuery) -> str:
    """One line saying what of a query was left out, or "" when it was searched whole."""
    if bounded.cut == "terms":
        return CUT_TERMS.format(terms=bounded.terms)
    if bounded.cut == "bytes":
        return CUT_BYTES.format(bytes=MAX_QUERY_BYTES)
    return ""


def _told(hit: Hit) -> Told:
    speaker = hit.origin.speaker if hit.origin is not None else ""
    return statement(hit.key, hit.value, speaker, int(hit.timestamp.timestamp() * 1_000_000))


async def _remember(scope: MemoryScope, args: dict[str, Any]) -> str:
    a = _args(args, {"key", "value", "tags", "bank"}, {"key", "value"})
    await scope.remember(a["key"], a["value"], a.get("tags"), a.get("bank"))
    where = f" in bank {a['bank']}" if a.get("bank") else ""
    return f"Remembered {a['key']!r}{where}."


async def _recall(scope: MemoryScope, args: dict[str, Any]) -> str:
    a = _args(args, {"query", "tags", "limit", "bank"}, set())
    query = a.get("query", "")
    hits = await scope.recall(
        query if query is not None else "", a.get("tags"), a.get("limit", 10), a.get("bank")
    )
    bounded = bound_query(query) if isinstance(query, str) else None
    note = cut_note(bounded) if bounded is not None else ""
    if not hits:  # the query as searched: a cut one is not echoed whole into the model's context
        shown = bounded.text if bounded is not None else query
        said = f"No memories found for {shown!r}." if query else "No memories found."
    else:
        said = format_hits(hits)
    return said + ("\n" + note if note else "")


async def _forget(scope: MemoryScope, args: dict[str, Any]) -> str:
    a = _args(args, {"key", "bank"}, {"key"})
    await scope.forget(a["key"], a.get("bank"))
    return f"Forgot {a['key']!r}."


async def _list_banks(scope: MemoryScope, args: dict[str, Any]) -> str:
    _args(args, set(), set())
    lines = [f"- {b.name}: {b.permission}" for b in await scope.banks()]
    return "Memory banks you can see (name: permission):\n" + "\n".join(lines)


TOOLS: dict[str, Tool[MemoryScope]] = {
    t.name: t
    for t in [
        Tool(
            "remember",
            "Store a fact in long-term memory under a short key. Start the key with who or "
            "what it is about (e.g. caroline.adoption_research) and make the value "
            "self-contained (who said what, about what). Writing an existing key replaces it.",
            {
                "type": "object",
                "properties": {
                    "key": {"type": "string", "maxLength": MAX_KEY_CHARS},
                    "value": {"type": "string"},
                    "tags": _TAGS,
                    "bank": _BANK,
                },
                "required": ["key", "value"],
                "additionalProperties": False,
            },
            _remember,
        ),
        Tool(
            "recall",
            "Search long-term memory. An empty query lists the newest entries.",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "tags": _TAGS,
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                    "bank": _BANK,
                },
                "additionalProperties": False,
            },
            _recall,
        ),
        Tool(
            "forget",
            "Hide a key from memory (its history is kept).",
            {
                "type": "object",
                "properties": {"key": {"type": "string"}, "bank": _BANK},
                "required": ["key"],
                "additionalProperties": False,
            },
            _forget,
        ),
        Tool(
            "list_memory_banks",
            "List the memory banks you can use, with your permission on each.",
            {"type": "object", "properties": {}, "additionalProperties": False},
            _list_banks,
        ),
    ]
}


async def run_tool(
    scope: MemoryScope, allowed: list[str], name: str, arguments: str | dict[str, Any]
) -> tuple[bool, str]:
    """Run a tool call from the model: (ok, reply). Never raises for bad input."""
    if name not in allowed:
        usable = ", ".join(t for t in allowed if t in TOOLS) or "none"
        return (
            False,
            f"Error: tool {name[:40]!r} is not allowed for this agent; "
            f"tools you can use: {usable}.",
        )
    tool = TOOLS.get(name)
    if tool is None:
        return False, f"Error: there is no tool {name[:40]!r}."
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
        if args is None:
            args = {}
        return True, await tool.run(scope, args)
    except (json.JSONDecodeError, RecursionError):  # nested past the parser's depth too
        return False, "Error: the arguments are not valid JSON; send a JSON object."
    except ChazError as exc:
        return False, f"Error: {exc}"

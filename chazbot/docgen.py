"""Generate the reference pages in ``docs/`` from the code: ``python -m chazbot.docgen``.

``docs/commands.md`` comes from the declared command tree, ``docs/configuration.md`` from
the pydantic config models; a test checks that the committed pages are current.
"""

from __future__ import annotations

import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from chazbot.commands import TREE
from chazbot.config import MAX_DEPTH, MAX_VALUES, Config

DOCS = Path(__file__).resolve().parent.parent / "docs"


def commands_page() -> str:
    lines = [
        "# Commands reference",
        "",
        "Generated from the command tree by `python -m chazbot.docgen`; do not edit by hand.",
        "",
        "The same commands work in every transport: `/memory list` in `chazbot chat`,",
        '`!chaz memory list` in Matrix, `chazbot cmd "/memory list"` on the shell. Verbs are',
        "case-insensitive; a missing or extra argument answers with the usage line and changes",
        "nothing. Commands marked *admins* need a sender on `matrix.admins` in Matrix.",
        "Agents are an access boundary for everyone else: `search`, `stats` and `forget` reach",
        "only the session agent's own memory and the banks that agent can read, and choosing",
        "another agent (`/agent NAME`) needs an admin; `matrix.room_agents` can restrict the",
        "agents a room may use at all. A bank or agent ref is a name or a DB id; `grant` and",
        "`revoke` also take another peer's key as `/pubkey` prints it (`ed25519:…`).",
        "",
        "| command | what | who |",
        "| --- | --- | --- |",
    ]
    for c in TREE.commands:
        usage = c.usage("/").replace("|", "\\|")
        lines.append(f"| `{usage}` | {c.summary} | {'admins' if c.admin else 'anyone allowed'} |")
    return "\n".join(lines) + "\n"


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return " | ".join(str(a) for a in typing.get_args(annotation))
    if origin is list:
        return f"list of {_type_name(typing.get_args(annotation)[0])}"
    if isinstance(annotation, type):
        return {
            "NoneType": "null",
            "str": "string",
            "int": "integer",
            "float": "number",
            "bool": "boolean",
            "PosixPath": "path",
            "Path": "path",
        }.get(annotation.__name__, annotation.__name__)
    return str(annotation)


def _model_rows(
    model: type[BaseModel], prefix: str, out: list[str], nested: list[tuple[str, type[BaseModel]]]
) -> None:
    for name, field in model.model_fields.items():
        annotation = field.annotation
        inner = [
            a
            for a in typing.get_args(annotation)
            if isinstance(a, type) and issubclass(a, BaseModel)
        ]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            inner = [annotation]
        value = None if field.is_required() else field.get_default(call_default_factory=True)
        default = (
            "required"
            if field.is_required()
            else (str(value) if isinstance(value, Path) else repr(value))
        )
        shown = (field.json_schema_extra or {}) if isinstance(field.json_schema_extra, dict) else {}
        if "shown_default" in shown:
            default = str(shown["shown_default"])
        if inner:
            default = "see below" if not field.is_required() else "required"
            nested.append(
                (
                    f"{prefix}{name}" + ("[]" if typing.get_origin(annotation) is list else ""),
                    inner[0],
                )
            )
        typename = _type_name(annotation).replace("|", "\\|")
        out.append(
            f"| `{prefix}{name}` | {typename} | `{default}` |".replace("`see below`", "see below")
        )


def configuration_page() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Generated from the pydantic models in `chazbot/config/` by `python -m chazbot.docgen`.",
        "`config.yaml.example` explains every key with a comment. Strings may use `${VAR}`",
        "(an error naming VAR when it is unset) or `${VAR:-default}`; unknown keys are an error",
        f"naming their path. A file holds at most {MAX_VALUES:,} values (YAML aliases counted",
        f"each time they are used) nested at most {MAX_DEPTH} deep.",
        "",
    ]
    todo: list[tuple[str, type[BaseModel]]] = [("", Config)]
    while todo:
        prefix, model = todo.pop(0)
        title = prefix or "top level"
        doc = (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else ""
        lines += [f"## {title}", "", doc, "", "| key | type | default |", "| --- | --- | --- |"]
        nested: list[tuple[str, type[BaseModel]]] = []
        _model_rows(model, f"{prefix}." if prefix else "", lines, nested)
        lines.append("")
        todo += nested
    return "\n".join(lines)


PAGES = {"commands.md": commands_page, "configuration.md": configuration_page}


def main() -> int:
    DOCS.mkdir(exist_ok=True)
    for name, make in PAGES.items():
        (DOCS / name).write_text(make(), encoding="utf-8")
        print(f"wrote docs/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

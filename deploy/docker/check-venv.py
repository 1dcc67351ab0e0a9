"""Fail the image build when a shared object or extension module of the venv cannot load.

Run by the Dockerfile's runtime stage (``python check-venv.py /opt/chazbot``), so a wheel that
needs a system library the slim base lacks (``xllamacpp`` and ``libgomp.so.1``, issue 25)
stops the build instead of surfacing as a 503 from /healthz in production. For every ELF
shared object in the venv:

1. ``ldd``: a library "not found" is named, with the files that need it;
2. it is loaded (``dlopen``, through ctypes), which also catches missing symbol versions,
   and, when it is an extension module of this Python (its name ends in one of
   ``EXTENSION_SUFFIXES``, it sits in a package and exports ``PyInit_<name>``), it is
   imported.

Prints one line per problem and exits 1, or one summary line and exits 0.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.machinery
import subprocess
import sys
from collections import defaultdict
from pathlib import Path


def elf_files(root: Path) -> list[Path]:
    """Every ELF shared object under ``root``."""
    found = []
    for path in sorted(root.rglob("*.so*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as handle:
                if handle.read(4) == b"\x7fELF":
                    found.append(path)
    return found


def missing_libraries(files: list[Path]) -> dict[str, list[Path]]:
    """Library name -> the files whose ``ldd`` says it is not found."""
    missing: dict[str, list[Path]] = defaultdict(list)
    for path in files:
        result = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=False)
        for line in (result.stdout + result.stderr).splitlines():
            if "not found" in line:
                missing[line.strip().split()[0]].append(path)
    return missing


def module_name(site: Path, path: Path) -> str | None:
    """The dotted name ``path`` is imported as, if it is an extension module of this Python."""
    suffix = next((s for s in importlib.machinery.EXTENSION_SUFFIXES if path.name.endswith(s)), "")
    if not suffix or site not in path.parents:
        return None
    parts = [*path.relative_to(site).parent.parts, path.name[: -len(suffix)]]
    if not all(p.isidentifier() for p in parts):
        return None
    for depth in range(1, len(parts)):
        if not (site.joinpath(*parts[:depth]) / "__init__.py").is_file():
            return None
    return ".".join(parts)


def main(argv: list[str]) -> int:
    venv = Path(argv[1] if len(argv) > 1 else sys.prefix)
    files = elf_files(venv)
    problems = [
        f"{lib} not found (needed by {', '.join(str(p.relative_to(venv)) for p in paths[:3])})"
        for lib, paths in sorted(missing_libraries(files).items())
    ]
    sites = sorted(venv.glob("lib/python3*/site-packages"))
    imported = 0
    for path in files:
        shown = path.relative_to(venv)
        try:
            library = ctypes.CDLL(str(path))
        except OSError as exc:
            problems.append(f"cannot load {shown}: {' '.join(str(exc).split())}")
            continue
        name = next((n for site in sites if (n := module_name(site, path))), None)
        if name is None or not hasattr(library, "PyInit_" + name.rsplit(".", 1)[-1]):
            continue  # a library loaded with ctypes (pycryptodome's), not a module
        try:
            importlib.import_module(name)
            imported += 1
        except Exception as exc:  # any failure to import is what this check is for
            problems.append(f"cannot import {name}: {' '.join(str(exc).split())}")
    for problem in problems:
        print(f"check-venv: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"check-venv: {len(files)} shared objects load, {imported} extension modules import")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

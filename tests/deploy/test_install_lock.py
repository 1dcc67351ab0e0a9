"""Installs come from a lock (issue 47): a fresh install had taken Markdown 3.11.4, released after
CI last passed, and one test failed; nothing pinned what the test command installed.

- Every set of extras that an install script or the image uses has a lock in deploy/lock/,
  compiled from pyproject.toml as it is now (its ``# input sha256:`` line), every package at one
  exact version with the sha256 of its wheels.
- deploy/install.sh and the Dockerfile install only from the locks, with ``--require-hashes``;
  a lock older than pyproject.toml stops an install with one line naming ``deploy/lock.sh``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

SCRIPT = ROOT / "deploy/docker/requirements.py"
LOCKS = ROOT / "deploy/lock"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def _sets() -> list[str]:
    """The sets of extras deploy/lock.sh compiles, read off the script."""
    found = re.search(r"^SETS=\(([^)]*)\)", (ROOT / "deploy/lock.sh").read_text(), re.M)
    assert found is not None
    return found.group(1).split()


def _requirements(work: Path, extras: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(cwd / "deploy/docker/requirements.py"), extras,
         str(work / "deps.txt"), str(work / "nodeps.txt")],
        cwd=cwd, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _entries(text: str) -> list[tuple[str, list[str]]]:
    """Each locked package's first line and the hashes that follow it."""
    entries: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if PIN.match(line):
            entries.append((line, []))
        elif line.strip().startswith("--hash=") and entries:
            entries[-1][1].append(line.strip().rstrip(" \\"))
    return entries


def _pin(line: str) -> str:
    """``name==version`` of a lock's line, without its markers."""
    return line.split(";")[0].split(" \\")[0].strip()


def test_every_install_set_has_a_current_lock_of_exact_hashed_versions(tmp_path: Path) -> None:
    sets = _sets()
    assert {"dev", "e2e,fast,homeserver,local", "e2e,local", "e2e"} <= set(sets)
    # the extras in the order deploy/local.sh and the image name them find the same lock
    for extras in [*sets, "local,e2e,homeserver,fast", "local,e2e"]:
        done = _requirements(tmp_path, extras)
        assert done.returncode == 0, f"{extras}: {done.stderr}"
        entries = _entries((tmp_path / "deps.txt").read_text())
        assert len(entries) >= 40, extras
        for line, hashes in entries:
            assert hashes and all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", h) for h in hashes)
            assert "==" in line and not re.search(r"[<>~]=|\*", line.split(";")[0]), line
    dev = {PIN.match(line).group(1): line for line, _ in _entries((LOCKS / "dev.txt").read_text())}  # type: ignore[union-attr]
    # the finding's package is gone, its linear-time replacement locked; the tools' SDK too
    assert "markdown" not in {n.lower() for n in dev} and "markdown-it-py" in dev
    assert "mcp" in dev and "matrix-synapse" in dev and "pytest" in dev
    # every other set takes the dev lock's versions (what CI tested)
    dev_lines = [line for line, _ in _entries((LOCKS / "dev.txt").read_text())]
    for extras in sets:
        (tmp_path / "x").mkdir(exist_ok=True)
        assert _requirements(tmp_path / "x", extras).returncode == 0
        for line, _ in _entries((tmp_path / "x/deps.txt").read_text()):
            name = PIN.match(line).group(1)  # type: ignore[union-attr]
            if name in dev:
                assert _pin(line) in {_pin(o) for o in dev_lines if o.startswith(name + "==")}


def test_a_lock_older_than_pyproject_or_missing_stops_the_install_in_one_line(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    (tree / "deploy/docker").mkdir(parents=True)
    shutil.copy(SCRIPT, tree / "deploy/docker/requirements.py")
    shutil.copy(ROOT / "deploy/docker/requirements-files.txt", tree / "deploy/docker/")
    shutil.copytree(LOCKS, tree / "deploy/lock")
    pyproject = (ROOT / "pyproject.toml").read_text()
    (tree / "pyproject.toml").write_text(pyproject)
    assert _requirements(tmp_path, "e2e", tree).returncode == 0
    newer = pyproject.replace('"pyyaml>=6",', '"pyyaml>=6", "left-pad>=1",')
    assert newer != pyproject
    (tree / "pyproject.toml").write_text(newer)
    stale = _requirements(tmp_path, "e2e", tree)
    assert stale.returncode != 0
    assert stale.stderr.strip() == (
        "deploy/lock/e2e.txt is older than pyproject.toml: run `bash deploy/lock.sh` to "
        "refresh the locks"
    )
    (tree / "pyproject.toml").write_text(pyproject)
    missing = _requirements(tmp_path, "e2e,homeserver", tree)
    assert missing.returncode != 0 and len(missing.stderr.strip().splitlines()) == 1
    assert "no lock for chazbot[e2e,homeserver]" in missing.stderr
    assert "deploy/lock.sh" in missing.stderr


@pytest.mark.parametrize("path", ["deploy/install.sh", "Dockerfile"])
def test_installs_take_only_hashed_locked_wheels(path: str) -> None:
    text = (ROOT / path).read_text()
    installs = [
        " ".join(m.split()) for m in re.findall(r"pip(?:_quiet)? install((?:\\\n|[^\n&;])*)", text)
    ]
    wheels = [i for i in installs if "--requirement" in i]
    assert len(wheels) == 3, installs  # the build tools, the lock, the model packages
    assert all("--require-hashes" in i and "--only-binary :all:" in i for i in wheels), wheels
    assert "deploy/lock/build-tools.txt" in text
    # chazbot itself: no dependencies and the locked build backend, nothing fetched unpinned
    own = [i for i in installs if "--requirement" not in i and "--upgrade" not in i]
    assert own and all("--no-deps" in i and "--no-build-isolation" in i for i in own), own

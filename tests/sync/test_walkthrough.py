"""The seed's walkthrough step 4, verbatim, between two real ``chazbot run`` processes syncing
over loopback HTTP; every command is ``chazbot cmd``/``chazbot tool`` reaching the running
service through its control socket.

A: ``/memory new project-notes``, ``/memory share project-notes``; B: ``/memory import
<ticket>`` (approved on A with ``/sharing approve``), ``/memory grant project-notes gamma
write``; writes from either side replicate; A's ``/memory revoke project-notes <B's peer key>``
stops B's agents' later writes everywhere but B.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.synapse import free_port
from tests.support.waits import wait_until_sync

pytestmark = pytest.mark.timeout(300)


@dataclass
class Service:
    """A ``chazbot run`` process and the working directory its config lives in."""

    where: Path
    proc: subprocess.Popen[str]

    @property
    def log(self) -> str:
        return (self.where / "run.log").read_text(errors="replace")

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "CHAZBOT_CONFIG": str(self.where / "config.yaml")}
        return subprocess.run(
            [sys.executable, "-m", "chazbot.cli", *args],
            cwd=self.where,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def cmd(self, text: str, ok: bool = True) -> str:
        r = self.cli("cmd", text)
        assert (r.returncode == 0) is ok, (text, r.stdout, r.stderr)
        return r.stdout

    def tool(self, agent: str, name: str, **arguments: object) -> tuple[bool, str]:
        r = self.cli("tool", name, json.dumps(arguments), "--agent", agent)
        assert "Traceback" not in r.stderr, r.stderr
        return r.returncode == 0, r.stdout

    def keys(self, agent: str, bank: str) -> set[str]:
        ok, text = self.tool(agent, "recall", query="", bank=bank, limit=50)
        assert ok, text
        return set(re.findall(r"^- \[([^\]]+)\]", text, re.M))


def start(where: Path, agents: list[str]) -> Service:
    where.mkdir(parents=True)
    lines = [
        f"state_dir: {where / 'state'}",
        f"sync_listen: 127.0.0.1:{free_port()}",
        "sync_allow_private_peers: true",  # the two peers are on loopback
        'http_listen: ""',
        "agents:",
        *(f"  - name: {a}" for a in agents),
    ]
    (where / "config.yaml").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "CHAZBOT_CONFIG": str(where / "config.yaml")}
    with open(where / "run.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "chazbot.cli", "run"],
            cwd=where,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    service = Service(where, proc)
    wait_for(lambda: "chazbot is running" in service.log, "the service to start", service)
    return service


def wait_for(check: Callable[[], bool], what: str, service: Service, timeout: float = 60) -> None:
    def alive() -> None:
        assert service.proc.poll() is None, f"chazbot exited:\n{service.log[-3000:]}"

    wait_until_sync(check, timeout, what, interval=0.2, alive=alive)


@pytest.fixture
def peers(tmp_path: Path) -> Iterator[tuple[Service, Service]]:
    a = start(tmp_path / "a", ["alpha", "beta"])
    b = start(tmp_path / "b", ["gamma"])
    try:
        yield a, b
    finally:
        for s in (a, b):
            s.proc.send_signal(signal.SIGTERM)
        for s in (a, b):
            assert s.proc.wait(30) == 0, s.log[-3000:]
            assert "Traceback" not in s.log, s.log[-3000:]


def test_walkthrough_step_4_between_two_running_services(peers: tuple[Service, Service]) -> None:
    a, b = peers
    # steps 1-3 on A
    a.cmd('/memory new project-notes "Shared notes for the chaz project"')
    a.cmd("/memory grant project-notes alpha write")
    a.cmd("/memory grant project-notes beta read")
    ok, _ = a.tool(
        "alpha", "remember", key="architecture.sessions", value="one DB each", bank="project-notes"
    )
    assert ok
    # step 4, verbatim
    shared = a.cmd("/memory share project-notes")
    ticket = re.search(r"eidetica:\S+", shared)
    assert ticket is not None, shared
    asked = b.cmd(f"/memory import {ticket.group(0)}")
    assert "/sharing approve" in asked, asked
    request = re.search(r"request (\d+)", a.cmd("/sharing requests"))
    assert request is not None
    a.cmd(f"/sharing approve {request.group(1)}")
    imported = b.cmd(f"/memory import {ticket.group(0)}")
    assert "Imported bank project-notes" in imported and "write" in imported, imported
    granted = b.cmd("/memory grant project-notes gamma write")
    assert "Granted gamma write on project-notes" in granted, granted

    ok, text = b.tool("gamma", "remember", key="from.b", value="gamma on B", bank="project-notes")
    assert ok, text
    ok, text = a.tool("alpha", "remember", key="from.a", value="alpha on A", bank="project-notes")
    assert ok, text
    everything = {"architecture.sessions", "from.a", "from.b"}
    wait_for(lambda: a.keys("beta", "project-notes") == everything, "B's write on A", a)
    wait_for(lambda: b.keys("gamma", "project-notes") == everything, "A's write on B", b)

    # the owner sees B's peer key (as B's /pubkey prints it) and revokes it
    b_key = b.cmd("/pubkey").splitlines()[0].split()[-1]
    stats = a.cmd("/memory stats project-notes")
    assert f"{b_key} write" in stats, stats
    revoked = a.cmd(f"/memory revoke project-notes {b_key}")
    assert "Revoked key" in revoked, revoked
    assert f"{b_key} write" not in a.cmd("/memory stats project-notes")

    b.tool("gamma", "remember", key="after.revoke", value="reaches no one", bank="project-notes")
    ok, _ = a.tool("alpha", "remember", key="after.a", value="A goes on", bank="project-notes")
    assert ok
    # B's replicator is turned away by A (its key may no longer read the bank), so the
    # later write never reaches A; A's own agents go on writing
    wait_for(lambda: "may not" in b.log, "A to turn B's sync away", b)
    assert a.keys("beta", "project-notes") == everything | {"after.a"}
    assert "after.a" not in b.keys("gamma", "project-notes")

"""One process per state dir: real ``chazbot`` processes on one state directory.

A second ``run`` refuses naming the first one's pid and leaves its control socket alone;
``chazbot chat`` beside a running service goes through the service (the stand-in LLM
answers the service), and the turn's history and the remembered row are in the state the
service leaves behind; ``chazbot.open`` and the CLI refuse a state dir someone else holds.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

import chazbot
from chazbot.errors import ConflictError
from chazbot.ledger.statelock import LOCK_FILE, ROLE_SERVICE, StateLocked
from chazbot.peer import Peer
from chazbot.transports.control import ControlServer
from tests.support.service import Service, answers, chazbot_cli, start_service
from tests.support.standin_llm import StandinLLM

pytestmark = pytest.mark.timeout(180)


def write_config(where: Path, llm: StandinLLM | None = None) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"state_dir": str(where / "state"), "sync_listen": "", "http_listen": ""}
    if llm is not None:
        data["llm"] = llm.client_settings(timeout_s=20)
    path = where / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest_asyncio.fixture
async def service(tmp_path: Path, standin_llm: StandinLLM) -> AsyncIterator[Service]:
    where = tmp_path / "peer"
    write_config(where, standin_llm)
    running = await start_service(where)
    try:
        yield running
    finally:
        if running.proc.returncode is None:
            running.proc.kill()
            await running.proc.wait()


async def test_a_second_run_refuses_naming_the_pid_and_chat_goes_through_the_service(
    service: Service, standin_llm: StandinLLM
) -> None:
    where, state = service.where, service.where / "state"
    inode = service.sock.stat().st_ino

    code, out, err = await chazbot_cli(where, "run")
    assert code == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"pid {service.proc.pid}" in lines[0], err
    assert "chazbot run" in lines[0] and "Traceback" not in err
    # the refused run left the live service's socket alone
    assert service.sock.stat().st_ino == inode and answers(service.sock)

    # the in-process API refuses too, naming the service
    with pytest.raises(StateLocked) as info:
        async with chazbot.open(state):
            pass
    assert info.value.pid == service.proc.pid and "\n" not in str(info.value)

    # chat beside the running service: it cannot open the state itself, so an answer from
    # the stand-in LLM means the turn ran in the service
    before = len(standin_llm.requests)
    script = "remember color is teal\nhello there\n/memory new notes\n"
    code, out, err = await chazbot_cli(where, "chat", "--session", "side", stdin=script)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("Noted:"), out
    assert lines[1] == "From memory: [color]: teal"  # auto-recall found the new row
    assert lines[2].startswith("Created bank notes"), out
    assert len(standin_llm.requests) == before + 3  # remember: call + result; hello: one
    # the service's own memory saw the row at once (same process, same caches)
    code, out, _ = await chazbot_cli(where, "tool", "recall", json.dumps({"query": "color"}))
    assert code == 0 and "[color]: teal" in out, out

    await service.stop()
    assert not service.sock.exists()
    # nothing lost: the turn's history and the row are in the state the service left
    cfg = chazbot.Config(state_dir=state, sync_listen="", http_listen="")
    async with chazbot.open(state, cfg) as peer:
        history = await (await peer.session("side")).history()
        assert [(m.role, m.content) for m in history if m.role in ("user", "assistant")] == [
            ("user", "remember color is teal"),
            ("assistant", "Noted: Remembered 'color'."),
            ("user", "hello there"),
            ("assistant", "From memory: [color]: teal"),
        ]
        assert await peer.registry.get("bank", "notes") is not None
        hits = await peer.agent("chaz").recall("color")
        assert [(h.key, h.value) for h in hits] == [("color", "teal")]


async def test_cli_and_run_refuse_a_state_dir_held_by_chazbot_open(tmp_path: Path) -> None:
    where = tmp_path / "peer"
    write_config(where)
    state = where / "state"
    cfg = chazbot.Config(state_dir=state, sync_listen="", http_listen="")
    async with chazbot.open(state, cfg):
        for args in (("run",), ("cmd", "/memory list"), ("tool", "recall", "{}"), ("verify",)):
            code, out, err = await chazbot_cli(where, *args)
            assert code == 1, (args, out, err)
            assert err.strip().count("\n") == 0 and f"pid {os.getpid()}" in err, (args, err)
        with pytest.raises(StateLocked):  # a second open in this very process, too
            async with chazbot.open(state, cfg):
                pass
    # released on close: the CLI opens the state itself now
    code, out, err = await chazbot_cli(where, "cmd", "/memory new notes")
    assert code == 0 and "Created bank notes" in out, (out, err)
    assert (state / LOCK_FILE).read_text() == ""  # emptied on release


async def test_a_stale_socket_is_replaced_a_live_one_kept_and_cli_waits_for_a_starting_service(
    tmp_path: Path,
) -> None:
    where = tmp_path / "peer"
    write_config(where)
    state = where / "state"
    state.mkdir(mode=0o700)
    sock = state / "control.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(sock))  # a socket file nobody listens on any more
    stale.close()
    cfg = chazbot.Config(state_dir=state, sync_listen="", http_listen="")
    # a service that holds the lock but does not listen yet, as while it starts
    peer = await Peer.open(cfg, role=ROLE_SERVICE)
    try:
        env = {**os.environ, "CHAZBOT_CONFIG": str(where / "config.yaml")}
        waiting = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "chazbot.cli", "cmd", "/memory new notes"),
            cwd=where,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert waiting.stderr is not None
        line = await asyncio.wait_for(waiting.stderr.readline(), 60)
        assert f"waiting for chazbot run (pid {os.getpid()})" in line.decode(), line
        server = ControlServer(peer)
        await server.start()  # replaces the stale socket
        try:
            out, err = await asyncio.wait_for(waiting.communicate(), 60)
            assert waiting.returncode == 0, err
            assert "Created bank notes" in out.decode()
            assert await peer.registry.get("bank", "notes") is not None  # done in this process
            # a second server never takes over a socket a live one answers on
            with pytest.raises(ConflictError):
                await ControlServer(peer).start()
            assert answers(sock)
        finally:
            await server.stop()
        assert not sock.exists()
    finally:
        await peer.close()

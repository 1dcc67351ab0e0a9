"""A real ``chazbot run`` for tests, and the CLI beside it (test_lock, test_operations)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from chazbot.config import load_config
from chazbot.transports.control_client import send_to_service
from tests.support.waits import wait_until


async def chazbot_cli(
    where: Path, *args: str, stdin: str = "", timeout: float = 240
) -> tuple[int, str, str]:
    """``chazbot <args>`` with ``where``'s config: (exit status, stdout, stderr)."""
    env = {**os.environ, "CHAZBOT_CONFIG": str(where / "config.yaml")}
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "chazbot.cli", *args),
        cwd=where,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def answers(path: Path) -> bool:
    """Whether something listens on the unix socket ``path``."""
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


class Service:
    """A running ``chazbot run`` in ``where``."""

    def __init__(self, where: Path, proc: asyncio.subprocess.Process) -> None:
        self.where, self.proc = where, proc
        self.sock = where / "state" / "control.sock"
        self.cfg = load_config(str(where / "config.yaml"))

    async def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        reply = await send_to_service(self.cfg, request)
        assert reply is not None, "the service stopped listening"
        return reply

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(self.proc.wait(), 60) == 0


async def start_service(where: Path) -> Service:
    """Start ``chazbot run`` with ``where``'s config; return once its control socket answers."""
    env = {**os.environ, "CHAZBOT_CONFIG": str(where / "config.yaml")}
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "chazbot.cli", "run"),
        cwd=where,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    service = Service(where, proc)

    def up() -> bool:
        assert proc.returncode is None, "chazbot run exited"
        return answers(service.sock)

    await wait_until(up, 60, "the control socket of chazbot run")
    return service

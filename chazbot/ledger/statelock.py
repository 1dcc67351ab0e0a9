"""One process per state directory: an exclusive ``flock`` on ``state_dir/chazbot.lock``.

The ledger's caches assume it is the only writer of its file, so two processes on one state
directory would diverge. Whoever opens the state (``chazbot run``, ``chazbot.open``, a
``chazbot cmd`` with no service running) holds this lock until it closes; the kernel drops it
when the process dies, however it dies, so a crash never leaves a stale lock.

The file holds the holder's pid and role (``12345 run``) so a refused process can name it.
It is emptied on release and never deleted (deleting a lock file races with the next
locker).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path

from chazbot.errors import ConflictError

LOCK_FILE = "chazbot.lock"
ROLE_SERVICE = "run"


class StateLocked(ConflictError):
    """Another process holds the state directory; ``pid`` and ``role`` name it."""

    def __init__(self, message: str, pid: int = 0, role: str = "") -> None:
        super().__init__(message)
        self.pid = pid
        self.role = role


@dataclass(frozen=True)
class Holder:
    """Who holds a state directory: a pid (0 if it could not be read) and its role."""

    pid: int
    role: str


class StateLock:
    """The held lock of one state directory (release with ``release``)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, state_dir: Path, role: str) -> StateLock:
        """Take the lock or raise ``StateLocked`` naming the holder's pid (never waits)."""
        path = Path(state_dir) / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = read_holder(path)
            what = "chazbot run" if holder.role == ROLE_SERVICE else f"chazbot ({holder.role})"
            pid = f"pid {holder.pid}" if holder.pid else "pid unknown"
            raise StateLocked(
                f"the state dir {state_dir} is in use by {what}, {pid}; stop it first "
                "(chazbot cmd, tool and chat go through a running service)",
                holder.pid,
                holder.role,
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {role}\n".encode(), 0)
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Empty the file and let go (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the last descriptor drops the flock


def read_holder(path: Path, wait_s: float = 1.0) -> Holder:
    """The pid and role written by the lock's holder (waits briefly while it writes them)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            text = path.read_text(encoding="ascii", errors="replace").split()
        except OSError:
            text = []
        if len(text) == 2 and text[0].isdigit():
            return Holder(int(text[0]), text[1][:40])
        if time.monotonic() >= deadline:
            return Holder(0, "unknown")
        time.sleep(0.01)  # the holder has the lock but has not written its pid yet

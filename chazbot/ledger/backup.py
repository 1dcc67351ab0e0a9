"""A consistent copy of a live state file, and the entry check on a file read beside its owner.

SQLite's online backup API copies a database through a connection of its own. Done in one
step (``pages=-1``) it runs inside one read transaction: in WAL mode writers go on meanwhile
(a reader never blocks them), and the copy is the database as of the moment the step began,
with every commit up to then, those still only in the WAL included. A step-wise copy would
restart whenever another connection writes, which under a steady write load never ends.

These functions are synchronous and open their own connections: callers run them in a thread
of their own (``asyncio.to_thread``), never on the ledger's worker, so the service's reads and
writes do not queue behind a copy or a check of a large file. They load no library beyond the
standard one (the ledger layer's rule).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from pathlib import Path
from types import SimpleNamespace

from chazbot.errors import BackendError, InputError

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` starts with SQLite's file header."""
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=10000")
    return conn


def copy_database(source: Path, target: Path) -> int:
    """Copy the SQLite database ``source`` (live or not) to the new file ``target``, owner-only
    (0600), as one consistent snapshot; the copy is a single file (rollback journal, no WAL).
    Returns its size in bytes. ``target`` must not exist; on failure nothing is left there."""
    fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    os.close(fd)
    try:
        src = _connect(source)
        try:
            src.execute("PRAGMA query_only=ON")
            dst = sqlite3.connect(target, isolation_level=None)
            try:
                src.backup(dst)  # one step: one read transaction, one snapshot
                dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
            finally:
                dst.close()
        finally:
            src.close()
        with open(target, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(target, 0o600)
        return target.stat().st_size
    except sqlite3.Error as exc:
        with contextlib.suppress(OSError):
            target.unlink()
        raise BackendError(f"cannot copy {source.name}: {exc}") from exc
    except BaseException:
        with contextlib.suppress(OSError):
            target.unlink()
        raise


def verify_file(path: Path) -> tuple[int, list[tuple[str, str]]]:
    """Re-check every entry of the state file at ``path`` (its id, signature and authorisation,
    and SQLite's integrity check) through a connection of its own; the file may be in use by
    its owner meanwhile (WAL readers do not block it). Returns the entry count and failures."""
    from chazbot.ledger.ledger import _verify_all

    if not is_sqlite(path):
        raise InputError(f"{path} is not a SQLite state file")
    conn = _connect(path)
    try:
        conn.execute("PRAGMA query_only=ON")
        total = int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])
        # _verify_all reads only ``core.conn``; it builds the scratch ledger it re-checks into
        return total, _verify_all(SimpleNamespace(conn=conn))  # type: ignore[arg-type]
    except sqlite3.Error as exc:
        return 0, [("(file)", f"SQLite: {exc}")]
    finally:
        conn.close()


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()

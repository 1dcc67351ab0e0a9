"""A consistent copy of a live state file, and the check of a file read beside its owner.

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
from collections.abc import Sequence
from pathlib import Path

from chazbot.errors import BackendError, InputError
from chazbot.ledger import rebuild
from chazbot.ledger.core import LedgerCore
from chazbot.ledger.rebuild import FileCheck
from chazbot.ledger.schema import migrate
from chazbot.ledger.tables import LocalTable, migrate_tables

SQLITE_MAGIC = b"SQLite format 3\x00"
CREATE_NEW = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_WRONLY | os.O_CLOEXEC
"""How every file of a backup or a restore is made: a new file (an existing file or a link
at its name is an error, never followed), written only through this descriptor."""


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
    fd = os.open(target, CREATE_NEW, 0o600)
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


def verify_file(path: Path, tables: Sequence[LocalTable] = ()) -> FileCheck:
    """Check the state file at ``path`` through a connection of its own (``rebuild.check``:
    its schema, the ledger's and that of the features' ``tables``, every entry's id,
    signature and authorisation, and the tables derived from the entries against a replay of
    them, with SQLite's integrity check); the file may be in use by its owner meanwhile (WAL
    readers do not block it)."""
    if not is_sqlite(path):
        raise InputError(f"{path} is not a SQLite state file")
    conn = _connect(path)
    try:
        conn.execute("PRAGMA query_only=ON")
        rebuild.harden(conn)
        return rebuild.check(conn, tables)
    except sqlite3.DatabaseError as exc:
        return FileCheck(foreign=[("(file)", f"SQLite: {exc}")])
    finally:
        conn.close()


def bring_up_to_date(path: Path, tables: Sequence[LocalTable] = ()) -> FileCheck | None:
    """Migrate a restored copy (not in use) to this chazbot's schema (the ledger's and that of
    the features' ``tables``) and open it as a start
    does, unless its schema holds objects that are not chazbot's: then nothing runs on it (a
    trigger would fire during the migration) and the check that found them is returned. What
    is in the file after this is checked whole (``verify_file``) before it is used."""
    if not is_sqlite(path):
        raise InputError(f"{path.name} is not a SQLite state file")
    conn = _connect(path)
    try:
        rebuild.harden(conn)
        found = FileCheck()
        try:
            integrity = conn.execute("PRAGMA integrity_check").fetchall()
            if integrity != [("ok",)]:
                found.foreign.append(("(file)", "; ".join(str(r[0]) for r in integrity[:5])))
            else:
                found.foreign = rebuild.foreign_objects(conn, tables)
            if found.foreign:
                return found
            migrate(conn)
            migrate_tables(conn, tables)
            LedgerCore(conn)  # opened as a start opens it (whatever that settles, it does here)
        except sqlite3.DatabaseError as exc:
            found.foreign.append(("(file)", f"SQLite: {exc}"))
            return found
        except Exception as exc:  # a file this tampered-with is refused, not a crash
            found.foreign.append(("(file)", f"cannot be opened as a ledger: {exc!r}"[:300]))
            return found
        return None
    finally:
        conn.close()


def store_objects(path: Path) -> list[tuple[str, str]]:
    """Triggers and views in a SQLite file of the Matrix store (nio's schema has tables and
    indexes only; a trigger there would run inside nio's next write), or what keeps SQLite
    from reading it."""
    conn = _connect(path)
    try:
        conn.execute("PRAGMA query_only=ON")
        rebuild.harden(conn)
        found = conn.execute(
            "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view') ORDER BY name"
        ).fetchall()
        return [
            (rebuild.shown(f"{kind} {name} in {path.name}"), "the Matrix store has none")
            for kind, name in found
        ]
    except sqlite3.DatabaseError as exc:
        return [(rebuild.shown(path.name), f"SQLite: {exc}")]
    finally:
        conn.close()


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()

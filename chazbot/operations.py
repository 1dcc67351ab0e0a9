"""The operator's long jobs on a peer: export, import, reindex, verify, backup and restore.

Use-cases, not a transport: they sit on the peer's layer, above the peer they work on and
below every way in. Each job runs the same code whether ``chazbot run`` runs it for a client
of the control socket (``transports/control_ops``) or the command line runs it on a state dir
it opened itself (the web page's import shares ``IMPORT_BATCH``). A job reports through a
``Sink``: progress, data (export lines), and lines for stdout and stderr; ``TerminalSink``
draws them on this terminal, ``control_ops.SocketSink`` sends them to the client, which draws
them with a ``TerminalSink`` too, so the display is the same either way.

None of them holds the event loop: parsing, formatting, copying and checking run on worker
threads, the entry check of ``verify`` and the copy of ``backup`` on connections of their own
(so the ledger's thread keeps serving chat meanwhile), and writes go in batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TextIO

from chazbot.errors import InputError
from chazbot.ledger import Ledger
from chazbot.ledger.archive import Temporaries, remove_leftovers, write_backup
from chazbot.ledger.backup import verify_file
from chazbot.ledger.rebuild import FileCheck
from chazbot.ledger.tables import LocalTable
from chazbot.peer import STATE_FILE, Peer

log = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
EXPORT_CHUNK = 1000
"""Export lines per data message."""
IMPORT_BATCH = 100
"""Rows per entry of an import: each commit's rows are added to a loaded memory view in the
event loop, so this bounds how long one commit holds it."""

INTERRUPTED = {
    "import": "the batches written so far are whole; run it again to finish (the same keys "
    "are overwritten, not doubled)",
    "reindex": "the vectors written so far are kept; run it again to finish",
    "backup": "no backup file was written",
    "export": "the export is incomplete",
    "verify": "nothing was changed",
    "restore": "nothing was changed",
}


class Sink(Protocol):
    """Where a job reports: progress, export lines, and lines for stdout and stderr."""

    def progress(self, what: str, done: int, total: int) -> None: ...

    async def data(self, lines: list[str]) -> None: ...

    def out(self, text: str) -> None: ...

    def err(self, text: str) -> None: ...


class TerminalSink:
    """Draws a job's report on this terminal: a progress bar on stderr (redrawn in place),
    ``out`` on stdout, ``err`` on stderr, data to ``data_to`` (stdout by default)."""

    def __init__(self, data_to: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self.data_to = data_to
        self.stderr = stderr or sys.stderr
        self.drawn = False
        self.rows = 0

    def progress(self, what: str, done: int, total: int) -> None:
        width = 30
        filled = width * min(done, total) // max(total, 1)
        self.stderr.write(f"\r{what} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        self.stderr.flush()
        self.drawn = True

    def _end_bar(self) -> None:
        if self.drawn:
            self.stderr.write("\n")
            self.drawn = False

    async def data(self, lines: list[str]) -> None:
        (self.data_to or sys.stdout).write("".join(line + "\n" for line in lines))
        self.rows += len(lines)

    def out(self, text: str) -> None:
        self._end_bar()
        print(text, flush=True)

    def err(self, text: str) -> None:
        self._end_bar()
        print(text, file=self.stderr, flush=True)


def interrupted(op: str, sink: Sink) -> int:
    """Say what an interrupted ``op`` left (nothing harmful) and return its exit code."""
    sink.err(f"{op} interrupted: {INTERRUPTED.get(op, 'stopped')}")
    return EXIT_INTERRUPTED


async def resolve_db(peer: Peer, ref: str) -> tuple[str, str]:
    """(name, db id) of a bank or agent by name or DB id on this peer."""
    from chazbot.ledger.encoding import is_content_id

    reg = peer.registry
    found = await reg.by_db(ref) if is_content_id(ref) else None
    found = found or await reg.get("bank", ref) or await reg.get("agent", ref)
    if found is None:
        raise InputError(f"no bank or agent {ref[:80]!r} on this peer")
    return found.name, found.db


# ---- the jobs -------------------------------------------------------------------------------


async def export(peer: Peer, ref: str, sink: Sink) -> int:
    """Every visible row of a bank or agent as JSONL, oldest first, in chunks."""
    from chazbot.memory.transfer import export_lines

    _, db = await resolve_db(peer, ref)
    lines = await export_lines(peer.memory, db)
    for start in range(0, len(lines), EXPORT_CHUNK):
        await sink.data(lines[start : start + EXPORT_CHUNK])
    return EXIT_OK


async def import_rows(peer: Peer, ref: str, lines: list[str], sink: Sink) -> int:
    """Rows from JSONL lines into a bank: all checked first (a bad line writes nothing)."""
    from chazbot.memory.banks import writer_key_for
    from chazbot.memory.transfer import parse_all, write_parsed

    name, db = await resolve_db(peer, ref)
    key = await writer_key_for(peer.ledger, peer.registry, db)
    parsed, report = await asyncio.to_thread(parse_all, lines)
    if report.bad_lines:
        for error in report.errors:
            sink.err(error)
        if report.bad_lines > len(report.errors):
            sink.err(f"… and {report.bad_lines - len(report.errors)} more bad lines")
        sink.out(f"imported 0 rows into {name}; {report.bad_lines} bad lines, nothing written")
        return EXIT_FAILED
    total = len(parsed)
    sink.progress(f"import {name}", 0, total)
    log.info("import into %s: %d rows", name, total)
    await write_parsed(
        peer.memory,
        db,
        key,
        parsed,
        report,
        lambda n: sink.progress(f"import {name}", n, total),
        IMPORT_BATCH,
    )
    sink.out(f"imported {report.written} rows into {name}")
    return EXIT_OK


async def reindex(peer: Peer, bank: str | None, agent_name: str | None, sink: Sink) -> int:
    """Backfill vectors of the active model (resumable, idempotent)."""
    agent = peer.agent(agent_name) if agent_name else next(iter(peer.agents.values()))
    _, db = await agent.memory.resolve(bank)
    total = await peer.memory.reindex(
        db, agent.key, lambda p: sink.progress("reindex", p.done, p.total)
    )
    sink.out(f"reindexed {total} rows for {peer.memory.model}")
    return EXIT_OK


async def verify(ledger: Ledger, state_dir: Path, sink: Sink, tables: Sequence[LocalTable]) -> int:
    """Check the state file (on a connection of its own: its schema, every entry, the derived
    tables against a rebuild from the entries; ``ledger.rebuild``), every index snapshot
    against its recorded digest, and the compiled-code cache. ``tables``: every feature's own
    tables (``transports.tables.FEATURE_TABLES``; a use-case names no transport)."""
    sink.progress("verify", 0, 1)
    checked = await asyncio.to_thread(verify_file, state_dir / STATE_FILE, tables)
    sink.progress("verify", 1, 1)
    snapshots, index = await verify_index(ledger, state_dir)
    report(checked, sink)
    for eid, reason in index:
        sink.out(f"FAIL {eid}: {reason}")
    soft_failed = await ledger.soft_failed_auth()
    for eid, reason in soft_failed:
        sink.out(f"SOFT-FAILED {eid}: {reason}")
    if soft_failed:
        sink.out(
            f"{len(soft_failed)} auth entries soft-failed: kept so that peers agree, never "
            "applied (a key acting after its authority was taken away, or on what it granted)"
        )
    sink.out(
        f"{snapshots} index snapshots and the compiled-code cache checked, {len(index)} failed"
    )
    return EXIT_FAILED if not checked.ok or index else EXIT_OK


async def verify_index(ledger: Ledger, state_dir: Path) -> tuple[int, list[tuple[str, str]]]:
    """The index state on disk that a start would refuse: snapshots whose sha256 is not the
    one recorded when this peer wrote them, compiled code in the state dir, and a
    compiled-code cache others could write. How many snapshots, and the failures."""
    from chazbot.memory import bm25_kernel, snapshot
    from chazbot.memory.loading import SNAPSHOT_DIR

    failed: list[tuple[str, str]] = []
    snapshots = sorted((state_dir / SNAPSHOT_DIR).glob("*.npz"))
    for path in snapshots:
        shown = f"{SNAPSHOT_DIR}/{path.name}"
        recorded = await ledger.kv.get(snapshot.record_key(path))
        if recorded is None:
            failed.append((shown, "not written by this peer (no digest recorded): never loaded"))
        elif await asyncio.to_thread(snapshot.file_sha256, path) != recorded:
            failed.append((shown, "changed since it was written: never loaded"))
    if (state_dir / SNAPSHOT_DIR / "compiled").exists():
        failed.append(
            (f"{SNAPSHOT_DIR}/compiled", "compiled code in the state dir: never loaded, remove it")
        )
    cache = bm25_kernel.configured_cache_dir()
    problem = bm25_kernel.cache_dir_problem(cache) if cache.exists() else None
    if problem is not None:
        failed.append((f"compiled-code cache {cache}", f"{problem}: never loaded"))
    return len(snapshots), failed


async def backup(state_dir: Path, target: Path, sink: Sink) -> int:
    """A consistent copy of the whole state to the tar file ``target`` (see
    ``ledger.archive``), taken on a thread of its own while the peer goes on. Progress is the
    bytes copied so far against the state file's size (its WAL included). What killed runs
    left is removed first (the caller holds the state dir, so none of them runs)."""
    if not target.is_absolute():
        raise InputError(f"the backup file must be an absolute path, not {target}")
    if not target.parent.is_dir():
        raise InputError(f"no directory {target.parent}")
    if target.exists() or target.is_symlink():
        raise InputError(f"{target} exists; choose a new file name")
    await asyncio.to_thread(remove_leftovers, state_dir)
    expected = sum(
        p.stat().st_size
        for p in (state_dir / STATE_FILE, state_dir / f"{STATE_FILE}-wal")
        if p.exists()
    )
    try:
        temps = await asyncio.to_thread(Temporaries.begin, state_dir, target)
    except OSError as exc:
        raise InputError(f"cannot write beside {target}: {exc.strerror or exc}") from exc
    job = asyncio.ensure_future(asyncio.to_thread(write_backup, state_dir, target, temps))
    try:
        while not job.done():
            sink.progress("backup", min(_bytes_in(temps.work), expected), expected)
            await asyncio.wait({job}, timeout=0.25)
    except asyncio.CancelledError:
        # the copy runs on in its thread; let it end (it removes its temporaries), then
        # take away a file it finished as we stopped: not asked for any more
        with contextlib.suppress(Exception):
            await asyncio.shield(job)
        if job.done() and not job.cancelled() and job.exception() is None:
            target.unlink(missing_ok=True)
        temps.end()
        raise
    made = job.result()
    sink.progress("backup", expected, expected)
    log.info("backup written to %s: %d files, %d bytes", target, len(made.files), made.size)
    sink.out(f"backup written to {target}: {len(made.files)} files, {_mb(made.size)}")
    return EXIT_OK


async def restore(
    state_dir: Path, file: Path, force: bool, sink: Sink, tables: Sequence[LocalTable]
) -> int:
    """Put the backup ``file`` in place of the state in ``state_dir``, for a stopped peer.

    Refuses a state dir in use (its lock) and, without ``force``, one that holds a state
    already (with it, that state is moved aside into ``state_dir/replaced-<time>``). The backup
    is unpacked beside the state, each file checked against the manifest, and its state file
    checked as ``verify`` does (``ledger.rebuild``: only chazbot's schema, every entry's id,
    signature and authorisation, derived tables as the entries make them) before anything is
    moved: a backup that fails changes nothing."""
    import os
    import time

    from chazbot.ledger.archive import RESTORE_PREFIX, put_in_place, unpack_backup
    from chazbot.ledger.backup import bring_up_to_date, is_sqlite, store_objects
    from chazbot.ledger.statelock import StateLock

    if not file.is_file():
        raise InputError(f"no backup file {file}")
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(state_dir, 0o700)
    lock = StateLock.acquire(state_dir, "restore")
    unpacked = state_dir / f"{RESTORE_PREFIX}{os.getpid()}"
    try:
        if (state_dir / STATE_FILE).exists() and not force:
            raise InputError(
                f"{state_dir} already holds a state; restore --force moves it aside first"
            )
        await asyncio.to_thread(remove_leftovers, state_dir)
        made = await asyncio.to_thread(
            unpack_backup, file, unpacked, lambda d, t: sink.progress("restore", d, t)
        )
        sink.progress("verify", 0, 1)
        checked = await asyncio.to_thread(bring_up_to_date, unpacked / STATE_FILE, tables)
        if checked is None:
            checked = await asyncio.to_thread(verify_file, unpacked / STATE_FILE, tables)
        in_store: list[tuple[str, str]] = []
        for name in sorted(made.files):
            if name != STATE_FILE and is_sqlite(unpacked / name):
                in_store += await asyncio.to_thread(store_objects, unpacked / name)
        sink.progress("verify", 1, 1)
        report(checked, sink)
        for what, why in in_store:
            sink.out(f"FAIL {what}: {why}")
        if not checked.ok or in_store:
            why = _why_refused(checked) if not checked.ok else _store_refused(in_store)
            sink.err(f"chazbot: error: the backup {file} {why}; nothing was changed")
            return EXIT_FAILED
        aside = state_dir / time.strftime("replaced-%Y%m%dT%H%M%S") if force else None
        await asyncio.to_thread(put_in_place, unpacked, state_dir, aside)
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(made.created))
        sink.out(f"restored {file} (taken {when}) into {state_dir}")
        if aside is not None and aside.exists():
            sink.out(f"the state it replaced is in {aside} (owner-only; delete it when done)")
        return EXIT_OK
    except asyncio.CancelledError:
        interrupted("restore", sink)
        raise
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)
        lock.release()


def report(checked: FileCheck, sink: Sink) -> None:
    """A state file's check as ``verify`` and ``restore`` print it: a FAIL line for each
    failure, then a line for the entries and one for the rest."""
    for what, why in checked.failures:
        sink.out(f"FAIL {what}: {why}")
    if checked.foreign:
        sink.out(
            f"file and schema: {len(checked.foreign)} failed; nothing else in the file was "
            "read (entries and derived tables not checked)"
        )
        return
    sink.out(f"{checked.entries} entries checked, {len(checked.failed_entries)} failed")
    if checked.failed_entries:
        sink.out("derived tables not compared: entries fail")
    else:
        sink.out(
            "schema and derived tables checked against a rebuild from the signed entries, "
            f"{len(checked.derived)} failed"
        )


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _why_refused(checked: FileCheck) -> str:
    if any(what == "(file)" for what, _ in checked.foreign):
        return "is not an intact SQLite file"
    if checked.foreign:
        named = ", ".join(what for what, _ in checked.foreign[:3])
        more = f" and {len(checked.foreign) - 3} more" if len(checked.foreign) > 3 else ""
        return f"holds SQLite objects that are not chazbot's schema ({named}{more})"
    if checked.failed_entries:
        return "fails verify"
    differences = _count(len(checked.derived), "difference")
    return f"has derived tables that its signed entries do not make ({differences})"


def _store_refused(found: list[tuple[str, str]]) -> str:
    named = ", ".join(what for what, _ in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return f"has a Matrix store holding what nio never makes ({named}{more})"


def _bytes_in(directory: Path) -> int:
    total = 0
    with contextlib.suppress(OSError):
        for path in directory.rglob("*"):
            with contextlib.suppress(OSError):
                total += path.stat().st_size if path.is_file() else 0
    return total


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"

"""The state file: schema versions, tamper detection, file mode, and kill -9 in a burst."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
from collections.abc import Awaitable
from pathlib import Path

import pytest

from chazbot.errors import BackendError, ConflictError, InputError
from chazbot.ledger import Entry, KeyPair, Ledger
from chazbot.ledger.core import LedgerCore
from chazbot.ledger.schema import SCHEMA_VERSION
from tests.support.paths import SUPPORT
from tests.support.waits import wait_until

KEY = KeyPair.from_private_bytes(bytes([7]) * 32)
CRASH_WRITER = SUPPORT / "crash_writer.py"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def write_some(path: Path, n: int = 6) -> tuple[str, list[Entry]]:
    ledger = await Ledger.open(path)
    try:
        db = await ledger.create_db(KEY, {"name": "bank"})
        for i in range(n):
            await ledger.write(db, KEY, {"notes": [{"op": "insert", "row": {"i": i}}]})
        entries = [Entry.decode(d) for _, d in await ledger.entries(db)]
    finally:
        await ledger.close()
    return db, entries


# ---- schema version -----------------------------------------------------------------------


async def test_new_file_gets_current_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    await (await Ledger.open(path)).close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT max(version) FROM schema_version").fetchone() == (
            SCHEMA_VERSION,
        )
    await (await Ledger.open(path)).close()  # reopening the same version is fine
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT count(*) FROM schema_version").fetchone() == (SCHEMA_VERSION,)


async def test_newer_schema_is_refused_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    await write_some(path, 2)
    newer = SCHEMA_VERSION + 5
    raw = sqlite3.connect(path)
    raw.execute("INSERT INTO schema_version (version) VALUES (?)", (newer,))
    raw.commit()
    raw.close()
    with pytest.raises(ConflictError) as info:
        await Ledger.open(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(newer) in message and "newer" in message
    # and the file was left as it was
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT max(version) FROM schema_version").fetchone() == (newer,)
        assert raw.execute("SELECT count(*) FROM entries").fetchone() == (3,)


async def test_not_a_database_is_a_backend_error(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"this is not sqlite" * 512)
    with pytest.raises(BackendError) as info:
        await Ledger.open(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def ledger_threads(path: Path) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"ledger {path.name}"]


async def test_a_failed_open_leaves_no_thread_and_no_open_file(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite" * 512)
    with pytest.raises(BackendError):
        await Ledger.open(garbage)
    assert ledger_threads(garbage) == []
    newer = tmp_path / "newer.db"
    await write_some(newer, 1)
    with sqlite3.connect(newer) as raw:
        raw.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION + 1,))
    raw.close()
    with pytest.raises(ConflictError):
        await Ledger.open(newer)
    assert ledger_threads(newer) == []
    # the refused file was closed: an exclusive lock on it is granted at once
    probe = sqlite3.connect(newer, timeout=0)
    probe.execute("BEGIN EXCLUSIVE")
    probe.rollback()
    probe.close()


async def test_close_ends_the_thread_and_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    ledger = await Ledger.open(path)
    assert len(ledger_threads(path)) == 1
    await ledger.close()
    await ledger.close()
    assert ledger_threads(path) == []
    with pytest.raises(BackendError, match="closed"):
        await ledger.count_entries()


async def test_a_cancelled_caller_leaves_its_step_whole(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    ledger = await Ledger.open(path)
    try:
        db = await ledger.create_db(KEY, {"name": "bank"})
        gate = threading.Event()
        blocker = asyncio.ensure_future(ledger.run(lambda core: gate.wait(10)))
        write = asyncio.ensure_future(
            ledger.write(db, KEY, {"things": [{"op": "insert", "row": {"i": 1}}]})
        )
        await asyncio.sleep(0)  # both are queued behind the gate
        write.cancel()
        gate.set()
        assert await blocker is True
        with pytest.raises(asyncio.CancelledError):
            await write
        # the step ran to its end in one transaction; the ledger goes on serving
        assert [r.data for r in await ledger.rows(db, "things")] == [{"i": 1}]
        assert await ledger.verify() == []
    finally:
        await ledger.close()


@pytest.mark.parametrize("how", ["set_auth", "ingest"])
async def test_a_cancelled_caller_still_gets_its_commit_heard(tmp_path: Path, how: str) -> None:
    """Issue #22 (7): the step commits whoever waits, so the auth cache and the listeners
    hear of it even when the caller was cancelled once the step was queued."""
    from chazbot.ledger import Permission

    other = KeyPair.generate()
    ledger = await Ledger.open(tmp_path / "state.db")
    source = await Ledger.open(tmp_path / "source.db")
    heard: list[str] = []
    try:
        db = await ledger.create_db(KEY, {"name": "bank"})
        await source.ingest([d for _, d in await ledger.entries(db)])
        await source.set_auth(db, KEY, other.public, Permission.parse("write", 5))
        grant = [d for _, d in await source.entries(db)][-1]
        ledger.add_listener(lambda applied: heard.extend(e.id for e in applied.entries))
        assert other.public not in await ledger.auth_state(db)  # cached now
        gate = threading.Event()
        blocker = asyncio.ensure_future(ledger.run(lambda core: gate.wait(10)))
        queued = ledger._worker._jobs.qsize
        await wait_until(lambda: queued() == 0, what="the worker to hold the gate")
        step: Awaitable[object]
        if how == "set_auth":
            step = ledger.set_auth(db, KEY, other.public, Permission.parse("write", 5))
        else:
            step = ledger.ingest([grant])
        task = asyncio.ensure_future(step)
        await wait_until(lambda: queued() == 1, what="the step to queue behind the gate")
        task.cancel()
        gate.set()
        await blocker
        with pytest.raises(asyncio.CancelledError):
            await task

        async def committed() -> bool:
            return await ledger.count_entries(db) == 2

        await wait_until(committed, what="the cancelled caller's step to commit")
        await wait_until(lambda: len(heard) == 1, what="the listener to hear of the commit")
        assert (await ledger.permission(db, other.public)).name == "write"
    finally:
        await ledger.close()
        await source.close()


def test_a_result_for_a_closed_loop_is_dropped_and_the_thread_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    errors: list[BaseException | None] = []
    old_hook = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)
    gate = threading.Event()
    try:
        first = asyncio.new_event_loop()
        ledger = first.run_until_complete(Ledger.open(path))
        pending = first.create_task(ledger.run(lambda core: gate.wait(10)))
        first.run_until_complete(asyncio.sleep(0))  # queued; the thread waits at the gate
        pending.cancel()
        first.run_until_complete(asyncio.gather(pending, return_exceptions=True))
        first.close()
        gate.set()  # the thread finishes the step and finds its caller's loop closed
        assert asyncio.run(ledger.count_entries()) == 0  # and serves another loop
        asyncio.run(ledger.close())
    finally:
        threading.excepthook = old_hook
    assert errors == [] and ledger_threads(path) == []


# ---- verify() finds tampering ---------------------------------------------------------------


async def test_verify_clean_file(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    await write_some(path)
    ledger = await Ledger.open(path)
    try:
        assert await ledger.verify() == []
    finally:
        await ledger.close()


@pytest.mark.parametrize("victim", [2, 6])  # an entry in the middle, and the last one
async def test_verify_finds_a_flipped_byte(tmp_path: Path, victim: int) -> None:
    path = tmp_path / "state.db"
    _, entries = await write_some(path)
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    pristine = tmp_path / "pristine.db"
    shutil.copyfile(path, pristine)
    target = entries[victim]
    assert target.height == victim and not target.is_root
    raw = bytearray(path.read_bytes())
    sig = target.sig.encode()
    assert raw.count(sig) == 1
    at = raw.index(sig) + 17
    raw[at] = ord("0") if raw[at] != ord("0") else ord("1")
    path.write_bytes(bytes(raw))

    ledger = await Ledger.open(path)
    try:
        failures = await ledger.verify()
    finally:
        await ledger.close()
    failed = {eid for eid, _ in failures}
    descendants = {e.id for e in entries if e.height > victim}
    assert target.id in failed
    assert failed <= {target.id} | descendants
    assert "signature" in dict(failures)[target.id] or "mismatch" in dict(failures)[target.id]
    assert all("\n" not in reason for _, reason in failures)

    ledger = await Ledger.open(pristine)
    try:
        assert await ledger.verify() == []
    finally:
        await ledger.close()


async def test_a_flipped_byte_in_an_auth_entry_still_opens_and_verify_names_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    db, entries = await write_some(path, 1)
    raw = bytearray(path.read_bytes())
    at = raw.index(entries[0].sig.encode()) + 5  # the root, which carries _auth
    raw[at] = ord("0") if raw[at] != ord("0") else ord("1")
    path.write_bytes(bytes(raw))
    ledger = await Ledger.open(path)
    try:
        failures = dict(await ledger.verify())
        assert entries[0].id in failures and "\n" not in failures[entries[0].id]
        assert await ledger.auth_state(db) == {}  # a damaged auth entry grants nothing
    finally:
        await ledger.close()


async def test_local_statements_cannot_touch_ledger_tables(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db, _ = await write_some(path, 1)
    ledger = await Ledger.open(path)
    try:
        await ledger.write(db, KEY, {"things": [{"op": "insert", "row": {"i": 9}}]})
        for sql in (
            "DELETE FROM entries",
            "UPDATE rows SET data = '{}'",
            "INSERT INTO tips VALUES (1, 2)",
            "INSERT INTO main.entries SELECT * FROM entries",  # got past the old regex
            'DELETE FROM "main"."tips"',
            "DELETE FROM tips WHERE db = ? AND id = ?",  # the very text the core prepared
            "WITH x AS (SELECT 1) DELETE FROM rows",
            "REPLACE INTO schema_version VALUES (99)",
            "PRAGMA foreign_keys=OFF",
            "ATTACH DATABASE ':memory:' AS other",
            "BEGIN",
            "DROP TABLE local_kv",
        ):
            params = ("x", "y") if "?" in sql else ()
            with pytest.raises(InputError):
                await ledger.local(sql, params)
        assert await ledger.local("SELECT count(*) FROM entries") == [(3,)]
        assert await ledger.verify() == []
        # peer-local tables stay writable, and the guard is off again for the ledger itself
        await ledger.local("INSERT INTO local_kv (key, value) VALUES ('a', 'b')")
        assert await ledger.kv.get("a") == "b"
        await ledger.write(db, KEY, {"things": [{"op": "insert", "row": {"i": 10}}]})
        assert await ledger.count_entries(db) == 4
    finally:
        await ledger.close()


async def test_verify_finds_an_unauthorised_entry_slipped_into_the_file(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db, entries = await write_some(path, 2)
    stranger = KeyPair.from_private_bytes(bytes([8]) * 32)
    tip = entries[-1]
    forged = Entry.create(
        stranger, db, [tip.id], tip.height + 1, {"notes": [{"op": "insert", "row": {"i": 99}}]}
    )
    # well formed and well signed, but its author may not write: put it straight in the file
    with sqlite3.connect(path) as raw:
        (auth_set,) = raw.execute("SELECT auth_set FROM entries WHERE id = ?", (tip.id,)).fetchone()
        raw.execute(
            "INSERT INTO entries (id, db, height, author, ts, auth_set, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (forged.id, db, forged.height, forged.author, forged.ts, auth_set, forged.data),
        )
    raw.close()
    ledger = await Ledger.open(path)
    try:
        failures = await ledger.verify()
    finally:
        await ledger.close()
    assert [eid for eid, _ in failures] == [forged.id]
    assert "may not write" in failures[0][1]


async def test_pragmas_wal_and_synchronous_full(tmp_path: Path) -> None:
    ledger = await Ledger.open(tmp_path / "state.db")
    try:

        def pragmas(core: LedgerCore) -> tuple[object, ...]:
            return tuple(
                core.conn.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("journal_mode", "synchronous", "foreign_keys")
            )

        assert await ledger.run(pragmas) == ("wal", 2, 1)  # synchronous 2 = FULL
    finally:
        await ledger.close()


# ---- file mode ------------------------------------------------------------------------------


async def test_state_file_is_created_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    old = os.umask(0)  # even with a permissive umask
    try:
        ledger = await Ledger.open(path)
        try:
            await ledger.create_db(KEY, {"name": "x"})
            assert mode(path) == 0o600
            for side in (Path(f"{path}-wal"), Path(f"{path}-shm")):
                assert side.exists() and mode(side) == 0o600
        finally:
            await ledger.close()
    finally:
        os.umask(old)


async def test_existing_state_file_is_made_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.touch()
    path.chmod(0o644)
    await (await Ledger.open(path)).close()
    assert mode(path) == 0o600


# ---- crash test -------------------------------------------------------------------------


def run_writer_until(path: Path, prefix: str, acks_wanted: int) -> tuple[str, list[str]]:
    """Start the writer, read ``acks_wanted`` acknowledgements, then kill -9 it."""
    proc = subprocess.Popen(
        [sys.executable, str(CRASH_WRITER), str(path), prefix],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    acked: list[str] = []
    db = ""
    try:
        assert proc.stdout is not None
        while len(acked) < acks_wanted:
            line = proc.stdout.readline()
            if not line:  # the writer died on its own
                proc.wait(timeout=10)
                err = proc.stderr.read() if proc.stderr else ""
                pytest.fail(f"writer exited {proc.returncode} early: {err[-2000:]}")
            line = line.rstrip("\n")
            if line.startswith("db "):
                db = line[3:]
            else:
                acked.append(line)
    finally:
        proc.kill()  # SIGKILL
        proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == -9
    return db, acked


async def check_after_crash(path: Path, db: str, acked: set[str]) -> int:
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        raw.close()
    ledger = await Ledger.open(path)
    try:
        rows = await ledger.rows(db, "notes")
        present = {r.data["k"] for r in rows}
        assert acked <= present, f"lost acknowledged writes: {sorted(acked - present)[:5]}"
        assert len(present) == len(rows)  # no row twice
        assert await ledger.count_entries(db) == len(rows) + 1
        assert await ledger.verify() == []
        return len(rows)
    finally:
        await ledger.close()


@pytest.mark.slow  # about 30 s: writer processes killed mid-burst, several rounds
async def test_kill_9_in_a_burst_loses_no_acknowledged_write(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    rng = random.Random(20240611)
    acked: set[str] = set()
    db = ""
    stored = 0
    for round_no in range(20):  # the same file, killed and reopened 20 times
        wanted = rng.randint(50, 300)
        round_db, new = run_writer_until(path, f"r{round_no}", wanted)
        assert len(new) == wanted
        db = db or round_db
        assert round_db == db
        acked |= set(new)
        now = await check_after_crash(path, db, acked)
        assert now >= stored + wanted
        stored = now
    assert mode(path) == 0o600

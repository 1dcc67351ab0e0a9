"""Restore trusts only signatures (#33), and a killed backup leaves no keys behind (#34).

- A backup whose state file was altered beside its signed entries (a derived table edited, a
  trigger, a table, a view or an index added, the manifest recomputed to match) is refused
  whole by ``restore``: one line on stderr, nothing written to the state dir.
- ``verify`` on a state file in use reports the same: SQLite objects that are not chazbot's
  schema, and derived tables (rows, fields, auth, tips, the entries' own columns) that a
  rebuild from the signed entries does not make.
- A backup killed with SIGKILL leaves its temporary copies (they hold the peer's keys); the
  next backup and the next start remove them. The temporary files are created exclusively
  and never through a link planted at a predictable name.

Real SQLite files throughout, real ``chazbot`` processes for the command-line paths and the
kill, a real running service for the live ``verify``.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import sqlite3
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

import chazbot
from chazbot import operations as ops
from chazbot.config import Config
from chazbot.errors import InputError
from chazbot.ledger import Ledger
from chazbot.ledger.archive import NOTES, Temporaries, remove_leftovers, write_backup
from chazbot.ledger.backup import verify_file
from chazbot.transports.tables import FEATURE_TABLES
from tests.support.service import chazbot_cli as cli
from tests.support.service import start_service
from tests.support.waits import wait_until

pytestmark = pytest.mark.timeout(300)

STATE_FILE = "chazbot.sqlite3"


class Captured:
    """A job's report, kept: what it printed on stdout and on stderr."""

    def __init__(self) -> None:
        self.stdout: list[str] = []
        self.stderr: list[str] = []

    def progress(self, what: str, done: int, total: int) -> None:
        pass

    async def data(self, lines: list[str]) -> None:
        pass

    def out(self, text: str) -> None:
        self.stdout.append(text)

    def err(self, text: str) -> None:
        self.stderr.append(text)


def write_config(where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    state = str(where / "state")
    data = {"state_dir": state, "sync_listen": "", "http_listen": "", "embedding": None}
    (where / "config.yaml").write_text(yaml.safe_dump(data))
    return where / "state"


async def make_peer(where: Path) -> Path:
    """A stopped peer in ``where`` whose agent remembers two things; its state dir."""
    state = write_config(where)
    cfg = Config(state_dir=state, embedding=None, sync_listen="", http_listen="")
    async with chazbot.open(state, cfg) as peer:
        agent = next(iter(peer.agents.values()))
        await agent.remember("locker", "code 1234")
        await agent.remember("plan", "ship on friday")
    return state


def with_state_file(
    backup: Path, target: Path, change: Callable[[Path], None], member: str = STATE_FILE
) -> Path:
    """A copy of ``backup`` whose state file (or another ``member``) went through ``change``
    (a function editing a real SQLite file), with the manifest recomputed to match: what
    someone who can write the backup (not sign entries) can make."""
    with tarfile.open(backup) as tar:
        files = {m.name: f.read() for m in tar.getmembers() if (f := tar.extractfile(m))}
    scratch = target.with_suffix(".sqlite3")
    scratch.write_bytes(files[member])
    change(scratch)
    files[member] = scratch.read_bytes()
    scratch.unlink()
    manifest = json.loads(files["manifest.json"])
    manifest["files"][member] = {
        "bytes": len(files[member]),
        "sha256": hashlib.sha256(files[member]).hexdigest(),
    }
    files["manifest.json"] = json.dumps(manifest).encode()
    with tarfile.open(target, "w") as tar:
        for name in ["manifest.json", *[n for n in files if n != "manifest.json"]]:
            info = tarfile.TarInfo(name)
            info.size = len(files[name])
            tar.addfile(info, io.BytesIO(files[name]))
    return target


def run_sql(script: str) -> Callable[[Path], None]:
    def change(path: Path) -> None:
        conn = sqlite3.connect(path)
        try:
            conn.executescript(script)
            conn.commit()
        finally:
            conn.close()

    return change


FORGE_ROW = "UPDATE rows SET data = replace(data, 'code 1234', 'code 9999');"
HIDE_WRITES = (
    "CREATE TRIGGER keep_quiet AFTER INSERT ON rows "
    "BEGIN UPDATE rows SET hidden = 1 WHERE n = new.n; END;"
)

TAMPERS = {
    # the finding: a forged value, and a trigger that hides the next acknowledged write
    "row forged and a trigger": (FORGE_ROW + HIDE_WRITES, ["trigger keep_quiet"]),
    "a trigger": (HIDE_WRITES, ["trigger keep_quiet"]),
    "a row's value forged": (FORGE_ROW, ["rows"]),
    "a trigger named to forge a line": (
        'CREATE TRIGGER "evil\nFAIL nothing" AFTER INSERT ON rows BEGIN SELECT 1; END;',
        ["trigger evil\\nFAIL nothing"],
    ),
    "a table added": ("CREATE TABLE notes (x);", ["table notes"]),
    "a view added": ("CREATE VIEW everything AS SELECT * FROM rows;", ["view everything"]),
    "an index added": ("CREATE INDEX rows_data ON rows (data);", ["index rows_data"]),
    "a row hidden": ("UPDATE rows SET hidden = 1 WHERE data LIKE '%locker%';", ["rows"]),
    "a row added": (
        "INSERT INTO rows (db, store, row_id, entry_id, author, ts, height, data) "
        "SELECT db, store, row_id || '0', entry_id, author, ts, height, "
        "replace(data, 'code 1234', 'code 0000') FROM rows WHERE data LIKE '%locker%';",
        ["rows"],
    ),
    "a row removed": ("DELETE FROM rows WHERE data LIKE '%plan%';", ["rows"]),
    "a field forged": ("UPDATE fields SET value = '\"forged\"';", ["fields"]),
    "a field set forged": ("UPDATE field_sets SET value = '\"forged\"';", ["field_sets"]),
    "an entry's author column": (
        "UPDATE entries SET author = 'ed25519:' || lower(hex(zeroblob(32))) WHERE height = 1;",
        ["entries"],
    ),
    "tips removed": ("DELETE FROM tips;", ["tips"]),
    "true made 1 in a row": (
        "UPDATE rows SET data = json_set(data, '$.forget', 1) WHERE data LIKE '%plan%';",
        ["rows"],
    ),
    "a row id made a blob": (
        "UPDATE rows SET row_id = CAST(row_id AS BLOB) WHERE data LIKE '%plan%';",
        ["rows"],
    ),
    "rows renumbered": ("UPDATE rows SET n = n + 1000 WHERE data LIKE '%locker%';", ["rows n="]),
    "a newer schema claimed": (
        "INSERT INTO schema_version VALUES (99);",
        ["schema_version: version 99 is newer"],
    ),
    "a table's definition changed": (
        "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = "
        "replace(sql, 'data TEXT NOT NULL', 'data TEXT NOT NULL DEFAULT ''{}''') "
        "WHERE name = 'rows';",
        ["table rows"],
    ),
}


RESOLVED = {
    # what the resolution of auth by authority derives (#33): every start settles it from the
    # signed entries, so a restore takes the signed truth, never the file's claim
    "a key made admin": (
        "INSERT INTO auth SELECT db, 'ed25519:' || lower(hex(zeroblob(32))), 'admin', 0, "
        "'active', height, entry_id FROM auth LIMIT 1;"
    ),
    "a key's grant changed": "UPDATE auth SET status = 'revoked';",
    "entries soft-failed": "UPDATE entries SET soft_failed = 1 WHERE is_data = 1;",
}


@pytest.fixture
async def backup_file(tmp_path: Path) -> Path:
    state = await make_peer(tmp_path / "peer")
    target = tmp_path / "peer.backup"
    sink = Captured()
    assert await ops.backup(state, target, sink) == ops.EXIT_OK, sink.stderr
    return target


@pytest.mark.parametrize("name", list(TAMPERS))
async def test_restore_refuses_a_backup_altered_beside_its_signed_entries(
    tmp_path: Path, backup_file: Path, name: str
) -> None:
    script, named = TAMPERS[name]
    forged = with_state_file(backup_file, tmp_path / "forged.backup", run_sql(script))
    state = write_config(tmp_path / "other")
    sink = Captured()
    code = await ops.restore(state, forged, False, sink, FEATURE_TABLES)
    assert code == ops.EXIT_FAILED, (sink.stdout, sink.stderr)
    assert len(sink.stderr) == 1 and sink.stderr[0].startswith("chazbot: error: "), sink.stderr
    assert "nothing was changed" in sink.stderr[0]
    assert not [line for line in sink.stdout + sink.stderr if "\n" in line]
    for word in named:
        assert any(word in line for line in sink.stdout), (word, sink.stdout)
    # nothing half-written: no state file, no unpacked copy left in the state dir
    assert sorted(p.name for p in state.iterdir()) == ["chazbot.lock"]


@pytest.mark.parametrize("name", list(RESOLVED))
async def test_auth_claimed_by_a_backup_is_settled_from_its_signatures(
    tmp_path: Path, backup_file: Path, name: str
) -> None:
    """The auth table and the soft-failed marks are what the resolution by authority derives
    from the signed entries; the open that restore does settles them from those, so a backup
    that claims otherwise restores to the signed truth (and verify finds nothing)."""
    forged = with_state_file(backup_file, tmp_path / "forged.backup", run_sql(RESOLVED[name]))
    state = write_config(tmp_path / "other")
    sink = Captured()
    assert await ops.restore(state, forged, False, sink, FEATURE_TABLES) == ops.EXIT_OK, sink.stdout
    cfg = Config(state_dir=state, embedding=None, sync_listen="", http_listen="")
    async with chazbot.open(state, cfg) as peer:
        agent = next(iter(peer.agents.values()))
        assert [h.value for h in await agent.recall("locker")][:1] == ["code 1234"]
        state_now = await peer.ledger.auth_state(agent.db)
        assert all(not k.endswith("0" * 64) for k in state_now)  # no forged admin key
        assert all(g.active for g in state_now.values())
        assert await peer.ledger.verify(FEATURE_TABLES) == []


async def test_an_untouched_backup_restores_and_serves_what_was_signed(
    tmp_path: Path, backup_file: Path
) -> None:
    state = write_config(tmp_path / "other")
    sink = Captured()
    assert await ops.restore(state, backup_file, False, sink, FEATURE_TABLES) == ops.EXIT_OK, (
        sink.stderr
    )
    assert any("0 failed" in line for line in sink.stdout)
    cfg = Config(state_dir=state, embedding=None, sync_listen="", http_listen="")
    async with chazbot.open(state, cfg) as peer:
        agent = next(iter(peer.agents.values()))
        hits = await agent.recall("locker")
        assert [h.value for h in hits][:1] == ["code 1234"]
        await agent.remember("next", "written after the restore")
        assert [h.value for h in await agent.recall("next")][:1] == ["written after the restore"]
        assert await peer.ledger.verify(FEATURE_TABLES) == []


async def test_restore_on_the_command_line_refuses_the_forged_backup(
    tmp_path: Path, backup_file: Path
) -> None:
    """The finding end to end: a forged row plus a trigger that hides the next write, with the
    manifest recomputed, used to restore cleanly (``chazbot restore`` exit 0, then ``verify``
    exit 0, the forged value served)."""
    forged = with_state_file(
        backup_file, tmp_path / "forged.backup", run_sql(FORGE_ROW + HIDE_WRITES)
    )
    other = tmp_path / "other"
    write_config(other)
    code, out, err = await cli(other, "restore", str(forged))
    assert code == 1, (out, err)
    errors = [line for line in err.splitlines() if line.startswith("chazbot: error:")]
    assert len(errors) == 1 and "not chazbot's schema" in errors[0], err
    assert "trigger keep_quiet" in out
    assert not (other / "state" / STATE_FILE).exists()


async def test_verify_reports_foreign_objects_and_forged_rows_in_a_stopped_peer(
    tmp_path: Path,
) -> None:
    where = tmp_path / "peer"
    state = await make_peer(where)
    run_sql(FORGE_ROW + HIDE_WRITES)(state / STATE_FILE)
    checked = verify_file(state / STATE_FILE)
    reasons = "\n".join(f"{what}: {why}" for what, why in checked.failures)
    assert "trigger keep_quiet" in reasons
    assert not checked.ok
    # the file check (the trigger) stops there: no derived tables were trusted enough to
    # compare; without the trigger, the forged row is named
    run_sql("DROP TRIGGER keep_quiet;")(state / STATE_FILE)
    checked = verify_file(state / STATE_FILE)
    assert [what for what, _ in checked.derived] and not checked.foreign, checked
    assert all(what.startswith("rows ") for what, _ in checked.derived), checked.derived
    ledger = await Ledger.open(state / STATE_FILE)
    try:
        failures = await ledger.verify()
    finally:
        await ledger.close()
    assert any(what.startswith("rows ") for what, _ in failures), failures
    # the command line says it and exits 1
    run_sql(HIDE_WRITES)(state / STATE_FILE)
    code, out, err = await cli(where, "verify")
    assert code == 1, (out, err)
    assert "FAIL trigger keep_quiet" in out


async def test_verify_reports_a_trigger_added_to_the_file_of_a_running_service(
    tmp_path: Path,
) -> None:
    where = tmp_path / "peer"
    state = await make_peer(where)
    service = await start_service(where)
    try:
        code, out, err = await cli(where, "verify")
        assert code == 0, (out, err)
        assert "schema and derived tables checked" in out
        run_sql(HIDE_WRITES)(state / STATE_FILE)  # beside the running service
        code, out, err = await cli(where, "verify")
        assert code == 1 and "FAIL trigger keep_quiet" in out, (out, err)
    finally:
        await service.stop()


# ---- backups: temporary files --------------------------------------------------------------


def leftovers(directory: Path, name: str) -> list[Path]:
    return sorted(directory.glob(f".{name}*"))


async def big_peer(where: Path) -> Path:
    """A stopped peer whose state file is ~100 MB, so a backup of it takes a while."""
    state = await make_peer(where)
    conn = sqlite3.connect(state / STATE_FILE)
    conn.execute("INSERT INTO local_kv VALUES ('padding', zeroblob(100000000))")
    conn.commit()
    conn.close()
    return state


async def kill_backup_when(where: Path, target: Path, ready: Callable[[], bool]) -> None:
    """Start ``chazbot backup target`` and SIGKILL it as soon as ``ready()`` holds."""
    env = {**os.environ, "CHAZBOT_CONFIG": str(where / "config.yaml")}
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "chazbot.cli", "backup", str(target)),
        cwd=where,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )

    def caught() -> bool:
        assert proc.returncode is None, "the backup ended before it could be killed"
        return ready()

    try:
        await wait_until(caught, 120, "the backup mid-run", interval=0.002)
    finally:
        proc.kill()
        await proc.wait()
    assert not target.exists()


def copying(directory: Path, name: str) -> bool:
    return any(p.is_dir() and (p / STATE_FILE).exists() for p in leftovers(directory, name))


def tarring(directory: Path, name: str) -> bool:
    return any(
        p.is_file() and p.name.endswith("tar-partial") and p.stat().st_size > 0
        for p in leftovers(directory, name)
    )


async def test_a_killed_backup_leaves_nothing_after_the_next_backup_or_start(
    tmp_path: Path,
) -> None:
    where = tmp_path / "peer"
    state = await big_peer(where)
    out = tmp_path / "backups"
    out.mkdir()
    target = out / "peer.backup"

    # killed while copying the state file: a copy of the keys is left beside the target
    await kill_backup_when(where, target, lambda: copying(out, target.name))
    left = leftovers(out, target.name)
    assert left, "the kill came too late to leave anything"
    for path in left:
        assert path.stat().st_mode & 0o077 == 0, f"{path} is readable by others"
    # the next backup (to another file) removes them
    code, _, err = await cli(where, "backup", str(out / "second.backup"))
    assert code == 0, err
    assert leftovers(out, target.name) == [], leftovers(out, target.name)
    assert leftovers(out, "second.backup") == []
    assert not list((state / NOTES).iterdir())

    # killed while writing the tar: the next start removes it
    await kill_backup_when(where, target, lambda: tarring(out, target.name))
    assert leftovers(out, target.name)
    service = await start_service(where)
    try:
        assert leftovers(out, target.name) == [], leftovers(out, target.name)
        assert not list((state / NOTES).iterdir())
    finally:
        await service.stop()


async def test_backup_temporaries_never_follow_a_planted_link(tmp_path: Path) -> None:
    state = await make_peer(tmp_path / "peer")
    out = tmp_path / "shared"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("not yours")
    victim_dir = tmp_path / "victim-dir"
    victim_dir.mkdir()
    target = out / "peer.backup"
    # links at the names a backup to ``target`` once used for its temporaries
    (out / ".peer.backup.tar-partial").symlink_to(victim)
    (out / ".peer.backup.partial").symlink_to(victim_dir, target_is_directory=True)
    made = await asyncio.to_thread(write_backup, state, target)
    assert made.files
    assert victim.read_text() == "not yours"
    assert list(victim_dir.iterdir()) == []
    assert target.is_file() and not target.is_symlink()
    assert target.stat().st_mode & 0o777 == 0o600
    with tarfile.open(target) as tar:
        assert {m.name for m in tar.getmembers()} >= {"manifest.json", STATE_FILE}
    # the planted links are someone else's: left alone, never removed through
    assert (out / ".peer.backup.tar-partial").is_symlink()


async def test_a_backup_never_replaces_a_file_that_appeared_at_its_target(
    tmp_path: Path,
) -> None:
    """The finished tar gets its name only if nothing is there by then (not a rename over)."""
    state = await big_peer(tmp_path / "peer")
    target = tmp_path / "peer.backup"
    temps = Temporaries.begin(state, target)
    job = asyncio.ensure_future(asyncio.to_thread(write_backup, state, target, temps))
    await wait_until(
        lambda: job.done() or (temps.tar.exists() and temps.tar.stat().st_size > 0),
        120,
        "the tar being written",
        interval=0.002,
    )
    assert not job.done(), "the backup ended before a file could appear at its target"
    fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.write(fd, b"someone else's")
    os.close(fd)
    with pytest.raises(InputError, match="exists; choose a new file name"):
        await job
    assert target.read_bytes() == b"someone else's"
    assert leftovers(tmp_path, target.name) == []
    assert not list((state / NOTES).iterdir())


async def test_the_sweep_spares_a_running_backup_and_removes_only_temporaries(
    tmp_path: Path,
) -> None:
    state = await make_peer(tmp_path / "peer")
    target = tmp_path / "peer.backup"
    running = Temporaries.begin(state, target)  # under way (its note is locked)
    try:
        assert remove_leftovers(state) == []
        assert running.work.is_dir() and running.note.exists()
    finally:
        running.end()
    assert not running.work.exists() and not running.note.exists()
    # a note (say, edited) that names files which are no backup temporaries removes nothing
    victim = tmp_path / "precious"
    victim.write_text("keep me")
    (state / NOTES / "0123456789abcdef.json").write_text(
        json.dumps({"work": str(tmp_path / "peer"), "tar": str(victim)})
    )
    assert remove_leftovers(state) == []
    assert victim.read_text() == "keep me" and (tmp_path / "peer" / "state").is_dir()
    assert not list((state / NOTES).iterdir())  # the stale note itself is gone


async def test_restore_refuses_a_state_file_that_is_not_intact(
    tmp_path: Path, backup_file: Path
) -> None:
    def scribble(path: Path) -> None:
        raw = bytearray(path.read_bytes())
        raw[4096 : 4096 + 512] = b"\xff" * 512  # the second page: a table's b-tree
        path.write_bytes(bytes(raw))

    forged = with_state_file(backup_file, tmp_path / "scribbled.backup", scribble)
    state = write_config(tmp_path / "other")
    sink = Captured()
    assert await ops.restore(state, forged, False, sink, FEATURE_TABLES) == ops.EXIT_FAILED
    assert sink.stderr and "is not an intact SQLite file; nothing was changed" in sink.stderr[0]
    assert any(line.startswith("FAIL (file): ") for line in sink.stdout), sink.stdout
    assert sorted(p.name for p in state.iterdir()) == ["chazbot.lock"]


async def test_verify_during_a_write_burst_finds_nothing(tmp_path: Path) -> None:
    """The check reads the file as of one moment: rows committed while it runs (after it read
    the entries) are not mistaken for rows no entry makes."""
    where = tmp_path / "peer"
    await make_peer(where)
    service = await start_service(where)
    acked: list[str] = []
    stop = asyncio.Event()

    async def writer(n: int) -> None:
        i = 0
        while not stop.is_set():
            key = f"w{n}-{i}"
            args = json.dumps({"key": key, "value": f"burst {key}"})
            reply = await service.ask({"op": "tool", "name": "remember", "arguments": args})
            assert reply["ok"], reply
            acked.append(key)
            i += 1

    burst = [asyncio.create_task(writer(n)) for n in range(3)]
    try:
        await wait_until(lambda: len(acked) >= 30, 120, "30 acknowledged writes")
        before = len(acked)
        code, out, err = await cli(where, "verify")
        assert len(acked) > before, "no write went on during the verify"
        assert code == 0, (out, err)
        assert "derived tables checked against a rebuild from the signed entries, 0 failed" in out
    finally:
        stop.set()
        await asyncio.gather(*burst, return_exceptions=True)
        await service.stop()


async def test_a_cancelled_backup_removes_its_temporaries_and_its_note(tmp_path: Path) -> None:
    state = await big_peer(tmp_path / "peer")
    out = tmp_path / "backups"
    out.mkdir()
    target = out / "peer.backup"
    job = asyncio.create_task(ops.backup(state, target, Captured()))
    await wait_until(
        lambda: job.done() or copying(out, target.name), 120, "the copy", interval=0.002
    )
    assert not job.done(), "the backup ended before it could be cancelled"
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await job
    assert leftovers(out, target.name) == [] and not target.exists()
    assert not list((state / NOTES).iterdir())


async def test_restore_refuses_a_trigger_in_the_matrix_store(tmp_path: Path) -> None:
    state = await make_peer(tmp_path / "peer")
    store = state / "matrix-store"
    store.mkdir(mode=0o700)
    run_sql("CREATE TABLE accounts (user_id TEXT, device_id TEXT);")(store / "bot_DEVICE.db")
    backup = tmp_path / "peer.backup"
    assert await ops.backup(state, backup, Captured()) == ops.EXIT_OK
    member = "matrix-store/bot_DEVICE.db"
    trigger = "CREATE TRIGGER leak AFTER INSERT ON accounts BEGIN SELECT 1; END;"
    forged = with_state_file(backup, tmp_path / "forged.backup", run_sql(trigger), member)
    other = write_config(tmp_path / "other")
    sink = Captured()
    assert await ops.restore(other, forged, False, sink, FEATURE_TABLES) == ops.EXIT_FAILED
    assert len(sink.stderr) == 1 and "Matrix store" in sink.stderr[0], sink.stderr
    assert "FAIL trigger leak in bot_DEVICE.db: the Matrix store has none" in sink.stdout
    assert sorted(p.name for p in other.iterdir()) == ["chazbot.lock"]
    # the untouched one restores, its store with it
    sink = Captured()
    assert await ops.restore(other, backup, False, sink, FEATURE_TABLES) == ops.EXIT_OK, sink.stderr
    assert (other / member).is_file()

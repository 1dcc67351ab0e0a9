"""Backups of a whole state directory: one tar file, written while the service runs, put back
into a stopped peer's state directory.

What a backup holds (the state a peer cannot rebuild):

- ``chazbot.sqlite3``: the ledger, every database and the peer-local tables (the peer key,
  bank keys, Matrix credentials, sync cursors), copied with SQLite's online backup API
  (``backup.copy_database``: one consistent snapshot, the WAL included);
- ``matrix-store/``: the Matrix end-to-end store (its SQLite files the same way), which must
  match the device the credentials name;
- ``manifest.json``: the format, when, and each file's size and sha256.

Left out, because a start rebuilds or fetches them: ``index/`` (memory snapshots), ``models/``
(downloaded models), the lock and the control socket. Every file in the archive, and the
archive itself, is owner-only (0600): it holds the peer's secret keys.

So do its temporaries, made beside the target: every file and directory of a backup or a
restore is created new (``O_EXCL|O_NOFOLLOW``: a link planted at its name is an error, never
followed), under names no one can guess, and noted in the state dir before it exists
(``Temporaries``), so that what a killed run left is removed by the next backup or start
(``remove_leftovers``).

Synchronous, standard library only: callers run these in a thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import logging
import os
import re
import secrets
import shutil
import stat
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from chazbot.errors import InputError
from chazbot.ledger.backup import CREATE_NEW, copy_database, file_sha256, is_sqlite

log = logging.getLogger(__name__)

FORMAT = "chazbot-backup"
VERSION = 1
STATE_FILE = "chazbot.sqlite3"
MATRIX_STORE = "matrix-store"
MANIFEST = "manifest.json"
MAX_MANIFEST = 1 << 20


@dataclass
class Backup:
    """What a backup holds: file name → (bytes, sha256), and when it was taken."""

    files: dict[str, tuple[int, str]] = field(default_factory=dict)
    created: float = 0.0

    @property
    def size(self) -> int:
        return sum(n for n, _ in self.files.values())


NOTES = "backups-running"
"""The state dir's folder of notes, one per backup under way, naming its temporaries."""
RESTORE_PREFIX = ".restore-"
"""A restore unpacks into ``state_dir/.restore-<pid>`` (owner-only, like the state dir)."""
_TEMP_NAME = re.compile(r"^\..+\.[0-9a-f]{16}\.(partial|tar-partial)$")


@dataclass(frozen=True)
class Temporaries:
    """The temporary files of one backup: a private directory where its files are copied and
    the tar being written, both beside the target (the last step is a rename) under names no
    one can guess, and a note in the state dir naming them, in place before either exists and
    locked (``flock``) while the backup runs. A run killed on its way leaves them, with its
    note unlocked (the kernel drops the lock of a dead process), and the next backup or start
    removes them (``remove_leftovers``): they hold copies of the peer's keys."""

    work: Path
    tar: Path
    note: Path
    fd: int  # the note, open and locked until ``end``

    @classmethod
    def begin(cls, state_dir: Path, target: Path) -> Temporaries:
        token = secrets.token_hex(8)
        base = f".{target.name}.{token}"
        work, tar = target.parent / f"{base}.partial", target.parent / f"{base}.tar-partial"
        with contextlib.suppress(FileExistsError):
            os.mkdir(state_dir / NOTES, 0o700)
        note = state_dir / NOTES / f"{token}.json"
        writing = note.with_suffix(".new")  # named .json only once locked and written
        fd = os.open(writing, CREATE_NEW, 0o600)
        made = cls(work, tar, note, fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, json.dumps({"work": str(work), "tar": str(tar)}).encode())
            os.fsync(fd)
            os.replace(writing, note)
            os.mkdir(work, 0o700)  # an existing name (a planted link) is an error
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                writing.unlink()
            made.end()
            raise
        return made

    def end(self) -> None:
        """Remove the temporaries and the note (idempotent)."""
        _remove(self.work, self.tar)
        with contextlib.suppress(FileNotFoundError):
            self.note.unlink()
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _owned(path: Path, is_dir: bool) -> bool:
    """Whether ``path`` is (not a link to) a directory or file of this user."""
    try:
        info = path.lstat()
    except OSError:
        return False
    kind = stat.S_ISDIR(info.st_mode) if is_dir else stat.S_ISREG(info.st_mode)
    return kind and info.st_uid == os.getuid()


def _remove(work: Path, tar: Path) -> None:
    if _owned(work, is_dir=True):
        shutil.rmtree(work, ignore_errors=True)
    if _owned(tar, is_dir=False):
        with contextlib.suppress(FileNotFoundError):
            tar.unlink()


def remove_leftovers(state_dir: Path) -> list[Path]:
    """Remove what killed backups and restores of ``state_dir`` left: the temporaries each
    note names whose backup no longer runs (its note is not locked), and unpacked restores
    (the caller holds the state dir's lock, so no restore runs). Only names of the shape a
    backup gives are touched, and only files and directories of this user, never through a
    link. Returns what was removed."""
    removed: list[Path] = []
    notes = state_dir / NOTES
    for note in sorted(notes.glob("*.json")) if notes.is_dir() else []:
        try:
            fd = os.open(note, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # that backup is under way
            try:
                named = json.loads(os.read(fd, 1 << 16))
                paths = [Path(str(named["work"])), Path(str(named["tar"]))]
            except (OSError, ValueError, KeyError, TypeError):
                paths = []
            if len(paths) == 2 and all(_TEMP_NAME.match(p.name) for p in paths):
                present = [p for p in paths if p.exists() or p.is_symlink()]
                _remove(*paths)
                removed += [p for p in present if not (p.exists() or p.is_symlink())]
            with contextlib.suppress(FileNotFoundError):
                note.unlink()
        finally:
            os.close(fd)
    for writing in sorted(notes.glob("*.new")) if notes.is_dir() else []:
        _remove_unlocked(writing)  # a note its backup was killed before naming
    for unpacked in sorted(state_dir.glob(f"{RESTORE_PREFIX}*")):
        if _owned(unpacked, is_dir=True):
            shutil.rmtree(unpacked, ignore_errors=True)
            removed.append(unpacked)
    for path in removed:
        log.warning("removed %s, left by a backup or restore that was killed", path)
    return removed


def _remove_unlocked(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            path.unlink()
        finally:
            os.close(fd)


def _copy_one(source: Path, dest: Path) -> None:
    if is_sqlite(source):
        copy_database(source, dest)
    else:  # not a database: a plain copy, owner-only
        fd = os.open(dest, CREATE_NEW, 0o600)
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())


def _publish(tmp: Path, target: Path) -> None:
    """Give the finished tar its name, never replacing a file that appeared there meanwhile."""
    try:
        os.link(tmp, target, follow_symlinks=False)
    except FileExistsError:
        raise InputError(f"{target} exists; choose a new file name") from None
    except OSError:  # a file system without hard links: check, then rename
        if target.exists() or target.is_symlink():
            raise InputError(f"{target} exists; choose a new file name") from None
        os.replace(tmp, target)
        return
    tmp.unlink()


def write_backup(state_dir: Path, target: Path, temps: Temporaries | None = None) -> Backup:
    """Copy the state in ``state_dir`` (live or not) to the tar file ``target`` (0600).

    The files are assembled in ``temps`` (made here when not given; removed at the end,
    whatever happens) and the tar gets its name at the end, so an interrupted backup leaves
    no file at ``target``; an existing ``target`` is refused. The ledger is copied first and
    as one snapshot: every write acknowledged before the call is in it."""
    if target.exists() or target.is_symlink():
        raise InputError(f"{target} exists; choose a new file name")
    if not (state_dir / STATE_FILE).is_file():
        raise InputError(f"no state file at {state_dir / STATE_FILE}")
    temps = temps or Temporaries.begin(state_dir, target)
    work = temps.work
    try:
        made = Backup(created=time.time())
        names = [STATE_FILE]
        copy_database(state_dir / STATE_FILE, work / STATE_FILE)
        store = state_dir / MATRIX_STORE
        if store.is_dir():
            (work / MATRIX_STORE).mkdir(mode=0o700)
            for item in sorted(store.iterdir()):
                if item.is_file() and not item.name.endswith(("-wal", "-shm", "-journal")):
                    _copy_one(item, work / MATRIX_STORE / item.name)
                    names.append(f"{MATRIX_STORE}/{item.name}")
        for name in names:
            path = work / name
            made.files[name] = (path.stat().st_size, file_sha256(path))
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "created": made.created,
            "files": {n: {"bytes": b, "sha256": d} for n, (b, d) in made.files.items()},
        }
        raw = json.dumps(manifest, indent=1, sort_keys=True).encode()
        fd = os.open(temps.tar, CREATE_NEW, 0o600)
        with os.fdopen(fd, "wb") as out:
            with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
                info = tarfile.TarInfo(MANIFEST)
                info.size, info.mode, info.mtime = len(raw), 0o600, int(made.created)
                tar.addfile(info, io.BytesIO(raw))
                for name in names:
                    member = tar.gettarinfo(str(work / name), arcname=name)
                    member.mode, member.uid, member.gid = 0o600, 0, 0
                    member.uname = member.gname = ""
                    with open(work / name, "rb") as f:
                        tar.addfile(member, f)
            out.flush()
            os.fsync(out.fileno())
        _publish(temps.tar, target)
        return made
    finally:
        temps.end()


def _member_names(manifest: dict[str, object]) -> dict[str, tuple[int, str]]:
    files = manifest.get("files")
    if manifest.get("format") != FORMAT or not isinstance(files, dict):
        raise InputError("not a chazbot backup (no chazbot manifest)")
    if manifest.get("version") != VERSION:
        raise InputError(f"backup format {manifest.get('version')!r}; this chazbot reads {VERSION}")
    found: dict[str, tuple[int, str]] = {}
    for name, about in files.items():
        parts = name.split("/")
        allowed = name == STATE_FILE or (
            len(parts) == 2 and parts[0] == MATRIX_STORE and parts[1] not in ("", ".", "..")
        )
        if not allowed or not isinstance(about, dict):
            raise InputError(f"backup names an unexpected file {name[:80]!r}")
        size, digest = about.get("bytes"), about.get("sha256")
        if not isinstance(size, int) or not isinstance(digest, str):
            raise InputError(f"backup manifest entry {name!r} is malformed")
        found[name] = (size, digest)
    if STATE_FILE not in found:
        raise InputError(f"backup holds no {STATE_FILE}")
    return found


def unpack_backup(
    archive: Path, into: Path, progress: Callable[[int, int], None] | None = None
) -> Backup:
    """Extract ``archive`` into the new directory ``into`` (0700, files 0600), checking that it
    holds exactly the files its manifest names, each of that size and sha256. Raises
    ``InputError`` (one line) on anything else; the caller removes ``into`` then."""
    try:
        tar = tarfile.open(archive, mode="r:")  # noqa: SIM115 (closed by the with below)
    except (OSError, tarfile.TarError) as exc:
        raise InputError(f"cannot read the backup {archive}: {exc}") from exc
    with tar:
        try:
            first = tar.next()
            if first is None or first.name != MANIFEST or not first.isfile():
                raise InputError("not a chazbot backup (no manifest first)")
            if first.size > MAX_MANIFEST:
                raise InputError("backup manifest too large")
            reader = tar.extractfile(first)
            assert reader is not None
            try:
                manifest = json.loads(reader.read())
            except ValueError as exc:
                raise InputError("backup manifest is not JSON") from exc
            if not isinstance(manifest, dict):
                raise InputError("backup manifest is not a JSON object")
            expected = _member_names(manifest)
            total = sum(n for n, _ in expected.values())
            done = 0
            into.mkdir(mode=0o700)
            seen: dict[str, tuple[int, str]] = {}
            for member in tar:
                if member is first:
                    continue
                if member.name not in expected or member.name in seen or not member.isfile():
                    raise InputError(f"backup holds an unexpected entry {member.name[:80]!r}")
                dest = into / member.name
                dest.parent.mkdir(mode=0o700, exist_ok=True)
                src = tar.extractfile(member)
                assert src is not None
                fd = os.open(dest, CREATE_NEW, 0o600)
                with os.fdopen(fd, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
                    out.flush()
                    os.fsync(out.fileno())
                seen[member.name] = (dest.stat().st_size, file_sha256(dest))
                if seen[member.name] != expected[member.name]:
                    raise InputError(f"backup file {member.name} does not match its manifest")
                done += seen[member.name][0]
                if progress is not None:
                    progress(done, total)
        except tarfile.TarError as exc:
            raise InputError(f"the backup {archive} is damaged: {exc}") from exc
    missing = sorted(set(expected) - set(seen))
    if missing:
        raise InputError(f"backup lacks {', '.join(missing)}")
    created = manifest.get("created")
    return Backup(seen, float(created) if isinstance(created, (int, float)) else 0.0)


def put_in_place(unpacked: Path, state_dir: Path, aside: Path | None) -> None:
    """Move an unpacked, checked backup into ``state_dir``. What it replaces (the state file
    and its WAL, the Matrix store, the memory snapshots) goes to ``aside`` first, when given;
    without it there must be nothing to replace. The caller holds the state dir's lock."""
    old = [
        state_dir / n
        for n in (STATE_FILE, f"{STATE_FILE}-wal", f"{STATE_FILE}-shm", MATRIX_STORE, "index")
    ]
    present = [p for p in old if p.exists()]
    if present and aside is None:
        raise InputError(f"{state_dir} already holds a state; restore --force moves it aside")
    if present and aside is not None:
        aside.mkdir(mode=0o700)
        for path in present:
            os.replace(path, aside / path.name)
    for name in (STATE_FILE, MATRIX_STORE):
        if (unpacked / name).exists():
            os.replace(unpacked / name, state_dir / name)

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

Synchronous, standard library only: callers run these in a thread.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from chazbot.errors import InputError
from chazbot.ledger.backup import copy_database, file_sha256, is_sqlite

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


def partial_dir(target: Path) -> Path:
    """Where a backup to ``target`` is assembled (beside it, so the final step is a rename)."""
    return target.parent / f".{target.name}.partial"


def _copy_one(source: Path, dest: Path) -> None:
    if is_sqlite(source):
        copy_database(source, dest)
    else:  # not a database: a plain copy, owner-only
        fd = os.open(dest, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())


def write_backup(state_dir: Path, target: Path) -> Backup:
    """Copy the state in ``state_dir`` (live or not) to the tar file ``target`` (0600).

    The files are assembled in ``partial_dir(target)`` and the tar is renamed into place at
    the end, so an interrupted backup leaves no file at ``target``; an existing ``target`` is
    refused. The ledger is copied first and as one snapshot: every write acknowledged before
    the call is in it."""
    if target.exists() or target.is_symlink():
        raise InputError(f"{target} exists; choose a new file name")
    if not (state_dir / STATE_FILE).is_file():
        raise InputError(f"no state file at {state_dir / STATE_FILE}")
    work = partial_dir(target)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(mode=0o700)
    tmp_tar = target.parent / f".{target.name}.tar-partial"
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
        fd = os.open(tmp_tar, os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_CLOEXEC, 0o600)
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
        os.replace(tmp_tar, target)
        return made
    finally:
        shutil.rmtree(work, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            tmp_tar.unlink()


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
                fd = os.open(dest, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
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

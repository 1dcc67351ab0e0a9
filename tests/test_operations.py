"""Operating a running peer (#26): export, import-file, reindex, verify, backup and restore as
a user runs them beside a real ``chazbot run``, through its control socket.

Each verb's output and exit status, bad input (an unknown bank, a malformed line: named, and
nothing of the file written), Ctrl-C during an import (whole batches only, the service keeps
answering), and a backup taken during a write burst that restores to a peer whose verify
passes and that holds every write acknowledged before the backup began.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import sys
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from tests.support.service import Service, start_service
from tests.support.service import chazbot_cli as cli
from tests.support.standin_embeddings import StandinEmbeddings
from tests.support.waits import wait_until

pytestmark = pytest.mark.timeout(300)


def write_config(where: Path, embedding: Any = None) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    data = {"state_dir": str(where / "state"), "sync_listen": "", "http_listen": ""}
    data["embedding"] = embedding  # None: BM25 only (no local model in these tests)
    path = where / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest_asyncio.fixture
async def start(tmp_path: Path) -> AsyncIterator[Any]:
    started: list[Service] = []

    async def run(where: Path) -> Service:
        service = await start_service(where)
        started.append(service)
        return service

    yield run
    for running in started:
        if running.proc.returncode is None:
            running.proc.kill()
            await running.proc.wait()


def rows(count: int, prefix: str = "k") -> list[str]:
    return [
        json.dumps({"key": f"{prefix}{i}", "value": f"value {i} of {prefix}", "tags": ["t"]})
        for i in range(count)
    ]


def exported_keys(text: str) -> list[str]:
    return [json.loads(line)["key"] for line in text.splitlines()]


async def test_each_verb_beside_a_running_service(
    tmp_path: Path, start: Any, standin_embeddings: StandinEmbeddings
) -> None:
    where = tmp_path / "peer"
    write_config(where, standin_embeddings.client_settings())
    service = await start(where)
    assert (await cli(where, "cmd", "/memory new notes"))[0] == 0
    assert (await cli(where, "cmd", "/memory grant notes chaz write"))[0] == 0
    (where / "rows.jsonl").write_text("\n".join(rows(1200)) + "\n")

    # import: rows first, at disk speed; their vectors follow in the background (issue 35)
    code, out, err = await cli(where, "import-file", "notes", "rows.jsonl")
    assert code == 0, err
    assert "imported 1200 rows into notes" in out
    assert "import notes [" in err and "1200/1200" in err  # the progress bar, from the service

    # a malformed line past the first batch: named, and nothing of the file written
    bad = rows(900, "new")
    bad[749] = '{"key": "new749", "value": '
    (where / "bad.jsonl").write_text("\n".join(bad) + "\n")
    code, out, err = await cli(where, "import-file", "notes", "bad.jsonl")
    assert code == 1
    assert "line 750: not JSON" in err
    assert "nothing written" in out

    code, out, err = await cli(where, "import-file", "nope", "rows.jsonl")
    assert code == 1 and "no bank or agent 'nope'" in err and "Traceback" not in err

    # export: to stdout and to a file; every row, none of the bad file's
    code, out, err = await cli(where, "export", "notes")
    assert code == 0, err
    keys = exported_keys(out)
    assert sorted(keys) == sorted(f"k{i}" for i in range(1200))
    code, _, err = await cli(where, "export", "notes", "out.jsonl")
    assert code == 0 and "exported 1200 rows to out.jsonl" in err
    assert len((where / "out.jsonl").read_text().splitlines()) == 1200
    code, _, err = await cli(where, "export", "nope", "none.jsonl")
    assert code == 1 and "no bank or agent 'nope'" in err
    assert not (where / "none.jsonl").exists() and not (where / ".none.jsonl.partial").exists()

    # the import's vectors were written in the background: owed until then, no reindex needed
    async def all_vectors() -> bool:
        reply = await service.ask({"op": "cmd", "text": "/memory stats notes"})
        return "standin-embed: 1200" in reply["text"] and "owed" not in reply["text"]

    await wait_until(all_vectors, timeout=60, what="the import's vectors")
    code, out, _ = await cli(where, "reindex", "notes")
    assert code == 0 and "reindexed 0 rows" in out  # nothing left to backfill
    code, _, err = await cli(where, "reindex", "nope")
    assert code == 1 and "no bank named 'nope'" in err

    code, out, err = await cli(where, "verify")
    assert code == 0, out + err
    assert " 0 failed" in out and "entries checked" in out

    # all of it went through the service, which still holds the state and answers
    assert service.proc.returncode is None
    reply = await service.ask({"op": "cmd", "text": "/memory stats notes"})
    assert reply["ok"] and "1200" in reply["text"]
    await service.stop()

    # without a service the same verbs open the state dir themselves
    code, out, err = await cli(where, "export", "notes")
    assert code == 0 and len(out.splitlines()) == 1200
    code, out, _ = await cli(where, "verify")
    assert code == 0 and " 0 failed" in out


def default_sigint() -> None:
    """In the child, before exec: SIGINT back to its default, so Python raises
    KeyboardInterrupt on it whatever the suite inherited."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def test_ctrl_c_stops_an_import_between_batches_and_the_service_keeps_answering(
    tmp_path: Path, start: Any
) -> None:
    where = tmp_path / "peer"
    write_config(where)
    service = await start(where)
    assert (await cli(where, "cmd", "/memory new notes"))[0] == 0
    total = 20_000  # far more than the few batches written before the interrupt
    (where / "big.jsonl").write_text("\n".join(rows(total)) + "\n")
    env = {**os.environ, "CHAZBOT_CONFIG": str(where / "config.yaml")}
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "chazbot.cli", "import-file", "notes", "big.jsonl"),
        cwd=where,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        # Ctrl-C as a terminal delivers it: a suite started in the background by a
        # non-interactive shell runs with SIGINT ignored, which every child inherits (Python
        # then leaves it ignored), and the import ran to its end (exit 0, not 130)
        preexec_fn=default_sigint,
    )
    assert proc.stderr is not None and proc.stdout is not None
    stderr, seen = proc.stderr, bytearray()

    async def progressed() -> bool:
        seen.extend(await stderr.read(4096))
        # the bar redraws on a timer, so any count written so far (not one exact figure)
        return b"import notes [" in seen and re.search(rb"[1-9]\d*/%d" % total, seen) is not None

    await wait_until(progressed, 120, "the import's progress")
    # while it runs, the service answers other requests
    reply = await service.ask({"op": "cmd", "text": "/memory list"})
    assert reply["ok"] and "notes" in reply["text"]
    proc.send_signal(signal.SIGINT)
    rest_err = await asyncio.wait_for(proc.stderr.read(), 60)
    out = (await proc.stdout.read()).decode()
    assert await asyncio.wait_for(proc.wait(), 60) == 130
    err = (seen + rest_err).decode()
    assert "import interrupted: the batches written so far are whole" in err
    assert "Traceback" not in err and "imported" not in out

    reply = await service.ask({"op": "cmd", "text": "/memory stats notes"})
    assert reply["ok"], reply
    code, text, _ = await cli(where, "export", "notes")
    written = len(text.splitlines())
    assert code == 0 and 0 < written < total and written % 100 == 0  # whole batches only
    code, out, _ = await cli(where, "verify")
    assert code == 0 and " 0 failed" in out


def backup_members(path: Path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(path) as tar:
        return {m.name: m for m in tar.getmembers()}


def rewrite_backup(path: Path, target: Path, change: Any) -> None:
    """A copy of the backup whose state file went through ``change`` (manifest kept true)."""
    import hashlib

    with tarfile.open(path) as tar:
        files = {m.name: f.read() for m in tar.getmembers() if (f := tar.extractfile(m))}
    files["chazbot.sqlite3"] = change(files["chazbot.sqlite3"])
    manifest = json.loads(files["manifest.json"])
    data = files["chazbot.sqlite3"]
    manifest["files"]["chazbot.sqlite3"] = {
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    files["manifest.json"] = json.dumps(manifest).encode()
    with tarfile.open(target, "w") as tar:
        for name in ["manifest.json", *[n for n in files if n != "manifest.json"]]:
            info = tarfile.TarInfo(name)
            info.size = len(files[name])
            tar.addfile(info, io.BytesIO(files[name]))


async def test_a_backup_during_a_write_burst_restores_every_acknowledged_write(
    tmp_path: Path, start: Any
) -> None:
    where = tmp_path / "peer"
    write_config(where)
    service = await start(where)
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

    burst = [asyncio.create_task(writer(n)) for n in range(4)]
    await wait_until(lambda: len(acked) >= 50, 120, "50 acknowledged writes")
    before = list(acked)  # acknowledged before the backup began
    code, out, err = await cli(where, "backup", str(tmp_path / "peer.backup"))
    during = len(acked)
    await wait_until(lambda: len(acked) > during, 60, "writes after the backup")
    stop.set()
    await asyncio.gather(*burst)
    assert code == 0, err
    assert "backup written to" in out and "backup [" in err
    assert len(acked) > len(before)  # the burst went on during the backup

    backup = tmp_path / "peer.backup"
    assert backup.stat().st_mode & 0o777 == 0o600  # it holds the peer's secret keys
    members = backup_members(backup)
    assert set(members) == {"manifest.json", "chazbot.sqlite3"}
    assert all(m.mode == 0o600 for m in members.values())
    assert not list(tmp_path.glob(".peer.backup*"))  # nothing left from assembling it

    # restore refuses the running service's state dir
    code, _, err = await cli(where, "restore", str(backup))
    assert code == 1 and "in use by chazbot run" in err
    await service.stop()
    # ... and a stopped peer that holds a state, without --force
    code, _, err = await cli(where, "restore", str(backup))
    assert code == 1 and "restore --force" in err

    # a damaged backup changes nothing: a byte flipped (the manifest catches it) ...
    other = tmp_path / "other"
    write_config(other)
    raw = bytearray(backup.read_bytes())
    at = raw.find(b'"value":"burst ')
    assert at > 0
    damaged = tmp_path / "damaged.backup"
    raw[at + 10] ^= 0x01
    damaged.write_bytes(bytes(raw))
    code, _, err = await cli(other, "restore", str(damaged))
    assert code == 1 and "does not match its manifest" in err
    # ... or a signed entry changed with a manifest to match (verify catches it)
    forged = tmp_path / "forged.backup"
    rewrite_backup(backup, forged, lambda b: b.replace(b'"value":"burst w', b'"value":"burst W', 1))
    code, out, err = await cli(other, "restore", str(forged))
    assert code == 1 and "fails verify; nothing was changed" in err and "FAIL sha256:" in out
    assert not (other / "state" / "chazbot.sqlite3").exists()
    assert not [p for p in (other / "state").iterdir() if p.name != "chazbot.lock"]

    # the good one restores, verifies, and holds every write acknowledged before it began
    code, out, err = await cli(other, "restore", str(backup))
    assert code == 0, err
    assert "0 failed" in out and "restored" in out
    assert (other / "state" / "chazbot.sqlite3").stat().st_mode & 0o777 == 0o600
    code, out, _ = await cli(other, "verify")
    assert code == 0 and " 0 failed" in out
    code, out, err = await cli(other, "export", "chaz")
    assert code == 0, err
    restored = set(exported_keys(out))
    assert set(before) <= restored
    assert restored <= set(acked)

    # --force puts it in place of a state that is there, moving that one aside
    code, out, err = await cli(where, "restore", "--force", str(backup))
    assert code == 0, err
    aside = [p for p in (where / "state").iterdir() if p.name.startswith("replaced-")]
    assert len(aside) == 1 and (aside[0] / "chazbot.sqlite3").exists()
    code, out, _ = await cli(where, "export", "chaz")
    assert set(exported_keys(out)) == restored

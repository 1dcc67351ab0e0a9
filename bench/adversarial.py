"""Auth state under a refused-entry burst (issue #11), and disk under a soft-fail flood (#22).

Run: ``.venv/bin/python bench/adversarial.py [--changes 2000] [--refused 1000]
[--baseline REF] [--baseline-refused 20]``. Not a timed test; CI does not run it.

The scenario (issue #11): a bank with ``--changes`` auth changes (one grant per entry, each
to a new key), then a read-only key's batch of ``--refused`` data entries, each one refused
(the key may not write). Measured:

- ledger-thread time of the refused batch (``LedgerCore.ingest`` on the ledger's thread,
  signatures already checked): target ≤ 1 s for 1,000 entries after 2,000 changes;
- bytes of the auth tables (``auth_heads``, or ``auth_sets`` before): target ≤ 10 MB;
- the time to write the changes, for scale.

The soft-fail flood (issue #22, item 3), on real peers over loopback: an owner serving a
bank and a relay that imported it; a key that held write is turned down to read and pushes
``--flood-pushes`` batches of about ``--flood-mb`` MB each, built on the parents it saw
before, to the owner and to the relay. Measured: the growth of each state file (with its
WAL) and the entries stored. Bound: nothing is stored for entries that arrive soft-failed
and that no writer builds on; what a writer builds on is kept within
``KeptLimits.soft_failed_bytes`` (8 MiB) per key, database and revocation, so the target is
growth ≤ 8 MiB per peer. The anchor, in the same run: the same pushes by a key that holds
write (stored, as every soft-failed entry was before #22: 151 MB per peer for 24 pushes).

``--baseline REF`` (default: the commit before the change) runs the same scenario against
that commit, checked out into a temporary git worktree, in a subprocess; it refuses only
``--baseline-refused`` entries (the old code takes seconds per entry there) and prints the
figure per entry and scaled to ``--refused``. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BASELINE_REF = "0311c45"  # main before the ledger changes of issue #11
TARGET_SECONDS = 1.0
TARGET_BYTES = 10 * 1024 * 1024


def auth_table_bytes(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        total = 0
        for table, column in (("auth_sets", "members"), ("auth_heads", "members")):
            try:
                row = conn.execute(f"SELECT coalesce(sum(length({column})), 0) FROM {table}")
                total += int(row.fetchone()[0])
            except sqlite3.OperationalError:
                pass
        row = conn.execute("SELECT count(*) FROM auth")
        total += int(row.fetchone()[0]) * 120  # key, level, status, height, entry id
        return total
    finally:
        conn.close()


async def scenario(path: Path, changes: int, refused: int) -> dict[str, Any]:
    """Runs against whichever ``chazbot`` is importable (this tree, or a baseline's)."""
    from chazbot.ledger import Entry, KeyPair, Ledger, Permission
    from chazbot.ledger.core import LedgerCore

    owner, reader = KeyPair.generate(), KeyPair.generate()
    write, read = Permission.parse("write", 5), Permission.parse("read")
    ledger = await Ledger.open(path)
    try:
        db = await ledger.create_db(owner, {"name": "crowded"})
        await ledger.set_auth(db, owner, reader.public, read)
        started = time.perf_counter()
        grants = [{"_auth": [_grant(KeyPair.generate().public, write)]} for _ in range(changes)]
        for start in range(0, changes, 200):
            await ledger.write_many(db, owner, grants[start : start + 200])
        write_s = time.perf_counter() - started
        tips = await ledger.tips(db)
        height = max([(await ledger.entry(t)).height for t in tips]) + 1
        burst = [
            Entry.create(
                reader,
                db,
                tips,
                height,
                {"notes": [{"op": "insert", "row": {"n": i}}]},
            )
            for i in range(refused)
        ]
        decoded = [Entry.decode(e.data) for e in burst]
        started = time.perf_counter()
        result, _ = await ledger.run(LedgerCore.ingest, decoded)
        ingest_s = time.perf_counter() - started
        assert not result.accepted and len(result.rejected) == refused, result
    finally:
        await ledger.close()
    return {
        "changes": changes,
        "refused": refused,
        "ingest_s": ingest_s,
        "per_entry_ms": 1000 * ingest_s / max(refused, 1),
        "auth_bytes": auth_table_bytes(path),
        "write_changes_s": write_s,
    }


def _grant(key: str, perm: Any) -> dict[str, Any]:
    return {"op": "set_key", "key": key, "perm": perm.name, "prio": perm.prio, "status": "active"}


def run_here(changes: int, refused: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(scenario(Path(tmp) / "bench.sqlite3", changes, refused))


def run_baseline(ref: str, changes: int, refused: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), ref],
            check=True,
            capture_output=True,
        )
        try:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            out = subprocess.run(
                [sys.executable, __file__, "--inner", str(changes), str(refused)],
                check=True,
                capture_output=True,
                text=True,
                env=env,
                cwd=tree,
            )
            return dict(json.loads(out.stdout.strip().splitlines()[-1]))
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                check=False,
                capture_output=True,
            )


def _disk(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


async def soft_fail_flood(tmp: Path, pushes: int, mb: float) -> dict[str, Any]:
    """See the module doc; returns growth in bytes per peer, for the flood and the anchor."""
    sys.path.insert(0, str(ROOT))
    from chazbot.ledger import KeyPair, Permission
    from chazbot.sync import SyncClient
    from tests.support.adversarial import forge, head
    from tests.support.sync import Node

    write, read = Permission.parse("write", 10), Permission.parse("read")
    a = await Node.open(tmp / "owner.sqlite3")
    b = await Node.open(tmp / "relay.sqlite3")
    owner, hostile, honest = KeyPair.generate(), KeyPair.generate(), KeyPair.generate()
    out: dict[str, Any] = {"pushes": pushes, "mb_per_push": mb}
    try:
        db = await a.ledger.create_db(
            owner, {"name": "flooded"}, [(hostile.public, write), (honest.public, write)]
        )
        await a.ledger.set_auth(db, owner, b.key.public, write)
        await a.sharing.share(db)
        assert (await b.replicator.import_db(await a.server.ticket(db), "write")).status == "done"
        await b.sharing.share(db)  # a relay: it serves the bank on
        old_parents, old_height = await head(a.ledger, db)
        await a.ledger.set_auth(db, owner, hostile.public, read)
        await b.replicator.sync_now(db)
        per_entry = 8 * 15 * 1024
        per_push = max(1, int(mb * 1e6 / per_entry))

        def batch(key: KeyPair, parents: list[str], height: int, tag: str) -> list[bytes]:
            blob = "x" * (15 * 1024)
            return [
                forge(
                    key,
                    db,
                    parents,
                    height,
                    {
                        "memory": [
                            {"op": "insert", "row": {"key": f"{tag}{i}.{n}", "value": blob}}
                            for n in range(8)
                        ]
                    },
                )
                for i in range(per_push)
            ]

        async def push_all(key: KeyPair, make: Any) -> dict[str, Any]:
            before = {n.path: _disk(n.path) for n in (a, b)}
            count = {n.path: await n.ledger.count_entries(db) for n in (a, b)}
            client = SyncClient(key, timeout=120.0, allow_private_peers=True)
            refused = accepted = 0
            started = time.perf_counter()
            try:
                for p in range(pushes):
                    entries = await make(p)
                    for node in (a, b):
                        result = await client.push(node.address, db, entries)
                        refused += result.refused
                        accepted += result.accepted
            finally:
                await client.close()
            took = time.perf_counter() - started
            await a.replicator.sync_now(db)
            await b.replicator.sync_now(db)
            return {
                "seconds": took,
                "accepted": accepted,
                "refused": refused,
                "owner_bytes": _disk(a.path) - before[a.path],
                "relay_bytes": _disk(b.path) - before[b.path],
                "owner_entries": await a.ledger.count_entries(db) - count[a.path],
                "relay_entries": await b.ledger.count_entries(db) - count[b.path],
            }

        async def flood(p: int) -> list[bytes]:
            return batch(hostile, old_parents, old_height, f"f{p}.")

        async def anchor(p: int) -> list[bytes]:
            parents, height = await head(a.ledger, db)
            return batch(honest, parents, height, f"a{p}.")

        out["flood"] = await push_all(hostile, flood)
        out["anchor"] = await push_all(honest, anchor)
    finally:
        await a.close()
        await b.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=2000)
    parser.add_argument("--refused", type=int, default=1000)
    parser.add_argument("--baseline", default=BASELINE_REF, help="git ref, or '' to skip")
    parser.add_argument("--baseline-refused", type=int, default=20)
    parser.add_argument("--flood-pushes", type=int, default=24)
    parser.add_argument("--flood-mb", type=float, default=3.8)
    parser.add_argument("--inner", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        print(json.dumps(run_here(*args.inner)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        flood = asyncio.run(soft_fail_flood(Path(tmp), args.flood_pushes, args.flood_mb))
    f, anc = flood["flood"], flood["anchor"]
    print(
        f"soft-fail flood: {args.flood_pushes} pushes of ~{args.flood_mb:g} MB to the owner "
        f"and to the relay, by a key turned down to read"
    )
    print(f"{'':34}{'owner MB':>10}{'relay MB':>10}{'entries':>10}{'target':>10}")
    print(
        f"{'  downgraded key (refused)':34}{f['owner_bytes'] / 1e6:>10.2f}"
        f"{f['relay_bytes'] / 1e6:>10.2f}{f['owner_entries'] + f['relay_entries']:>10}"
        f"{'≤8.39':>10}"
    )
    print(
        f"{'  anchor: a writer, same pushes':34}{anc['owner_bytes'] / 1e6:>10.2f}"
        f"{anc['relay_bytes'] / 1e6:>10.2f}{anc['owner_entries'] + anc['relay_entries']:>10}"
    )
    print(f"  flood refused {f['refused']} entries in {f['seconds']:.1f} s")
    flood_ok = max(f["owner_bytes"], f["relay_bytes"]) <= 8 * 1024 * 1024
    here = run_here(args.changes, args.refused)
    base = None
    if args.baseline:
        base = run_baseline(args.baseline, args.changes, args.baseline_refused)
        base["scaled_ingest_s"] = base["per_entry_ms"] * args.refused / 1000
    print(f"load average {os.getloadavg()[0]:.1f}; {args.changes} auth changes")
    print(f"{'':34}{'this code':>14}{'before #11':>14}{'target':>10}")
    rows = [
        (
            f"refused batch of {args.refused} (s)",
            here["ingest_s"],
            base and base["scaled_ingest_s"],
            f"≤{TARGET_SECONDS:g}",
        ),
        ("  per refused entry (ms)", here["per_entry_ms"], base and base["per_entry_ms"], ""),
        (
            "auth tables (MB)",
            here["auth_bytes"] / 1e6,
            base and base["auth_bytes"] / 1e6,
            f"≤{TARGET_BYTES / 1e6:g}",
        ),
        ("writing the changes (s)", here["write_changes_s"], base and base["write_changes_s"], ""),
    ]
    for name, mine, old, target in rows:
        old_text = "-" if old is None else f"{old:.3f}"
        print(f"{name:34}{mine:>14.3f}{old_text:>14}{target:>10}")
    if base is not None:
        print(f"(before #11: {args.baseline_refused} entries measured, scaled to {args.refused})")
    print(json.dumps({"this": here, "baseline": base, "soft_fail_flood": flood}))
    ok = here["ingest_s"] <= TARGET_SECONDS and here["auth_bytes"] <= TARGET_BYTES and flood_ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Auth state under a refused-entry burst, beside the code before issue #11 in the same run.

Run: ``.venv/bin/python bench/adversarial.py [--changes 2000] [--refused 1000]
[--baseline REF] [--baseline-refused 20]``. Not a timed test; CI does not run it.

The scenario (issue #11): a bank with ``--changes`` auth changes (one grant per entry, each
to a new key), then a read-only key's batch of ``--refused`` data entries, each one refused
(the key may not write). Measured:

- ledger-thread time of the refused batch (``LedgerCore.ingest`` on the ledger's thread,
  signatures already checked): target ≤ 1 s for 1,000 entries after 2,000 changes;
- bytes of the auth tables (``auth_heads``, or ``auth_sets`` before): target ≤ 10 MB;
- the time to write the changes, for scale.

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=2000)
    parser.add_argument("--refused", type=int, default=1000)
    parser.add_argument("--baseline", default=BASELINE_REF, help="git ref, or '' to skip")
    parser.add_argument("--baseline-refused", type=int, default=20)
    parser.add_argument("--inner", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        print(json.dumps(run_here(*args.inner)))
        return 0
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
    print(json.dumps({"this": here, "baseline": base}))
    ok = here["ingest_s"] <= TARGET_SECONDS and here["auth_bytes"] <= TARGET_BYTES
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Fuzz every input from outside, 10,000 examples per target, and print what was found.

Run: ``.venv/bin/python bench/fuzz.py [--examples 10000] [--only tickets,commands]``.
Not a timed test; CI does not run it (the test suite runs the same targets with a few
hundred examples each: ``tests/test_fuzz.py``).

Targets (see ``tests/test_fuzz.py``): tickets, sync requests (headers and bodies over real
loopback HTTP to a real sync server), commands through the peer's command entry point,
tool arguments from the model (``run_tool``), config files (``load_config``). Each must end
in a clear one-line error or a success: no crash, no traceback to the caller or in the log,
no write from refused input, and ``Ledger.verify`` clean at the end.

Prints one line per target (examples, seconds, ``ok`` or the failure with hypothesis's
falsifying example) and one JSON line; exits 1 if anything was found.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--only", default="", help="comma-separated target names")
    args = parser.parse_args()
    os.environ["CHAZBOT_FUZZ_EXAMPLES"] = str(args.examples)
    from tests import test_fuzz  # after the variable: it sets the examples per target

    wanted = [t.strip() for t in args.only.split(",") if t.strip()] or list(test_fuzz.TARGETS)
    found: dict[str, str] = {}
    results = []
    print(f"fuzzing {len(wanted)} targets, {args.examples} examples each; load {os.getloadavg()}")
    for name in wanted:
        target = test_fuzz.TARGETS[name]
        started = time.monotonic()
        try:
            target()
            outcome = "ok"
        except BaseException as exc:  # the bench reports whatever it found
            text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            notes = "\n".join(getattr(exc, "__notes__", []))
            outcome = "FOUND"
            found[name] = f"{text}\n{notes}"
        took = time.monotonic() - started
        results.append(
            {"target": name, "examples": args.examples, "s": round(took, 1), "result": outcome}
        )
        print(f"{name:16} {args.examples:>7} examples {took:7.1f} s  {outcome}", flush=True)
    harness = test_fuzz._harness
    if harness is not None:
        problems = harness.verify()
        logged = list(harness.tracebacks.found)
        test_fuzz.close_harness()
        if problems:
            found["ledger verify"] = "; ".join(problems[:10])
        if logged:
            found["tracebacks in the log"] = "; ".join(logged[:10])
    for name, text in found.items():
        print(f"\n== {name}\n{text[:4000]}")
    print(json.dumps({"bench": "fuzz", "results": results, "found": sorted(found)}))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

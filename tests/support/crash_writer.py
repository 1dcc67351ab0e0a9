"""Crash-test helper: write entries one commit at a time until killed.

Usage: ``python crash_writer.py STATE_FILE PREFIX``. Opens (or creates) the ledger, finds or
creates one database (its id is kept in ``local_kv``), then loops: commit one entry whose row
is ``{"k": "<PREFIX>:<n>"}``, and only after the commit returns print ``<PREFIX>:<n>`` and
flush. Every printed line is therefore an acknowledged, durable write. The first line printed
is ``db <id>``.

It imports ``chazbot.ledger`` without running ``chazbot/__init__.py`` (which pulls in the
whole bot: aiohttp, numpy, nio), so that the 20 starts of the crash test stay quick; the
ledger itself is the real one.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import types

_spec = importlib.util.find_spec("chazbot")
assert _spec is not None and _spec.submodule_search_locations is not None
_package = types.ModuleType("chazbot")
_package.__path__ = list(_spec.submodule_search_locations)
sys.modules["chazbot"] = _package

from chazbot.ledger import KeyPair, Ledger  # noqa: E402

KEY = KeyPair.from_private_bytes(bytes([42]) * 32)


async def main(path: str, prefix: str) -> None:
    ledger = await Ledger.open(path)
    found = await ledger.local("SELECT value FROM local_kv WHERE key = 'crash_db'")
    if found:
        db = str(found[0][0])
    else:
        db = await ledger.create_db(KEY, {"name": "crash"})
        await ledger.local("INSERT INTO local_kv (key, value) VALUES ('crash_db', ?)", (db,))
    print(f"db {db}", flush=True)
    n = 0
    while True:
        row_key = f"{prefix}:{n}"
        await ledger.write(db, KEY, {"notes": [{"op": "insert", "row": {"k": row_key}}]})
        sys.stdout.write(row_key + "\n")
        sys.stdout.flush()
        n += 1


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))

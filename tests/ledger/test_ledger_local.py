"""The typed peer-local stores (``ledger.kv``, ``keys``, ``hosted``, and the features' own:
Matrix ``credentials``, sync's shares and cursors) on a real
state file: exact prefixes (no LIKE wildcards, case-sensitive), one transaction per batch,
newest-by-value reads and pruning, and registry names claimed once whatever their case."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from chazbot.errors import ConflictError
from chazbot.ledger import KeyPair, Ledger
from chazbot.sync.tables import SharedDbs, SyncCursors
from chazbot.transports.matrix.credentials import Secrets


async def test_key_value_prefixes_are_exact(tmp_path: Path) -> None:
    ledger = await Ledger.open(tmp_path / "state.db")
    try:
        kv = ledger.kv
        assert await kv.get("x") is None
        await kv.set_many(
            [("h:a_1", "03"), ("h:a%2", "01"), ("h:b", "02"), ("H:c", "09"), ("hx", "00")]
        )
        await kv.set("h:b", "05")  # replaces
        assert await kv.with_prefix("h:") == [("h:a%2", "01"), ("h:a_1", "03"), ("h:b", "05")]
        assert await kv.with_prefix("h:a_") == [("h:a_1", "03")]  # "_" is no wildcard
        assert await kv.with_prefix("h:", newest=2) == [("h:b", "05"), ("h:a_1", "03")]
        assert await kv.setdefault("log", "first") == "first"
        assert await kv.setdefault("log", "second") == "first"
        assert await kv.delete_prefix("h:", keep_newest=1) == 2
        assert await kv.with_prefix("h:") == [("h:b", "05")]
        assert await kv.get("H:c") == "09" and await kv.get("hx") == "00"  # untouched
        await kv.delete("hx")
        assert await kv.get("hx") is None
    finally:
        await ledger.close()


async def test_credentials_and_keys(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    one, two = KeyPair.generate(), KeyPair.generate()
    ledger = await Ledger.open(path)
    try:
        await Secrets(ledger).set("matrix:@bot:x", "secret")
        await ledger.keys.add(one, "peer")
        await ledger.keys.add(two, "peer")
        await ledger.keys.add(one, "other")  # a key kept already stays as it is
    finally:
        await ledger.close()
    ledger = await Ledger.open(path)  # and all of it survives a restart
    try:
        secrets = Secrets(ledger)
        assert await secrets.get("matrix:@bot:x") == "secret"
        await secrets.delete("matrix:@bot:x")
        assert await secrets.get("matrix:@bot:x") is None
        first = await ledger.keys.first("peer")
        assert first is not None and first.public == one.public
        assert await ledger.keys.first("other") is None
        assert [(label, k.public) for label, k in await ledger.keys.all()] == [
            ("peer", one.public),
            ("peer", two.public),
        ]
    finally:
        await ledger.close()


async def test_hosted_names_are_claimed_once_whatever_the_case(tmp_path: Path) -> None:
    ledger = await Ledger.open(tmp_path / "state.db")
    try:
        hosted = ledger.hosted
        await hosted.add("bank", "Notes", "sha256:" + "1" * 64, {"description": "d"})
        with pytest.raises(ConflictError, match="exists already"):
            await hosted.add("bank", "notes", "sha256:" + "2" * 64)
        await hosted.add("agent", "notes", "sha256:" + "3" * 64)  # another kind: fine
        found = await hosted.get("bank", "NOTES")
        assert found is not None and (found.name, found.data) == ("Notes", {"description": "d"})
        by_db = await hosted.by_db("sha256:" + "3" * 64, ("bank", "agent"))
        assert by_db is not None and (by_db.kind, by_db.name) == ("agent", "notes")
        # of concurrent claims of one name exactly one wins, the rest are ConflictErrors
        names = ("Race", "race", "RACE")
        claims = [hosted.add("bank", names[i % 3], f"sha256:{i:064d}") for i in range(8)]
        results = await asyncio.gather(*claims, return_exceptions=True)
        assert sum(r is None for r in results) == 1
        assert all(isinstance(r, ConflictError) for r in results if r is not None)
        assert [h.name for h in await hosted.all("bank")] == ["Notes", "Race"]  # i = 0 first
        await hosted.remove("bank", "race")
        assert await hosted.get("bank", "Race") is None
    finally:
        await ledger.close()


async def test_sync_shared_and_cursors(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    a, b = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    ledger = await Ledger.open(path)
    try:
        shared, cursors = SharedDbs(ledger), SyncCursors(ledger)
        await shared.add(b, 10)
        await shared.add(a, 20)
        await shared.add(b, 30)  # served already: keeps its since
        assert await shared.all() == [b, a]
        assert await shared.remove(b) is True
        assert await shared.remove(b) is False
        first = await cursors.add(a, "http:one:1", 1)
        assert (first.pulled, first.pushed, first.log) == (0, 0, "")
        await cursors.add(b, "http:one:1", 2)
        await cursors.add(a, "http:two:2", 3)
        first.pulled, first.pushed, first.log = 7, 5, "log-1"
        await cursors.save(first)
        again = await cursors.add(a, "http:one:1", 4)  # an existing pair is kept
        assert (again.pulled, again.pushed, again.log) == (7, 5, "log-1")
    finally:
        await ledger.close()
    ledger = await Ledger.open(path)
    try:
        cursors = SyncCursors(ledger)
        assert [c.address for c in await cursors.list(a)] == ["http:one:1", "http:two:2"]
        assert [c.db for c in await cursors.list()] == [a, b, a]
        assert await cursors.remove(a, "http:two:2") == 1
        assert await cursors.remove(a) == 1
        assert [c.db for c in await cursors.list()] == [b]
    finally:
        await ledger.close()

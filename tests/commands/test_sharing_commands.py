"""The seed's walkthrough step 4 through commands: share, import with approval, grant on the
importing peer, writes replicating both ways. Two real peers syncing over loopback HTTP."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import chazbot
from chazbot.config import AgentConfig, Config
from chazbot.errors import PermissionDenied
from chazbot.peer import Peer
from chazbot.transports.web import admin
from tests.support.waits import wait_until


async def db_of(peer: Peer, bank: str) -> str:
    hosted = await peer.registry.get("bank", bank)
    assert hosted is not None, f"{bank} is not on this peer"
    return hosted.db


async def holders_worded_once(peer: Peer, bank: str, expected: str) -> None:
    """ "Who holds this key" reads the same in ``/memory stats`` and on the web's bank page:
    one function words it (``key_holders``)."""
    hosted = await peer.registry.get("bank", bank)
    assert hosted is not None
    ui: Any = SimpleNamespace(peer=peer)
    shown = await admin.holders(ui, hosted.db)
    stats = await peer.command(f"/memory stats {bank}")
    assert stats.ok, stats.text
    assert any(expected in h.who for h in shown), shown
    for h in shown:
        assert f"- {h.key} {h.perm.name} — {h.who}" in stats.text, (h, stats.text)


def cfg(path: Path, agent: str) -> Config:
    return Config(
        state_dir=path,
        sync_listen="127.0.0.1:0",
        sync_allow_private_peers=True,  # the peers are on loopback
        agents=[AgentConfig(name=agent)],
    )


async def keys(peer: Peer, agent: str, bank: str) -> list[str]:
    return sorted(h.key for h in await peer.agent(agent).recall("", bank=bank, limit=50))


async def test_walkthrough_share_import_grant_replicate(tmp_path: Path) -> None:
    async with (
        chazbot.open(tmp_path / "a", cfg(tmp_path / "a", "alpha")) as a,
        chazbot.open(tmp_path / "b", cfg(tmp_path / "b", "gamma")) as b,
    ):
        await a.sync.start()
        await b.sync.start()
        assert (await a.command('/memory new project-notes "Shared notes"')).ok
        assert (await a.command("/memory grant project-notes alpha write")).ok
        await a.agent("alpha").remember(
            "architecture.sessions", "one DB per conversation", bank="project-notes"
        )
        shared = await a.command("/memory share project-notes")
        assert shared.ok
        ticket = re.search(r"eidetica:\S+", shared.text)
        assert ticket is not None

        first = await b.command(f"/memory import {ticket.group(0)} admin")
        assert first.ok and "request" in first.text, first.text
        pending = await a.command("/sharing requests")
        request_id = re.search(r"request (\d+)", pending.text)
        assert request_id is not None, pending.text
        not_admin = await a.command(f"/sharing approve {request_id.group(1)}", is_admin=False)
        assert not not_admin.ok
        assert (await a.command(f"/sharing approve {request_id.group(1)}")).ok
        await holders_worded_once(a, "project-notes", f"import request {request_id.group(1)}")
        done = await b.command(f"/memory import {ticket.group(0)} admin")
        assert done.ok and "Imported bank project-notes" in done.text, done.text

        assert (await b.command("/memory grant project-notes gamma write")).ok
        assert await keys(b, "gamma", "project-notes") == ["architecture.sessions"]
        await b.agent("gamma").remember("from.b", "gamma wrote this", bank="project-notes")
        await a.agent("alpha").remember("from.a", "alpha wrote this", bank="project-notes")
        expected = ["architecture.sessions", "from.a", "from.b"]

        async def both() -> bool:
            return (
                await keys(a, "alpha", "project-notes") == expected
                and await keys(b, "gamma", "project-notes") == expected
            )

        await wait_until(both)
        again = await b.command(f"/memory import {ticket.group(0)}")
        assert not again.ok and "here already" in again.text


async def test_read_only_import_says_a_way_out_that_works(tmp_path: Path) -> None:
    """B imported with read: granting write is refused, and the way out the error names
    (the owner grants B's peer key write) makes the same grant work afterwards."""
    async with (
        chazbot.open(tmp_path / "a", two_cfg(tmp_path / "a", "alpha")) as a,
        chazbot.open(tmp_path / "b", two_cfg(tmp_path / "b", "gamma")) as b,
    ):
        await a.sync.start()
        await b.sync.start()
        await a.command("/memory new notes")
        ticket = (await a.command("/memory share notes")).text.split()[-1]
        await b.command(f"/memory import {ticket} read")
        request_id = re.search(r"request (\d+)", (await a.command("/sharing requests")).text)
        assert request_id is not None
        await a.command(f"/sharing approve {request_id.group(1)}")
        assert (await b.command(f"/memory import {ticket} read")).ok
        r = await b.command("/memory grant notes gamma write")
        assert not r.ok, r.text
        suggested = re.search(r"/memory grant notes (\S+) write", r.text)
        assert suggested is not None and suggested.group(1) == b.key.public, r.text
        assert "import" not in r.text  # never the refused "import with admin" advice
        assert (await b.command("/memory grant notes gamma read")).ok  # read is delegable
        r = await a.command(suggested.group(0))
        assert r.ok, r.text
        db = await db_of(b, "notes")

        async def b_holds_write() -> bool:
            return (await b.ledger.permission(db, b.key.public)).name == "write"

        await wait_until(b_holds_write)
        r = await b.command("/memory grant notes gamma write")
        assert r.ok, r.text
        await b.agent("gamma").remember("k", "v", bank="notes")


def two_cfg(path: Path, *agents: str) -> Config:
    return Config(
        state_dir=path,
        sync_listen="127.0.0.1:0",
        sync_allow_private_peers=True,
        agents=[AgentConfig(name=n) for n in agents],
    )


async def share_and_import(a: Peer, b: Peer, bank: str) -> str:
    """The seed's step 4 verbatim up to the import: share on A, import on B with the default
    permission, approve on A, import again. Returns the ticket."""
    shared = await a.command(f"/memory share {bank}")
    assert shared.ok, shared.text
    found = re.search(r"eidetica:\S+", shared.text)
    assert found is not None
    ticket = found.group(0)
    first = await b.command(f"/memory import {ticket}")
    assert first.ok and "request" in first.text, first.text
    request_id = re.search(r"request (\d+)", (await a.command("/sharing requests")).text)
    assert request_id is not None
    assert (await a.command(f"/sharing approve {request_id.group(1)}")).ok
    done = await b.command(f"/memory import {ticket}")
    assert done.ok and "with write" in done.text, done.text
    return ticket


async def test_delegation_on_an_imported_bank(tmp_path: Path) -> None:
    """B holds write (not admin) on A's bank and grants its own agent gamma write on it:
    gamma's rows are signed by B's peer key and name gamma; A's owner sees B's key in stats
    and revokes it by the key /pubkey prints; B's later writes reach no other peer."""
    async with (
        chazbot.open(tmp_path / "a", two_cfg(tmp_path / "a", "alpha", "beta")) as a,
        chazbot.open(tmp_path / "b", two_cfg(tmp_path / "b", "gamma", "delta")) as b,
    ):
        await a.sync.start()
        await b.sync.start()
        assert (await a.command("/memory new project-notes")).ok
        assert (await a.command("/memory grant project-notes alpha write")).ok
        await share_and_import(a, b, "project-notes")

        r = await b.command("/memory grant project-notes gamma write")
        assert r.ok, r.text
        r = await b.command("/memory grant project-notes delta read")
        assert r.ok, r.text
        gamma, delta, alpha = b.agent("gamma"), b.agent("delta"), a.agent("alpha")
        assert any(
            x.name == "project-notes" and x.permission == "write"
            for x in await gamma.memory.banks()
        )
        await gamma.remember("from.b", "gamma wrote this", bank="project-notes")
        await alpha.remember("from.a", "alpha wrote this", bank="project-notes")
        with pytest.raises(PermissionDenied):
            await delta.remember("nope", "delta only reads", bank="project-notes")
        expected = ["from.a", "from.b"]

        async def both() -> bool:
            return (
                await keys(a, "alpha", "project-notes") == expected
                and await keys(b, "gamma", "project-notes") == expected
                and await keys(b, "delta", "project-notes") == expected
            )

        await wait_until(both)
        bank_db = await db_of(a, "project-notes")
        rows = {r.data["key"]: r for r in await a.ledger.rows(bank_db, "memory")}
        assert rows["from.b"].author == b.key.public and rows["from.b"].data["agent"] == "gamma"
        assert rows["from.a"].author == alpha.key.public

        # the owner sees whom to revoke: B's peer key with write, named as the importer
        stats = await a.command("/memory stats project-notes")
        assert stats.ok, stats.text
        assert f"{b.key.public} write" in stats.text, stats.text
        assert f"{alpha.key.public} write" in stats.text and "agent alpha" in stats.text
        b_stats = await b.command("/memory stats project-notes")
        assert "gamma (write)" in b_stats.text and "delta (read)" in b_stats.text, b_stats.text

        # revoke by the key as B's /pubkey prints it
        pub = (await b.command("/pubkey")).text.splitlines()[0].split()[-1]
        assert pub == b.key.public
        r = await a.command(f"/memory revoke project-notes {pub}")
        assert r.ok, r.text
        assert (await a.ledger.permission(bank_db, b.key.public)).name == "none"
        with contextlib.suppress(PermissionDenied):  # refused at once if B already knew
            await gamma.remember("after.revoke", "must reach nobody", bank="project-notes")
        await alpha.remember("after.a", "alpha still writes", bank="project-notes")

        async def b_is_turned_away() -> bool:
            assert b.sync.replicator is not None
            return any(
                s.failing and "may not" in (s.last_error or "") for s in b.sync.replicator.status()
            )

        await wait_until(b_is_turned_away)  # A no longer serves B's key: neither pull nor push
        # B's agents' later writes are refused on B itself too: either the revocation reached
        # B (a long poll in flight when it was written), or the refusal is how B learns
        with pytest.raises(PermissionDenied, match=r"refuses this peer.s key|no active grant"):
            await gamma.remember("after.turned.away", "refused here", bank="project-notes")
        on_b = {r.data["key"] for r in await b.ledger.rows(bank_db, "memory")}
        assert "after.turned.away" not in on_b and "after.a" not in on_b
        assert "after.a" in await keys(a, "alpha", "project-notes")
        assert "after.revoke" not in await keys(a, "alpha", "project-notes")


async def test_a_revoked_peers_later_rows_stay_hidden_when_relayed(tmp_path: Path) -> None:
    """B never learns it was revoked (A stops serving it), so its delegated agent's write
    is accepted on B; delivered to A by hand, as a relaying peer would, A still hides it."""
    async with (
        chazbot.open(tmp_path / "a", two_cfg(tmp_path / "a", "alpha")) as a,
        chazbot.open(tmp_path / "b", two_cfg(tmp_path / "b", "gamma")) as b,
    ):
        await a.sync.start()
        await b.sync.start()
        await a.command("/memory new project-notes")
        await a.command("/memory grant project-notes alpha write")
        await share_and_import(a, b, "project-notes")
        assert (await b.command("/memory grant project-notes gamma write")).ok
        bank_db = await db_of(a, "project-notes")
        await b.sync.stop()  # B keeps the auth state from before the revocation
        assert (await a.command(f"/memory revoke project-notes {b.key.public}")).ok
        await b.agent("gamma").remember("after.revoke", "reaches no one", bank="project-notes")
        late = [d for _, d in await b.ledger.entries(bank_db) if b"after.revoke" in d]
        assert late
        await a.ledger.ingest(late)
        assert "after.revoke" not in await keys(a, "alpha", "project-notes")
        # when B syncs again, A refuses its key: that is how B learns, and it stops writing
        await b.sync.start()
        assert b.sync.replicator is not None
        replicator = b.sync.replicator

        async def refused() -> bool:
            return replicator.withdrawn(bank_db) is not None

        await wait_until(refused)
        with pytest.raises(PermissionDenied, match="refuses this peer's key"):
            await b.agent("gamma").remember("later", "refused on B", bank="project-notes")


async def test_bad_tickets_and_unshare(tmp_path: Path) -> None:
    async with chazbot.open(tmp_path / "a", cfg(tmp_path / "a", "alpha")) as a:
        for bad in ("eidetica:?db=nope", "http://x", "eidetica:?db=sha256:" + "0" * 64):
            r = await a.command(f"/memory import {bad}")
            assert not r.ok and "\n" not in r.text, (bad, r.text)
        await a.command("/memory new notes")
        r = await a.command("/memory unshare notes")
        assert not r.ok and "not shared" in r.text
        await a.sync.start()
        assert (await a.command("/memory share notes")).ok
        assert (await a.command("/memory unshare notes")).ok


async def test_sharing_status_shows_each_pair_its_last_pull_and_push_and_failures(
    tmp_path: Path,
) -> None:
    """An operator's view of sync from chat (``/sharing status``): each synced bank with its
    peer, cursors and when it last pulled and pushed; a peer that went away shows as failing
    with why; with sync off, what waits for it."""
    async with chazbot.open(tmp_path / "b", two_cfg(tmp_path / "b", "gamma")) as b:
        r = await b.command("/sharing status")
        assert r.ok and r.text.startswith("No bank here is synced with another peer"), r.text
    a_cm: contextlib.AbstractAsyncContextManager[Peer] | None
    a_cm = chazbot.open(tmp_path / "a", two_cfg(tmp_path / "a", "alpha"))
    a = await a_cm.__aenter__()
    try:
        async with chazbot.open(tmp_path / "b", two_cfg(tmp_path / "b", "gamma")) as b:
            await a.sync.start()
            await b.sync.start()
            assert (await a.command("/memory new notes")).ok
            await share_and_import(a, b, "notes")
            assert (await b.command("/memory grant notes gamma write")).ok
            await b.agent("gamma").remember("k", "v", bank="notes")

            async def heard() -> bool:
                return all(
                    p.last_pull is not None and p.last_push is not None and p.pushed > 0
                    for p in await b.sharing.sync_pairs()
                )

            await wait_until(heard)
            r = await b.command("/sharing status")
            assert r.ok, r.text
            head, line = r.text.split("\n")
            assert head == "Synced with other peers: 1, all ok:", r.text
            assert re.fullmatch(
                r"- notes with http:127\.0\.0\.1:\d+: pulled to \d+, pushed to [1-9]\d*; "
                r"last pull \d+ s ago, last push \d+ s ago",
                line,
            ), line
            assert not (await b.command("/sharing status", is_admin=False)).ok
            assert pair_states(b) == {"ok": 1, "failing": 0}

            await a_cm.__aexit__(None, None, None)  # A goes away
            a_cm = None
            await b.agent("gamma").remember("k2", "v2", bank="notes")

            async def failing() -> bool:
                return [p.state for p in await b.sharing.sync_pairs()] == ["failing"]

            await wait_until(failing)
            r = await b.command("/sharing status")
            assert r.text.startswith("Synced with other peers: 1, 1 failing:"), r.text
            assert "; failing: " in r.text and "\n" in r.text
            assert pair_states(b) == {"ok": 0, "failing": 1}
        async with chazbot.open(tmp_path / "b", two_cfg(tmp_path / "b", "gamma")) as b:
            r = await b.command("/sharing status")  # sync not started: what waits for it
            assert r.text.startswith("Sync is off on this peer (sync_listen); 1 to sync"), r.text
            assert "last pull" not in r.text
    finally:
        if a_cm is not None:
            await a_cm.__aexit__(None, None, None)


def pair_states(peer: Peer) -> dict[str, float]:
    """``chazbot_sync_pairs`` as ``/metrics`` shows it, by state."""
    from chazbot.transports.http import SyncCollector

    (family,) = [f for f in SyncCollector(peer.sync).collect() if f.name == "chazbot_sync_pairs"]
    return {s.labels["state"]: s.value for s in family.samples}


def test_ago_reads_like_a_person_would_say_it() -> None:
    from chazbot.sync.outcomes import ago

    now = 1_000_000.0
    assert [ago(now - s, now) for s in (0, 59, 60, 3_599, 7_200, 200_000)] == [
        "0 s ago",
        "59 s ago",
        "1 min ago",
        "59 min ago",
        "2 h ago",
        "2 d ago",
    ]
    assert ago(None, now) == "never" and ago(now + 5, now) == "0 s ago"

"""The /memory command layer through peer.command, and the seed's walkthrough."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import chazbot
from chazbot.commands import TREE
from chazbot.config import AgentConfig, Config
from chazbot.errors import PermissionDenied
from chazbot.peer import Peer


def two_agents(tmp_path: Path, **kw: Any) -> Config:
    return Config(
        state_dir=tmp_path,
        agents=[AgentConfig(name="alpha"), AgentConfig(name="beta"), AgentConfig(name="gamma")],
        **kw,
    )


@pytest.fixture
async def peer(tmp_path: Path) -> AsyncIterator[Peer]:
    async with chazbot.open(tmp_path / "state", two_agents(tmp_path / "state")) as p:
        yield p


async def test_walkthrough_two_agents_one_bank(peer: Peer) -> None:
    r = await peer.command('/memory new project-notes "Shared notes for the chaz project"')
    assert r.ok, r.text
    assert (await peer.command("/memory grant project-notes alpha write")).ok
    assert (await peer.command("/memory grant project-notes beta read")).ok
    alpha, beta = peer.agent("alpha"), peer.agent("beta")
    await alpha.remember(
        "architecture.sessions", "Each conversation gets its own DB.", bank="project-notes"
    )
    hits = await beta.recall("sessions", bank="project-notes")
    assert [h.key for h in hits] == ["architecture.sessions"]
    assert hits[0].bank == "project-notes"
    with pytest.raises(PermissionDenied):
        await beta.remember("x", "y", bank="project-notes")
    # revoke: the auth goes first; later recalls are refused
    r = await peer.command("/memory revoke project-notes beta")
    assert r.ok, r.text
    with pytest.raises(Exception, match="no bank named"):
        await beta.recall("sessions", bank="project-notes")
    # memory is append-only: alpha's entry is still there
    assert [h.key for h in await alpha.recall("sessions", bank="project-notes")] == [
        "architecture.sessions"
    ]


async def test_list_and_new_errors(peer: Peer) -> None:
    assert "No banks yet" in (await peer.command("/memory list")).text
    assert (await peer.command("/memory new notes")).ok
    again = await peer.command("/memory new notes")
    assert not again.ok and "exists already" in again.text
    bad = await peer.command("/memory new 'bad name!'")
    assert not bad.ok and "bad bank name" in bad.text
    missing = await peer.command("/memory new")
    assert not missing.ok and missing.usage_error and "Usage: /memory new <name>" in missing.text
    listed = await peer.command("/MEMORY LIST")
    assert listed.ok and "- notes" in listed.text


async def test_unknown_and_extra_arguments_change_nothing(peer: Peer) -> None:
    r = await peer.command("/memory bogus")
    assert not r.ok and r.usage_error and "subcommand" in r.text
    r = await peer.command("/memory list extra")
    assert not r.ok and "too many arguments" in r.text
    r = await peer.command("/memory grant notes alpha sudo")
    assert not r.ok and "read, write" in r.text
    r = await peer.command('/memory new "unbalanced')
    assert not r.ok and r.usage_error
    assert "No banks yet" in (await peer.command("/memory list")).text


async def test_grant_errors(peer: Peer) -> None:
    await peer.command("/memory new notes")
    r = await peer.command("/memory grant nope alpha read")
    assert not r.ok and "no bank or agent 'nope'" in r.text
    r = await peer.command("/memory grant notes nobody read")
    assert not r.ok and "no agent named 'nobody'" in r.text


async def test_non_admin_cannot_grant(peer: Peer) -> None:
    await peer.command("/memory new notes")
    r = await peer.command("/memory grant notes alpha write", is_admin=False)
    assert not r.ok and "only admins" in r.text
    with pytest.raises(Exception, match="no bank named"):
        await peer.agent("alpha").remember("k", "v", bank="notes")


async def test_agent_db_as_bank(peer: Peer) -> None:
    alpha, beta = peer.agent("alpha"), peer.agent("beta")
    await alpha.remember("alpha.note", "alpha keeps notes on sessions")
    r = await peer.command("/memory grant alpha beta read")
    assert r.ok, r.text
    hits = await beta.recall("sessions", bank="alpha")
    assert [h.value for h in hits] == ["alpha keeps notes on sessions"]
    with pytest.raises(PermissionDenied):
        await beta.remember("x", "y", bank="alpha")


async def test_grant_and_ref_commit_together_or_not_at_all(peer: Peer) -> None:
    """Issue #22 (8): the grant and the ref are one transaction, so a ref that cannot be
    written (here: signed by a key that may not write the database it goes to) leaves the
    bank exactly as it was: no grant, no revoke, no entry at all."""
    from chazbot.ledger import Permission
    from chazbot.memory.banks import grant

    await peer.command("/memory new notes")
    assert (await peer.command("/memory grant notes alpha read")).ok
    alpha, beta = peer.agent("alpha"), peer.agent("beta")
    hosted = await peer.registry.get("bank", "notes")
    assert hosted is not None
    bank_before = await peer.ledger.count_entries(hosted.db)
    beta_before = await peer.ledger.count_entries(beta.db)
    for who, level in ((alpha, "read"), (beta, "none")):
        with pytest.raises(PermissionDenied):
            await grant(
                peer.ledger,
                peer.registry,
                "notes",
                hosted.db,
                who.key,
                beta.db if who is alpha else alpha.db,  # a ref it may not write
                Permission.parse("write"),
            )
        assert (await peer.ledger.permission(hosted.db, who.key.public)).name == level
    assert await peer.ledger.count_entries(hosted.db) == bank_before
    assert await peer.ledger.count_entries(beta.db) == beta_before
    assert await peer.ledger.verify() == []


async def test_stale_ref_is_refused_by_the_ledger(peer: Peer) -> None:
    """With the friendly ref check out of the way, the bank's AuthSettings still refuse."""
    from chazbot.memory.banks import ref_op

    await peer.command("/memory new notes")
    await peer.command("/memory grant notes alpha write")
    alpha = peer.agent("alpha")
    hosted = await peer.registry.get("bank", "notes")
    assert hosted is not None
    await peer.command("/memory revoke notes alpha")
    # put the stale ref back, as if the best-effort removal had failed
    await peer.ledger.write(alpha.db, alpha.key, ref_op("notes", hosted.db, "write"))
    with pytest.raises(PermissionDenied):
        await alpha.remember("k", "v", bank="notes")
    # and straight at the engine, with no ref lookup at all
    with pytest.raises(PermissionDenied):
        await peer.memory.remember(hosted.db, alpha.key, "k", "v")


async def test_delete_is_durable_and_frees_the_name(tmp_path: Path) -> None:
    cfg = two_agents(tmp_path / "s")
    async with chazbot.open(tmp_path / "s", cfg) as peer:
        await peer.command("/memory new notes")
        old = await peer.registry.get("bank", "notes")
        assert (await peer.command("/memory delete notes")).ok
    async with chazbot.open(tmp_path / "s", cfg) as peer:
        assert "No banks yet" in (await peer.command("/memory list")).text
        assert old is not None and await peer.ledger.exists(old.db)  # archive kept
        assert (await peer.command("/memory new notes")).ok
        new = await peer.registry.get("bank", "notes")
        assert new is not None and new.db != old.db


async def test_attach_detach_survive_restart(tmp_path: Path) -> None:
    cfg = two_agents(tmp_path / "s")
    async with chazbot.open(tmp_path / "s", cfg) as peer:
        await peer.command("/memory new notes")
        r = await peer.command("/memory attach notes", agent="alpha", session="room1")
        assert not r.ok and "no bank named" in r.text
        await peer.command("/memory grant notes alpha read")
        r = await peer.command("/memory attach notes", agent="alpha", session="room1")
        assert r.ok, r.text
    async with chazbot.open(tmp_path / "s", cfg) as peer:
        session = await peer.session("room1")
        assert list(await session.attachments()) == ["notes"]
        r = await peer.command("/memory detach notes", agent="alpha", session="room1")
        assert r.ok
        assert await session.attachments() == {}
        r = await peer.command("/memory detach notes", agent="alpha", session="room1")
        assert not r.ok and "not attached" in r.text


async def test_config_show_set_reset(peer: Peer) -> None:
    show = await peer.command("/memory config", agent="alpha")
    assert "auto_recall_enabled = true" in show.text and "max_entries         = 3" in show.text
    assert (await peer.command("/memory config set max_entries 5", agent="alpha")).ok
    for bad, why in [
        ("max_entries 0", "1 to 20"),
        ("max_entries 21", "1 to 20"),
        ("auto_recall_enabled maybe", "true or false"),
        ("colour blue", "unknown setting"),
        ("auto_recall_banks nosuch", "unknown bank"),
    ]:
        r = await peer.command(f"/memory config set {bad}", agent="alpha")
        assert not r.ok and why in r.text, (bad, r.text)
    assert (
        "max_entries         = 5" in (await peer.command("/memory config show", agent="alpha")).text
    )
    await peer.command("/memory new notes")
    await peer.command("/memory grant notes alpha read")
    assert (await peer.command("/memory config set auto_recall_banks notes", agent="alpha")).ok
    assert (
        "auto_recall_banks   = notes"
        in (await peer.command("/memory config show", agent="alpha")).text
    )
    assert (await peer.command("/memory config reset", agent="alpha")).ok
    shown = (await peer.command("/memory config show", agent="alpha")).text
    assert "max_entries         = 3" in shown and "(all attached)" in shown


async def test_forget_search_stats(peer: Peer) -> None:
    alpha = peer.agent("alpha")
    await alpha.remember("deploy", "build with nix and scp to prod", tags=["ops"])
    await alpha.remember("api", "https://api.example.com/v2")
    r = await peer.command("/memory search self nix", agent="alpha")
    assert r.ok and "[deploy]" in r.text and "[api]" not in r.text
    # found by a new user: "search dog" answered "no bank or agent 'dog'"; the words are the
    # query in the room's agent's memory when the first names no bank or agent
    r = await peer.command("/memory search nix scp", agent="alpha")
    assert r.ok and "alpha's own memory" in r.text and "[deploy]" in r.text, r.text
    stats = await peer.command("/memory stats", agent="alpha")
    assert "visible keys   = 2" in stats.text
    assert "search         = numpy (compiled once a bank holds" in stats.text or (
        "search         = compiled (numba)" in stats.text
    )
    assert (await peer.command("/memory forget deploy", agent="alpha")).ok
    r = await peer.command("/memory search self nix", agent="alpha")
    assert "No memories found" in r.text
    r = await peer.command("/memory forget deploy", agent="alpha")
    assert not r.ok and "no memory with key" in r.text
    assert "visible keys   = 1" in (await peer.command("/memory stats self", agent="alpha")).text


async def test_default_banks_idempotent(tmp_path: Path) -> None:
    cfg = Config(
        state_dir=tmp_path / "s",
        agents=[
            AgentConfig(name="ava", default_memory_banks=["shared-facts"]),
            AgentConfig(name="bob", default_memory_banks=["shared-facts"]),
        ],
    )
    async with chazbot.open(tmp_path / "s", cfg) as peer:
        await peer.agent("ava").remember("fact", "the sky is blue", bank="shared-facts")
        hits = await peer.agent("bob").recall("sky", bank="shared-facts")
        assert [h.key for h in hits] == ["fact"]
        entries = await peer.ledger.count_entries()
    async with chazbot.open(tmp_path / "s", cfg) as peer:
        assert await peer.ledger.count_entries() == entries  # nothing re-granted
        banks = await peer.registry.all("bank")
        assert [b.name for b in banks] == ["shared-facts"]


async def test_help_is_generated_from_the_tree(peer: Peer) -> None:
    r = await peer.command("/help memory")
    assert r.ok
    for command in TREE.commands:
        if command.path[0] == "memory":
            assert command.usage("/") in r.text
    assert "/memory grant <bank> <agent|key> <read|write>" in r.text
    assert "/memory revoke <bank> <agent|key>" in r.text


async def test_sharing_commands_parse_now(peer: Peer) -> None:
    r = await peer.command("/memory import")
    assert not r.ok and r.usage_error
    r = await peer.command("/memory import eidetica:?db=x bogus")
    assert not r.ok and "admin, write, read" in r.text


async def test_delete_clears_refs_attachments_and_sharing(tmp_path: Path) -> None:
    """After /memory delete and a new bank of the same name, nothing routes to the old DB."""
    cfg = two_agents(tmp_path / "s", sync_listen="127.0.0.1:0")
    async with chazbot.open(tmp_path / "s", cfg) as peer:
        await peer.sync.start()
        await peer.command("/memory new notes")
        old = await peer.registry.get("bank", "notes")
        assert old is not None
        assert (await peer.command("/memory grant notes alpha write")).ok
        assert (await peer.command("/memory grant notes beta read")).ok
        assert (await peer.command("/memory attach notes", agent="alpha", session="r1")).ok
        assert (await peer.command("/memory attach notes", agent="beta", session="r2")).ok
        assert (await peer.command("/memory share notes")).ok
        assert (await peer.command("/memory delete notes")).ok
        alpha, beta = peer.agent("alpha"), peer.agent("beta")
        assert "notes" not in await alpha.memory.refs()
        assert "notes" not in await beta.memory.refs()
        for name in ("r1", "r2"):
            assert await (await peer.session(name)).attachments() == {}
        assert old.db not in await peer.sharing.shared()
        # the name is free again, and only the new bank is reached through it
        assert (await peer.command("/memory new notes")).ok
        assert (await peer.command("/memory grant notes alpha write")).ok
        new = await peer.registry.get("bank", "notes")
        assert new is not None and new.db != old.db
        await alpha.remember("k", "goes to the new bank", bank="notes")
        assert await peer.memory.recall(old.db, "") == []
        assert [r.row.key for r in await peer.memory.recall(new.db, "")] == ["k"]
        with pytest.raises(Exception, match="no bank named"):
            await beta.recall("", bank="notes")


async def test_concurrent_creations_one_wins(peer: Peer) -> None:
    import asyncio

    replies = await asyncio.gather(*(peer.command(f"/memory new {n}") for n in ("Notes", "notes")))
    assert sorted(r.ok for r in replies) == [False, True], [r.text for r in replies]
    lost = next(r for r in replies if not r.ok)
    assert "exists already" in lost.text and "sqlite" not in lost.text.lower()
    assert [b.name for b in await peer.registry.all("bank")] in (["Notes"], ["notes"])
    banks = await peer.ledger.local(
        "SELECT count(*) FROM fields WHERE store = 'meta' AND field = 'kind' AND value = '\"bank\"'"
    )
    assert banks[0][0] == 1  # no orphan bank database
    sessions = await asyncio.gather(*(peer.session("room") for _ in range(5)))
    assert len({s.db for s in sessions}) == 1
    made = await peer.ledger.local(
        "SELECT count(*) FROM fields WHERE store = 'meta' AND field = 'kind' "
        "AND value = '\"session\"'"
    )
    assert made[0][0] == len(await peer.registry.all("session"))


async def test_refs_accept_db_ids(peer: Peer) -> None:
    await peer.command("/memory new notes")
    await peer.command("/memory grant notes alpha write")
    notes = await peer.registry.get("bank", "notes")
    assert notes is not None
    db = notes.db
    alpha = peer.agent("alpha")
    await alpha.remember("k", "by id", bank=db)
    assert [h.key for h in await alpha.recall("", bank=db)] == ["k"]
    assert (await peer.command(f"/memory attach {db}", agent="alpha", session="s")).ok
    assert list(await (await peer.session("s")).attachments()) == ["notes"]
    assert (await peer.command(f"/memory detach {db}", agent="alpha", session="s")).ok
    assert (await peer.command(f"/memory forget k {db}", agent="alpha")).ok
    from chazbot.memory.tools import run_tool

    ok, text = await run_tool(
        alpha.memory, ["remember"], "remember", {"key": "t", "value": "v", "bank": db}
    )
    assert ok, text
    r = await peer.command(f"/memory search {db}", agent="alpha")
    assert r.ok and "[t]" in r.text, r.text


async def test_default_banks_that_cannot_apply_warn_and_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A default bank this peer holds only read on logs one warning; start and reload go on."""
    from chazbot.ledger import KeyPair, Permission

    cfg = Config(state_dir=tmp_path / "s", agents=[AgentConfig(name="ava")])
    async with chazbot.open(tmp_path / "s", cfg) as peer:
        owner = KeyPair.generate()
        db = await peer.ledger.create_db(
            owner, {"kind": "bank", "name": "theirs"}, [(peer.key.public, Permission.parse("read"))]
        )
        await peer.registry.add("bank", "theirs", db, {"imported": True})
        shared = await peer.ledger.create_db(
            owner,
            {"kind": "bank", "name": "shared"},
            [(peer.key.public, Permission.parse("write", 10))],
        )
        await peer.registry.add("bank", "shared", shared, {"imported": True})
    cfg = Config(
        state_dir=tmp_path / "s",
        agents=[AgentConfig(name="ava", default_memory_banks=["theirs", "mine", "shared"])],
    )
    caplog.set_level("WARNING")
    async with chazbot.open(tmp_path / "s", cfg) as peer:
        warned = [r for r in caplog.records if "theirs" in r.getMessage()]
        assert len(warned) == 1 and warned[0].levelname == "WARNING"
        assert "\n" not in warned[0].getMessage()
        assert "mine" in await peer.agent("ava").memory.refs()  # the others still apply
        # a bank this peer holds write (not admin) on is applied by delegation
        ava = peer.agent("ava")
        assert not [r for r in caplog.records if "shared" in r.getMessage()]
        await ava.remember("k", "through the peer key", bank="shared")
        [row] = await peer.ledger.rows(shared, "memory")
        assert row.author == peer.key.public and row.data["agent"] == "ava"
        caplog.clear()
        await peer.hosting.load_agents()  # a reload
        assert len([r for r in caplog.records if "theirs" in r.getMessage()]) == 1

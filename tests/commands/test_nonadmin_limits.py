"""What a non-admin can do to everyone (issue 22, item 9; SPEC §6), through peer.command on a
real SQLite state: bank creation is bounded per person and in total, agent-wide config changes
need an admin, and a non-admin's ``list`` shows only what the room's agent can read."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

import chazbot
from chazbot.agent.recall import recall_settings
from chazbot.config import AgentConfig, Config
from chazbot.memory import banks
from chazbot.memory.banks import BankLimits
from chazbot.peer import DEFAULT_TUNING, Peer

MALLORY = "@mallory:example.org"
ALICE = "@alice:example.org"


@pytest.fixture
async def peer(tmp_path: Path) -> AsyncIterator[Peer]:
    state = tmp_path / "state"
    config = Config(state_dir=state, agents=[AgentConfig(name="alpha"), AgentConfig(name="beta")])
    async with chazbot.open(state, config) as p:
        yield p


async def new_bank(peer: Peer, name: str, sender: str, is_admin: bool = False) -> bool:
    reply = await peer.command(f"/memory new {name}", sender=sender, is_admin=is_admin)
    return reply.ok


async def test_bank_creation_is_bounded_per_person(peer: Peer) -> None:
    """Found: a non-admin created 300 banks in 1.5 s. Now one person's bound holds, with a
    one-line reason, and the next person still may create theirs."""
    per = banks.BANKS_PER_PERSON
    made = [await new_bank(peer, f"m{i}", MALLORY) for i in range(per + 3)]
    assert made == [True] * per + [False] * 3
    refused = await peer.command(f"/memory new m{per + 9}", sender=MALLORY, is_admin=False)
    assert not refused.ok and "\n" not in refused.text
    assert f"{per} banks" in refused.text and "admin" in refused.text, refused.text
    assert len(await peer.registry.all("bank")) == per  # nothing half-made
    assert await new_bank(peer, "alice-notes", ALICE)
    # an admin is not bounded per person
    assert await new_bank(peer, "ops", MALLORY, is_admin=True)


async def test_bank_creation_bound_holds_against_a_burst(peer: Peer) -> None:
    """Concurrent creations by one person cannot slip past the bound between check and
    create."""
    per = banks.BANKS_PER_PERSON
    made = await asyncio.gather(*(new_bank(peer, f"b{i}", MALLORY) for i in range(per * 3)))
    assert sum(made) == per
    assert len(await peer.registry.all("bank")) == per


@pytest.mark.parametrize("total", [3, 5])
async def test_bank_creation_is_bounded_in_total(tmp_path: Path, total: int) -> None:
    """Many people (or one with many accounts) meet the peer's total bound; admins do not.
    The bound is passed in as the product passes it (``PeerTuning.banks``)."""
    tuning = replace(DEFAULT_TUNING, banks=BankLimits(total=total))
    async with chazbot.open(tmp_path / "state", tuning=tuning) as peer:
        made = [await new_bank(peer, f"t{i}", f"@u{i}:example.org") for i in range(total + 2)]
        assert made == [True] * total + [False] * 2
        refused = await peer.command("/memory new t9", sender="@u9:example.org", is_admin=False)
        assert not refused.ok and f"{total} banks" in refused.text and "\n" not in refused.text
        assert await new_bank(peer, "admins-bank", "@admin:example.org", is_admin=True)
        assert len(await peer.registry.all("bank")) == total + 1


async def test_bank_count_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    per = banks.BANKS_PER_PERSON
    async with chazbot.open(state) as p:
        assert all([await new_bank(p, f"r{i}", MALLORY) for i in range(per)])
    async with chazbot.open(state) as p:
        assert not await new_bank(p, "one-more", MALLORY)
        # deleting a bank (admins) gives its creator room again
        assert (await p.command("/memory delete r0")).ok
        assert await new_bank(p, "one-more", MALLORY)


async def test_agent_wide_config_changes_need_an_admin(peer: Peer) -> None:
    """Found: a non-admin's `/memory config set auto_recall_enabled false` turned auto-recall
    off for the agent in every room. Now set and reset need an admin; show does not."""
    alpha = peer.agent("alpha")
    for line in (
        "/memory config set auto_recall_enabled false",
        "/memory config set max_entries 1",
        "/memory config set min_similarity 0.9",
        "/memory config reset",
        "/memory config reset max_entries",
    ):
        r = await peer.command(line, agent="alpha", sender=MALLORY, is_admin=False)
        assert not r.ok and "admin" in r.text and "\n" not in r.text, (line, r.text)
    settings = await recall_settings(peer.ledger, alpha.db)
    assert settings.enabled and settings.max_entries == 3 and settings.min_similarity is None
    shown = await peer.command("/memory config", agent="alpha", sender=MALLORY, is_admin=False)
    assert shown.ok and "auto_recall_enabled = true" in shown.text
    r = await peer.command("/memory config set max_entries 4", agent="alpha", is_admin=True)
    assert r.ok, r.text
    assert (await recall_settings(peer.ledger, alpha.db)).max_entries == 4


async def test_non_admin_list_shows_what_the_rooms_agent_can_read(peer: Peer) -> None:
    """Found: `/memory list` showed every bank name to anyone. A non-admin now sees the banks
    the room's agent can read; an admin still sees every bank on the peer."""
    for name in ("secret-hr", "alpha-notes", "beta-only"):
        assert (await peer.command(f"/memory new {name}")).ok
    assert (await peer.command("/memory grant alpha-notes alpha read")).ok
    assert (await peer.command("/memory grant beta-only beta write")).ok
    r = await peer.command("/memory list", agent="alpha", sender=MALLORY, is_admin=False)
    assert r.ok and "alpha-notes" in r.text, r.text
    assert "secret-hr" not in r.text and "beta-only" not in r.text, r.text
    r = await peer.command("/memory list", agent="beta", sender=MALLORY, is_admin=False)
    assert r.ok and "beta-only" in r.text and "alpha-notes" not in r.text, r.text
    r = await peer.command("/memory list", agent="alpha", is_admin=True)
    assert all(n in r.text for n in ("secret-hr", "alpha-notes", "beta-only")), r.text
    # nothing readable: says so, and names no bank
    assert (await peer.command("/memory revoke alpha-notes alpha")).ok
    r = await peer.command("/memory list", agent="alpha", sender=MALLORY, is_admin=False)
    assert r.ok and r.text.startswith("alpha can read no bank here"), r.text
    assert "alpha-notes" not in r.text and "secret-hr" not in r.text, r.text

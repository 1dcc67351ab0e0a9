"""People and agents (SPEC §6): a non-admin reaches only the room's current agent's own memory
and the banks that agent can read; other databases, and switching the room's agent, need an
admin; the config can restrict which agents a room may use."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import chazbot
from chazbot.config import AgentConfig, Config, MatrixConfig, parse_config
from chazbot.errors import ConfigError
from chazbot.peer import Peer

ROOM = "matrix:!public:example.org"


def config(path: Path, **matrix: Any) -> Config:
    return Config(
        state_dir=path,
        agents=[AgentConfig(name="public"), AgentConfig(name="hr")],
        matrix=MatrixConfig(
            homeserver_url="http://127.0.0.1:1",
            user_id="@bot:example.org",
            **matrix,
        ),
    )


@pytest.fixture
async def peer(tmp_path: Path) -> AsyncIterator[Peer]:
    async with chazbot.open(tmp_path / "s", config(tmp_path / "s")) as p:
        await p.agent("hr").remember("salary.bob", "Bob earns 90k")
        await p.agent("public").remember("opening.hours", "9 to 5 on weekdays")
        yield p


async def member(peer: Peer, text: str, session: str = ROOM) -> tuple[bool, str]:
    r = await peer.command(text, session=session, sender="@member:example.org", is_admin=False)
    return r.ok, r.text


async def test_the_reported_finding_is_closed(peer: Peer) -> None:
    """A non-admin in public's room read hr's private memory; now every path is refused."""
    for text in (
        "/memory stats hr",
        "/agent hr",
        "/memory forget salary.bob hr",
    ):
        ok, reply = await member(peer, text)
        assert not ok, (text, reply)
        assert "90k" not in reply
    # to a member a name or id the room's agent holds no ref to is a word of the query: the
    # answer is the one a name that nothing has gets (which banks and agents exist is not told)
    nothing = await member(peer, "/memory search nosuchbank salary")
    assert nothing == (True, "No memories found in public's own memory."), nothing
    for text in ("/memory search hr salary", f"/memory search {peer.agent('hr').db} salary"):
        assert await member(peer, text) == nothing, text
    stats = [(await member(peer, f"/memory stats {name}"))[1] for name in ("hr", "hx")]
    assert stats[0] == stats[1].replace("'hx'", "'hr'"), stats
    ok, _ = await member(peer, "/memory forget salary.bob")  # public's own memory: no such key
    assert not ok
    assert [h.key for h in await peer.agent("hr").recall("salary")] == ["salary.bob"]
    ok, reply = await member(peer, "/agents")
    assert ok and "- public (this session)" in reply


async def test_a_member_reads_the_rooms_agent_and_its_banks(peer: Peer) -> None:
    ok, reply = await member(peer, "/memory search self hours")
    assert ok and "9 to 5" in reply
    assert (await member(peer, "/memory stats"))[0]
    assert (await member(peer, "/agent"))[0]  # info on the room's own agent
    assert (await member(peer, "/agent public"))[0]  # no switch: allowed
    await peer.command("/memory new handbook")
    await peer.command("/memory new payroll")
    await peer.command("/memory grant handbook public read")
    await peer.agent("hr").remember("x", "y")
    ok, reply = await member(peer, "/memory search handbook")
    assert ok, reply
    assert (await member(peer, "/memory stats handbook"))[0]
    ok, reply = await member(peer, "/memory search payroll")  # a word, as any unheld name
    assert ok and reply == "No memories found in public's own memory.", reply
    ok, reply = await member(peer, "/memory stats payroll")
    assert not ok and "admin" in reply
    # an admin may browse anything, and switch the room's agent
    r = await peer.command("/memory search hr salary", session=ROOM)
    assert r.ok and "90k" in r.text
    assert (await peer.command("/agent hr", session=ROOM)).ok
    ok, reply = await member(peer, "/memory search self salary")
    assert ok and "90k" in reply  # the room is hr's now: its members read hr's memory


async def test_member_forget_only_in_the_rooms_agent(peer: Peer) -> None:
    ok, reply = await member(peer, "/memory forget opening.hours")
    assert ok, reply
    assert await peer.agent("public").recall("hours") == []


async def test_config_restricts_the_agents_of_a_room(tmp_path: Path) -> None:
    cfg = config(tmp_path / "s", room_agents={"!hr-*:example.org": ["hr"], "*": ["public"]})
    async with chazbot.open(tmp_path / "s", cfg) as peer:
        hr_room = "matrix:!hr-team:example.org"
        r = await peer.command("/agents", session=hr_room)
        assert "- hr (this session)" in r.text and "public" not in r.text
        # the default agent of a room is the first it may use
        r = await peer.command("/agent public", session=hr_room)  # even an admin
        assert not r.ok and "may use: hr" in r.text
        r = await peer.command("/agent hr", session=ROOM)
        assert not r.ok and "may use: public" in r.text
        # a command line outside Matrix is unrestricted
        assert (await peer.command("/agent hr", session="cli")).ok


def test_room_agents_needs_a_room_glob_and_an_agent() -> None:
    """Whether the agents exist is checked where agents made in chat are known too
    (``test_agents_from_chat.py``, at start and at each reload)."""
    data = {
        "agents": [{"name": "public"}],
        "matrix": {"homeserver_url": "http://x", "user_id": "@bot:x", "room_agents": {"*": []}},
    }
    with pytest.raises(ConfigError, match=r"room_agents: '\*' needs a room id glob and 1\+"):
        parse_config(data)


def test_room_sessions_are_named_as_the_config_expects() -> None:
    """room_agents finds a room's session by the name the Matrix transport gives it."""
    from chazbot.config import MATRIX_SESSION_PREFIX
    from chazbot.transports.matrix.rules import session_name

    assert session_name("!abc:example.org") == MATRIX_SESSION_PREFIX + "!abc:example.org"

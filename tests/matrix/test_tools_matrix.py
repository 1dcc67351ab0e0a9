"""#46 in a real Synapse with a real ``chazbot run``: a model (the stand-in) calls a tool of a
real MCP server (``tests/support/mcp_demo_server.py`` over stdio) whose policy asks, and matrix-nio
users answer the bot's prompt: approve with a ✅ reaction, deny with ❌, let it time out (the
room is told, a late answer changes nothing), and try to approve someone else's call
(refused, the call still waits for its owner or an admin)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.support.paths import SUPPORT
from tests.support.standin_llm import StandinLLM
from tests.support.synapse import ChazbotProcess, Human, Seen, User, requires_synapse
from tests.support.waits import wait_until

pytestmark = [requires_synapse, pytest.mark.timeout(300)]

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]
SERVER = str(SUPPORT / "mcp_demo_server.py")
ADD = 'call demo__add {"a": 2, "b": 3}'


async def react(human: Human, room_id: str, event_id: str, key: str) -> None:
    from nio import RoomSendResponse

    content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
    sent = await human.client.room_send(room_id, "m.reaction", content)
    assert isinstance(sent, RoomSendResponse), sent


async def prompt_after(human: Human, room_id: str, bot: str, seen_before: int) -> Seen:
    def found() -> Seen | None:
        notices = [
            s
            for s in human.messages(room_id, bot)
            if s.content.get("msgtype") == "m.notice" and "wants to run demo__add" in s.body
        ]
        return notices[seen_before] if len(notices) > seen_before else None

    prompt: Seen = await wait_until(found, 60, "the bot's prompt")
    return prompt


def event_id(seen: Seen) -> str:
    value: Any = getattr(seen.event, "event_id", "")
    return str(value)


async def test_approve_deny_time_out_and_someone_elses_answer(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM
) -> None:
    alice, bob = await humans("alice"), await humans("bob")
    top = {
        "agents": [{"name": "chaz", "capture": "off", "allowed_tools": ["demo__*"]}],
        "mcp_servers": [{"name": "demo", "command": sys.executable, "args": [SERVER]}],
        "approvals": {"timeout_s": 12},
    }
    proc, bot = await chazbot(standin_llm.url, [alice.user_id, bob.user_id], [], top=top)
    dm = await alice.create_room([bot.user_id], direct=True)
    await alice.wait_member(dm, bot.user_id)
    await wait_until(lambda: "mcp demo: running" in proc.log(), 60, "the MCP server")

    # approved by a reaction
    asked = await alice.send(dm, ADD)
    prompt = await prompt_after(alice, dm, bot.user_id, 0)
    await react(alice, dm, event_id(prompt), "✅")
    reply = (await alice.wait_reply(asked, 60))[0]
    assert reply.body.startswith("Tool said: <tool_result") and "\n5\n" in reply.body, reply.body

    # denied by a reaction
    asked = await alice.send(dm, ADD)
    prompt = await prompt_after(alice, dm, bot.user_id, 1)
    await react(alice, dm, event_id(prompt), "❌")
    reply = (await alice.wait_reply(asked, 60))[0]
    assert "demo__add was not run: denied" in reply.body, reply.body

    # unanswered: its 12 s run while the room below is made and answered (an answer in one
    # room is not taken for a call waiting in another); checked after it
    unanswered = await alice.send(dm, ADD)
    await prompt_after(alice, dm, bot.user_id, 2)

    # in a room of two people, Bob may not approve Alice's call; Alice then may
    room = await alice.create_room([bot.user_id, bob.user_id], name="family")
    await bob.wait_invite(room)
    await bob.join(room)
    await alice.wait_member(room, bot.user_id)
    await alice.wait_member(room, bob.user_id)
    asked = await alice.send(room, f"!chaz {ADD}")
    prompt = await prompt_after(alice, room, bot.user_id, 0)
    refused = await bob.ask(room, "!chaz approve", timeout=30)
    assert "only " + alice.user_id + " (who asked) or an admin" in refused.body, refused.body
    await react(bob, room, event_id(prompt), "✅")
    await wait_until(
        lambda: len([s for s in bob.messages(room, bot.user_id) if "who asked" in s.body]) >= 2,
        30,
        "the bot refusing Bob's reaction",
    )
    assert not alice.replies(asked)
    approved = await alice.ask(room, "!chaz approve", timeout=30)
    assert approved.body.startswith("Approved: demo__add"), approved.body
    reply = (await alice.wait_reply(asked, 60))[0]
    assert "\n5\n" in reply.body, reply.body

    # the unanswered call: denied when the time was up, the room told; a late answer changes
    # nothing
    reply = (await alice.wait_reply(unanswered, 60))[0]
    assert "demo__add was not run: timed out" in reply.body, reply.body
    assert any("Nobody answered within 12 s" in s.body for s in alice.messages(dm, bot.user_id))
    late = await alice.ask(dm, "!chaz approve", timeout=30)
    assert "nothing here waits for an answer" in late.body, late.body

    log = (await alice.ask(dm, "!chaz tools log", timeout=30)).body
    assert f"approved by {alice.user_id}, ok" in log, log
    assert f"denied by {alice.user_id}, not run" in log and "timed out" in log, log
    assert "Traceback" not in proc.log()


async def test_an_owners_server_is_never_used_once_a_second_reader_joins(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM
) -> None:
    from nio import RoomInviteResponse

    alice, bob = await humans("alice"), await humans("bob")
    top = {
        "agents": [{"name": "chaz", "capture": "off", "allowed_tools": ["mine__*"]}],
        "mcp_servers": [
            {"name": "mine", "command": sys.executable, "args": [SERVER], "owner": alice.user_id}
        ],
        "approvals": {"timeout_s": 60},
    }
    proc, bot = await chazbot(standin_llm.url, [alice.user_id, bob.user_id], [], top=top)
    dm = await alice.create_room([bot.user_id], direct=True)
    await alice.wait_member(dm, bot.user_id)
    await wait_until(lambda: "mcp mine: running" in proc.log(), 60, "the MCP server")

    asked = await alice.send(dm, 'call mine__echo {"text": "my calendar"}')
    prompt = await wait_until(
        lambda: next(
            (s for s in alice.messages(dm, bot.user_id) if "wants to run mine__echo" in s.body),
            None,
        ),
        60,
        "the prompt",
    )
    offered = {t["function"]["name"] for t in standin_llm.requests[-1]["tools"]}
    assert "mine__echo" in offered  # Alice alone reads her DM
    invited = await alice.client.room_invite(dm, bob.user_id)
    assert isinstance(invited, RoomInviteResponse), invited
    await bob.wait_invite(dm)
    await bob.join(dm)
    await alice.wait_member(dm, bob.user_id)
    await react(alice, dm, event_id(prompt), "✅")  # approved, but Bob reads the room now
    reply = (await alice.wait_reply(asked, 60))[0]
    assert "did not send the answer" in reply.body, reply.body  # the reply is withheld too
    log = (await alice.ask(dm, "!chaz tools log", timeout=30)).body
    assert f"approved by {alice.user_id}, error (mine__echo belongs to" in log, log

    before = len(standin_llm.requests)
    again = await alice.ask(dm, '!chaz call mine__echo {"text": "now?"}', timeout=60)
    first = standin_llm.requests[before]
    assert "mine__echo" not in {t["function"]["name"] for t in first.get("tools") or []}
    assert "belongs to @" in again.body, again.body  # a call made up anyway is refused
    assert "Traceback" not in proc.log()

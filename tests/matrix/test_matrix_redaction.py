"""A message taken back in Matrix takes its captured rows with it (SPEC §5c): a real Synapse, a
real ``chazbot run``, the stand-in LLM whose capture keeps ``my <key> is <value>`` phrases.

A redaction forgets them (while the bot runs, while it was down, while the capture of the
message is still running); an edit by its sender replaces them; an edit by anybody else
changes nothing. (Synapse refuses a relation or a redaction naming another room's event; the
bot checks it too: ``test_capture_local``.)
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from tests.support.shared_bot import SharedBot, chazbot, humans, shared_bot
from tests.support.standin_llm import (
    CAPTURE_TOOL,
    MEMORY_HEADING,
    StandinLLM,
    message_text,
    offered_tools,
)
from tests.support.synapse import ChazbotProcess, Human, User, requires_synapse
from tests.support.waits import wait_until

# one bot for the tests that need no process of their own, in the module's one event loop
pytestmark = [requires_synapse, pytest.mark.timeout(240), pytest.mark.asyncio(loop_scope="module")]
__all__ = ["chazbot", "humans", "shared_bot"]  # the module's fixtures

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]
FACTS = {"agents": [{"name": "chaz", "capture": "facts"}]}


class GatedCapture(StandinLLM):
    """The stand-in, whose capture requests wait while ``gate`` is clear."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = 0

    async def _chat(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read())  # aiohttp keeps the body for the next read
        if isinstance(body, dict) and CAPTURE_TOOL in offered_tools(body):
            self.waiting += 1
            await self.gate.wait()
        return await super()._chat(request)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def standin_llm() -> AsyncIterator[GatedCapture]:
    """The module's stand-in (its shared bot's too): counted from where each test starts."""
    async with GatedCapture() as server:
        yield server


@pytest.fixture
def llm(standin_llm: GatedCapture) -> GatedCapture:
    return standin_llm


@pytest.fixture(scope="module")
def shared_bot_top() -> dict[str, Any]:
    return FACTS


def log_from_here(proc: ChazbotProcess) -> Callable[[], str]:
    """The bot's log from now on (a shared bot's log holds the module's earlier tests)."""
    start = len(proc.log())
    return lambda: proc.log()[start:]


def handled(proc: ChazbotProcess, event_id: str) -> bool:
    path = proc.workdir / "state" / "chazbot.sqlite3"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        found = db.execute("SELECT 1 FROM matrix_handled WHERE event_id = ?", (event_id,))
        return found.fetchone() is not None


async def dm(person: Human, bot: User) -> str:
    room = await person.create_room([bot.user_id], direct=True)
    await person.wait_member(room, bot.user_id)
    return room


async def mine(person: Human, room: str) -> str:
    return (await person.ask(room, "!chaz memory mine", timeout=30)).body


async def search(person: Human, room: str, words: str) -> str:
    return (await person.ask(room, f"!chaz memory search self {words}", timeout=30)).body


async def redact(person: Human, room: str, event_id: str) -> str:
    from nio import RoomRedactResponse

    response = await person.client.room_redact(room, event_id, reason="taken back")
    assert isinstance(response, RoomRedactResponse), response
    return str(response.event_id)


def edit(original: str, body: str) -> dict[str, Any]:
    """The content of an edit (``m.replace``) of ``original`` to ``body``."""
    return {
        "body": f"* {body}",
        "m.new_content": {"msgtype": "m.text", "body": body},
        "m.relates_to": {"rel_type": "m.replace", "event_id": original},
    }


async def tell(person: Human, room: str, text: str, value: str) -> str:
    """Say ``text`` to the bot and wait until ``value`` is captured; the message's id."""
    event = await person.send(room, text)
    await person.wait_reply(event, timeout=30)

    async def kept() -> bool:
        return value in await mine(person, room)

    await wait_until(kept, 30, f"{value} captured")
    return event


async def test_a_redacted_message_is_forgotten_and_an_edit_replaces_it(
    shared_bot: SharedBot, humans: Humans, llm: GatedCapture
) -> None:
    alice = await humans("alice")
    proc, bot = shared_bot
    log = log_from_here(proc)
    room = await dm(alice, bot)

    told = await tell(alice, room, "my locker is L-4512", "L-4512")
    kept = await tell(alice, room, "my bike is a red Gazelle", "red Gazelle")
    assert "L-4512" in await search(alice, room, "locker")

    await redact(alice, room, told)
    await wait_until(lambda: "1 captured rows forgotten" in log(), 30, "the redaction")
    assert "L-4512" not in await mine(alice, room)
    assert "L-4512" not in await search(alice, room, "locker")
    asked = len(llm.requests)
    reply = await alice.ask(room, "what is in the locker?", timeout=30)
    assert "L-4512" not in reply.body
    recalled = [
        message_text(m)
        for body in llm.requests[asked:]
        for m in body["messages"]
        if message_text(m).lstrip().startswith(MEMORY_HEADING)
    ]
    assert recalled and all("L-4512" not in block for block in recalled), recalled
    # The message and the reply to it left the conversation the model is shown, too (a later
    # reply that quoted the row stays what it was).
    shown = [message_text(m) for body in llm.requests[asked:] for m in body["messages"]]
    assert shown and not any("my locker is L-4512" in text for text in shown), shown
    assert "red Gazelle" in await mine(alice, room)  # the other message's row stays

    # An edit replaces what its message gave.
    await alice.send(room, "* my bike is a blue Batavus", edit(kept, "my bike is a blue Batavus"))
    await wait_until(lambda: "was edited in" in log(), 30, "the edit")
    listed = await mine(alice, room)
    assert "blue Batavus" in listed and "red Gazelle" not in listed, listed
    # ... and a redaction of the edited message forgets the new words too.
    await redact(alice, room, kept)
    await wait_until(lambda: log().count("captured rows forgotten") == 2, 30, "redaction")
    assert "Batavus" not in await mine(alice, room)
    assert "Traceback" not in proc.log()


async def test_a_redaction_waits_for_a_running_capture_and_survives_a_restart(
    chazbot: Bots, humans: Humans, llm: GatedCapture
) -> None:
    alice = await humans("alice")
    proc, bot = await chazbot(llm.url, [alice.user_id], [], top=FACTS)
    room = await dm(alice, bot)

    # Redacted while its capture still runs: the capture finishes, then its rows go.
    waiting = llm.waiting  # the module's stand-in: counted from here
    llm.gate.clear()
    event = await alice.send(room, "my pin is P-9911")
    await alice.wait_reply(event, timeout=30)
    await wait_until(lambda: llm.waiting >= waiting + 1, 30, "the capture under way")
    redaction = await redact(alice, room, event)
    await wait_until(lambda: handled(proc, redaction), 30, "the bot to take the redaction")
    llm.gate.set()
    await wait_until(lambda: "1 captured rows forgotten" in proc.log(), 30, "the redaction")
    assert "P-9911" not in await mine(alice, room)

    # Redacted while the bot was down: the next sync brings the redaction.
    told = await tell(alice, room, "my door code is D-5150", "D-5150")
    await proc.stop()
    await redact(alice, room, told)
    await proc.start(timeout=60)
    await wait_until(
        lambda: proc.log().count("captured rows forgotten") == 2, 30, "the redaction after"
    )
    assert "D-5150" not in await mine(alice, room)
    assert "Traceback" not in proc.log()


async def test_nobody_else_takes_back_what_someone_said(
    shared_bot: SharedBot, humans: Humans
) -> None:
    alice, bob = await humans("alice"), await humans("bob")
    proc, bot = shared_bot
    log = log_from_here(proc)
    group = await alice.create_room([bot.user_id, bob.user_id], name="group")
    await bob.wait_invite(group)
    await bob.join(group)
    await alice.wait_member(group, bot.user_id)
    await alice.wait_member(group, bob.user_id)

    told = await alice.send(group, "!chaz my locker is L-7777")
    await alice.wait_reply(told, timeout=30)

    async def kept() -> bool:
        return "L-7777" in await search(alice, group, "locker")

    await wait_until(kept, 30, "the locker captured")

    # Bob edits Alice's message (Matrix lets him send it; clients ignore it): nothing changes.
    hacked = edit(told, "!chaz my locker is HACKED")
    await bob.send(group, "* !chaz my locker is HACKED", hacked)
    await wait_until(lambda: "may not take back" in log(), 30, "the edit refused")
    found = await search(alice, group, "locker")
    assert "L-7777" in found and "HACKED" not in found, found

    # The room's creator may redact others' messages (power levels): Bob's row goes.
    bobs = await bob.send(group, "!chaz my bike is B-2121")
    await bob.wait_reply(bobs, timeout=30)

    async def bikes() -> bool:
        return "B-2121" in await search(bob, group, "bike")

    await wait_until(bikes, 30, "Bob's bike captured")
    await redact(alice, group, bobs)
    await wait_until(lambda: "1 captured rows forgotten" in log(), 30, "the redaction")
    assert "B-2121" not in await search(bob, group, "bike")
    assert "L-7777" in await search(alice, group, "locker")
    assert "Traceback" not in proc.log()


async def test_a_message_redacted_before_its_turn_is_not_answered(
    shared_bot: SharedBot, humans: Humans, llm: GatedCapture
) -> None:
    alice = await humans("alice")
    proc, bot = shared_bot
    log = log_from_here(proc)
    room = await dm(alice, bot)

    llm.hang(1)  # the first turn waits; the next message waits behind it in the room's queue
    asked = len(llm.requests)
    first = await alice.send(room, "a slow question")
    await llm.wait_for_requests(asked + 1)
    secret = await alice.send(room, "my pin is P-0000")
    await wait_until(lambda: handled(proc, secret), 30, "the bot to take the message")
    redaction = await redact(alice, room, secret)
    await wait_until(lambda: handled(proc, redaction), 30, "the bot to take the redaction")
    llm.release()  # the held call fails, the client's one retry answers

    await alice.wait_reply(first, timeout=30)
    await alice.ask(room, "anything else?", timeout=30)  # served in order: the barrier
    assert alice.replies(secret) == []
    assert all("P-0000" not in json.dumps(body) for body in llm.requests)
    assert "P-0000" not in await mine(alice, room)
    assert "redacted before its turn" in log()

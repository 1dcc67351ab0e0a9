"""No queued job lost, none answered twice (SPEC §8): a real Synapse, a real ``chazbot run``
killed with SIGKILL while one job runs and four wait behind it, then started again.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from chazbot.transports.matrix.routing import Job
from chazbot.transports.matrix.state import Pending
from tests.support.standin_llm import MEMORY_HEADING, StandinLLM, message_text
from tests.support.synapse import ChazbotProcess, Human, User, requires_synapse
from tests.support.waits import wait_until

pytestmark = [requires_synapse, pytest.mark.timeout(240)]

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]
FACTS = {"agents": [{"name": "chaz", "capture": "facts"}]}


def state_file(proc: ChazbotProcess) -> Path:
    return proc.workdir / "state" / "chazbot.sqlite3"


def table(proc: ChazbotProcess, sql: str, *params: str) -> set[str]:
    """The first column of ``sql`` over the bot's state tables (``matrix/state_tables.py``)."""
    with sqlite3.connect(f"file:{state_file(proc)}?mode=ro", uri=True) as db:
        return {str(r[0]) for r in db.execute(sql, params).fetchall()}


def pending(proc: ChazbotProcess, account: str) -> set[str]:
    return table(proc, "SELECT slot FROM matrix_pending WHERE account = ?", account)


def turns_for(standin: StandinLLM, text: str) -> int:
    """How many chat turns the model was asked for ``text`` (capture requests aside)."""
    count = 0
    for body in standin.requests:
        users = [
            message_text(m)
            for m in body["messages"]
            if m.get("role") == "user" and not message_text(m).lstrip().startswith(MEMORY_HEADING)
        ]
        if users and text in users[-1]:
            count += 1
    return count


async def dm(person: Human, bot: User) -> str:
    room = await person.create_room([bot.user_id], direct=True)
    await person.wait_member(room, bot.user_id)
    return room


async def test_a_kill_loses_no_queued_job_and_answers_each_once(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM
) -> None:
    alice = await humans("alice")
    proc, bot = await chazbot(standin_llm.url, [alice.user_id], [], top=FACTS)
    room = await dm(alice, bot)

    await alice.ask(room, "my locker is L-4512", timeout=30)

    async def captured() -> bool:
        return "L-4512" in (await alice.ask(room, "!chaz memory mine", timeout=30)).body

    await wait_until(captured, 30, "the locker captured")

    # One job runs (its model call hangs), four wait behind it in the room's queue.
    standin_llm.hang(1)
    asked = len(standin_llm.requests)
    slow = await alice.send(room, "a slow question")
    await standin_llm.wait_for_requests(asked + 1)
    queued = [
        await alice.send(room, "!chaz memory mine"),
        await alice.send(room, "a second question"),
        await alice.send(room, "!chaz memory forget-mine all"),
        await alice.send(room, "!chaz memory mine"),
    ]
    events = [slow, *queued]
    await wait_until(
        lambda: set(events) <= table(proc, "SELECT event_id FROM matrix_handled"),
        30,
        "the bot to take all five events",
    )
    assert not any(alice.replies(e) for e in events)
    proc.kill()

    await proc.start(timeout=60)
    for event in events:
        await alice.wait_reply(event, timeout=60)
    barrier = await alice.ask(room, "are you back?", timeout=30)
    assert barrier.body == "You said: are you back?"

    replies = {e: [r.body for r in alice.replies(e, sender=bot.user_id)] for e in events}
    assert all(len(r) == 1 for r in replies.values()), replies
    # The running job was asked again (its first call died with the process); each queued
    # one once; the commands saw the memory as it was in their turn.
    assert turns_for(standin_llm, "a slow question") == 2
    assert turns_for(standin_llm, "a second question") == 1
    assert "L-4512" in replies[queued[0]][0]
    assert "forgot" in replies[queued[2]][0].lower(), replies[queued[2]]
    assert "L-4512" not in replies[queued[3]][0]
    assert "L-4512" not in (await alice.ask(room, "!chaz memory mine", timeout=30)).body
    await wait_until(lambda: not pending(proc, bot.user_id), 15, "pending emptied")
    assert "jobs left from the last run" in proc.log()


async def test_a_job_answered_just_before_a_crash_is_not_run_again(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM
) -> None:
    """The reply went out, the process died before the job was marked done: the next start
    finds the reply in the room and neither asks the model nor answers again."""
    alice = await humans("alice")
    proc, bot = await chazbot(standin_llm.url, [alice.user_id], [])
    room = await dm(alice, bot)
    event = await alice.send(room, "count me once")
    await alice.wait_reply(event, timeout=30)
    assert turns_for(standin_llm, "count me once") == 1
    await proc.stop()

    # What a crash between the send and the mark leaves: the job pending, started once.
    job = Job(room, event, alice.user_id, "chat", "count me once", {"body": "count me once"})
    stored = Pending(job, f"{time.time_ns():020d}:{event}", starts=1).stored()
    with sqlite3.connect(state_file(proc)) as db:
        db.execute(
            "INSERT INTO matrix_pending (account, slot, job, starts) VALUES (?, ?, ?, ?)",
            (bot.user_id, stored.slot, stored.job, stored.starts),
        )

    await proc.start(timeout=60)
    barrier = await alice.ask(room, "and now?", timeout=30)
    assert barrier.body == "You said: and now?"
    assert len(alice.replies(event, sender=bot.user_id)) == 1
    assert turns_for(standin_llm, "count me once") == 1
    assert "answered before the restart" in proc.log()
    await wait_until(lambda: not pending(proc, bot.user_id), 15, "pending emptied")

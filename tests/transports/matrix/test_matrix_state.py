"""The Matrix bot's pending jobs on a real SQLite state file (SPEC §8): committed with the sync
token, counted when started, gone when done, found again in order after a restart, kept per
account; a stored job that does not read as one is dropped, never run. The end to end crash
is ``test_matrix_crash``.
"""

from __future__ import annotations

from pathlib import Path

from chazbot.ledger import Ledger
from chazbot.transports.matrix.routing import Job
from chazbot.transports.matrix.state import MatrixState

BOT = "@bot:example.org"


def job(n: int, **content: str) -> Job:
    return Job("!room:x", f"$e{n}", "@alice:x", "chat", f"text {n}", dict(content))


async def reopened(path: Path, user: str = BOT) -> tuple[Ledger, MatrixState]:
    ledger = await Ledger.open(path)
    state = MatrixState(ledger, user)
    await state.load()
    return ledger, state


async def test_pending_jobs_survive_a_restart_in_order_until_done(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    ledger, state = await reopened(path)
    assert state.take_replay() == []
    jobs = [job(i) for i in range(5)]
    await state.commit("t1", jobs[:2], [])
    await state.commit("t2", jobs[2:], [])
    assert await state.started(jobs[0]) == 0  # never started before
    await state.done(jobs[0])
    assert await state.started(jobs[1]) == 0  # running when the process dies
    await ledger.close()

    ledger, state = await reopened(path)
    assert state.since == "t2"
    replay = state.take_replay()
    assert [p.job for p in replay] == jobs[1:]  # in order, the one done left out
    assert [p.starts for p in replay] == [1, 0, 0, 0]
    assert state.take_replay() == []  # once
    assert all(j.event_id in state.handled for j in jobs)  # a replayed sync queues none again
    assert await state.started(jobs[1]) == 1  # it had started: look for its reply first
    for j in jobs[1:]:
        await state.done(j)
    await ledger.close()

    ledger, state = await reopened(path)
    assert state.take_replay() == []
    await ledger.close()
    ledger, other = await reopened(path, "@another:example.org")  # another account's: none
    assert other.take_replay() == [] and other.since is None
    await ledger.close()


async def test_a_stored_job_that_does_not_read_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    ledger, state = await reopened(path)
    await state.commit("t1", [job(1)], [])
    bad = [
        ("1:$x", "not json", 0),
        ("2:$y", '{"room_id": "!r", "kind": "shell"}', 0),
        ("3:$z", '{"room_id": 1, "event_id": "$z", "sender": "@a:x", "kind": "chat"}', 0),
        (
            "4:$w",
            '{"room_id": "!r", "event_id": "$w", "sender": "@a:x", "kind": "chat", "rm": "-rf"}',
            0,
        ),
    ]
    for slot, text, starts in bad:
        await ledger.local(
            "INSERT INTO matrix_pending (account, slot, job, starts) VALUES (?, ?, ?, ?)",
            (BOT, slot, text, starts),
        )
    await ledger.close()

    ledger, state = await reopened(path)
    assert [p.job.event_id for p in state.take_replay()] == ["$e1"]
    left = [s for (s,) in await ledger.local("SELECT slot FROM matrix_pending")]
    assert len(left) == 1 and left[0].endswith(":$e1"), left  # the others are gone
    await ledger.close()


async def test_a_pending_redaction_withdraws_the_job_it_names(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    ledger, state = await reopened(path)
    message = job(1)
    redaction = Job("!room:x", "$r1", "@alice:x", "redaction", content={"redacts": "$e1"})
    await state.commit("t1", [message], [])
    await state.commit("t2", [redaction], [])
    assert state.redacted == {"$e1": {"@alice:x"}}
    await ledger.close()

    ledger, state = await reopened(path)  # after a restart too
    assert state.redacted == {"$e1": {"@alice:x"}}
    await state.done(message)
    assert state.redacted == {}
    await ledger.close()


async def test_an_event_seen_twice_is_one_job(tmp_path: Path) -> None:
    ledger, state = await reopened(tmp_path / "state.sqlite3")
    queued = await state.commit("t1", [job(1), job(1), job(2)], [])
    assert [p.job.event_id for p in queued] == ["$e1", "$e2"]
    assert await state.commit("t2", [job(2)], []) == []  # still pending: not again
    assert await ledger.local("SELECT count(*) FROM matrix_pending WHERE account = ?", (BOT,)) == [
        (2,)
    ]
    await ledger.close()

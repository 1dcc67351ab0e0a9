"""The Matrix transport's state and the vector queue's records in declared tables (issue 49),
not the untyped ``local_kv`` under ad-hoc prefixes: a real SQLite state file written the old
way (its ``local_kv`` rows in exactly the keys and values the code before wrote) keeps its
sync token, handled ids, pending jobs, noticed rooms, owed marks, recorded texts and text
versions; the rows are moved, not copied; other ``local_kv`` rows stay; the file verifies.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from chazbot.ledger import KeyPair, Ledger
from chazbot.ledger.backup import verify_file
from chazbot.ledger.tables import LocalTable
from chazbot.memory.rows import EMBED_TEXT_VERSION
from chazbot.memory.vector_marks import OwedMarks
from chazbot.memory.vector_tables import VECTORS
from chazbot.transports.matrix.routing import Job
from chazbot.transports.matrix.state import MatrixState
from chazbot.transports.matrix.state_tables import MATRIX_STATE
from chazbot.transports.tables import FEATURE_TABLES

BOT = "@bot:example.org:8448"  # a server name with a port: ':' inside the account
OTHER = "@other:example.org"
A, B = "sha256:" + "a" * 64, "sha256:" + "b" * 64
WRITER = KeyPair.generate()
UNRELATED = [("sync.log_id", "abc"), ("capture:source:$m1", '{"agent": "chaz"}')]


def stamp(n: int) -> str:
    return f"{time.time_ns() + n:020d}"


def job(n: int, room: str = "!room:x") -> Job:
    return Job(room, f"$e{n}:x", "@alice:x", "chat", f"text {n}\nwith 'quotes'", {"n": n})


def old_value(j: Job, starts: int) -> str:
    """A pending job as ``MatrixState`` stored it in ``local_kv`` before."""
    return json.dumps({"job": dataclasses.asdict(j), "starts": starts})


async def old_state_file(path: Path) -> dict[str, str]:
    """A state file as the code before wrote it: its ``local_kv`` rows of the Matrix state and
    the vector queue (and two of other features); returns the stamps used, by event."""
    ledger = await Ledger.open(path)
    await ledger.close()
    stamps = {f"$e{n}:x": stamp(n) for n in range(4)}
    rows = [
        (f"matrix:{BOT}:next_batch", "s72_594_tok"),
        (f"matrix:{OTHER}:next_batch", "other-token"),
        *((f"matrix:handled:{e}", s) for e, s in stamps.items()),
        (f"matrix:{BOT}:job:{stamps['$e2:x']}:$e2:x", old_value(job(2), 1)),
        (f"matrix:{BOT}:job:{stamps['$e3:x']}:$e3:x", old_value(job(3), 0)),
        (f"matrix:{OTHER}:job:{stamps['$e1:x']}:$e1:x", old_value(job(1), 0)),
        (f"matrix:{BOT}:job:{stamps['$e0:x']}:$e0:x", "not json"),  # dropped at the load
        ("matrix:undecryptable:!dark:x", "1"),
        (f"vectors-owed/{A}", json.dumps({"after": 5, "by": WRITER.public})),
        (f"vectors-owed/{B}", "damaged"),  # read as owing the whole database, as before
        (f"vectors-owed-text/{A}/row-1", "what row 1 said"),
        (f"vectors-owed-text/{A}/row-2", "and row 2\nover two lines"),
        ("vectors-text", json.dumps({"version": EMBED_TEXT_VERSION, "before": 9})),
        (f"vectors-text/{A}", str(EMBED_TEXT_VERSION)),
        *UNRELATED,
    ]
    with sqlite3.connect(path) as conn:
        conn.executemany("INSERT INTO local_kv (key, value) VALUES (?, ?)", rows)
    conn.close()
    return stamps


@pytest.mark.parametrize("tables", [(), FEATURE_TABLES], ids=["on-first-use", "at-open"])
async def test_an_old_state_dir_keeps_its_matrix_state_and_vector_queues(
    tmp_path: Path, tables: Sequence[LocalTable]
) -> None:
    path = tmp_path / "chazbot.sqlite3"
    stamps = await old_state_file(path)
    ledger = await Ledger.open(path, tables)
    try:
        state = MatrixState(ledger, BOT)
        await state.load()
        assert state.since == "s72_594_tok"
        replay = state.take_replay()
        assert [(p.job, p.starts) for p in replay] == [(job(2), 1), (job(3), 0)]  # in order
        assert list(state.handled) == list(stamps)  # oldest first
        assert state.undecryptable_noticed == {"!dark:x"}
        assert await state.started(job(2)) == 1  # the start counted before still counts
        await state.done(job(3))

        other = MatrixState(ledger, OTHER)  # each account's own token and jobs
        await other.load()
        assert other.since == "other-token"
        assert [p.job for p in other.take_replay()] == [job(1)]

        marks = OwedMarks(ledger)
        await ledger.keys.add(WRITER, "writer")
        assert await marks.load() == [A, B]
        owed_a, owed_b = marks.get(A), marks.get(B)
        assert owed_a is not None and (owed_a.after, owed_a.by) == (5, WRITER.public)
        assert owed_a.key is not None and owed_a.key.public == WRITER.public
        assert owed_b is not None and (owed_b.after, owed_b.by, owed_b.key) == (0, "", None)
        assert await marks.texts(A) == {
            "row-1": "what row 1 said",
            "row-2": "and row 2\nover two lines",
        }
        assert await marks.text_version() == 9  # recorded: not set again
        assert await marks.text_done(A) and not await marks.text_done(B)

        # moved, not copied; the other features' rows stay
        assert await ledger.local("SELECT key, value FROM local_kv ORDER BY key") == sorted(
            UNRELATED
        )
    finally:
        await ledger.close()
    checked = verify_file(path, FEATURE_TABLES)
    assert checked.ok, checked.failures

    ledger = await Ledger.open(path, tables)  # opened again: as it was left
    try:
        state = MatrixState(ledger, BOT)
        await state.load()
        assert [(p.job, p.starts) for p in state.take_replay()] == [(job(2), 2)]
        assert (await OwedMarks(ledger).load()) == [A, B]
        versions = dict(await ledger.local("SELECT name, version FROM local_tables"))
        assert versions["matrix.state"] == MATRIX_STATE.version
        assert versions["memory.vectors"] == VECTORS.version
    finally:
        await ledger.close()


async def test_a_fresh_state_keeps_the_same_through_its_tables(tmp_path: Path) -> None:
    """Written and read back through the new tables (no ``local_kv`` row of either)."""
    path = tmp_path / "chazbot.sqlite3"
    ledger = await Ledger.open(path)
    try:
        state = MatrixState(ledger, BOT)
        await state.load()
        await state.commit("t1", [job(1), job(2)], ["!dark:x"])
        await state.done(job(1))
        marks = OwedMarks(ledger)
        await marks.load()
        await marks.mark(A, WRITER)
        await marks.lower(A, 0, WRITER)
        await marks.record_texts([(A, "r1", "one")])
        await marks.set_text_done(A)
        assert await ledger.local("SELECT count(*) FROM local_kv") == [(0,)]
    finally:
        await ledger.close()
    ledger = await Ledger.open(path)
    try:
        state = MatrixState(ledger, BOT)
        await state.load()
        assert state.since == "t1" and state.undecryptable_noticed == {"!dark:x"}
        assert [p.job for p in state.take_replay()] == [job(2)]
        marks = OwedMarks(ledger)
        assert await marks.load() == [A]
        owed = marks.get(A)
        assert owed is not None and owed.after == 0
        assert await marks.texts(A) == {"r1": "one"} and await marks.text_done(A)
    finally:
        await ledger.close()

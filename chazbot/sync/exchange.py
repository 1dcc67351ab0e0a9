"""One (database, remote) pair's exchange (``replicator``'s module doc says what pull and push
do): its state (``Pair``: the cursors' row, what the remote holds past the push cursor, its
tasks and last failure) and the steps (``Exchange``: a pull pass, its batches applied and the
cursors moved, a push), each one network exchange the replicator's loops retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from chazbot.errors import BackendError
from chazbot.ledger.encoding import content_id
from chazbot.ledger.ledger import Ledger
from chazbot.ledger.replication import read_after, read_ids_after, read_known
from chazbot.sync.client import SyncClient
from chazbot.sync.protocol import MAX_BATCH_BYTES, SyncCounters, entry_db
from chazbot.sync.store import RemoteRow, Remotes
from chazbot.sync.wire import EntriesAnswer, HeadsAnswer, PushAnswer

log = logging.getLogger("chazbot.sync.replicator")
MAX_REMOTE_HAS = 200_000
HAVE_CHECK_OVER = 16  # a push of more entries first asks which ones the remote lacks


@dataclass
class Pair:
    """One (database, remote) pair being synced, with its cursors and tasks."""

    row: RemoteRow
    push_wanted: asyncio.Event = field(default_factory=asyncio.Event)
    push_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    remote_has: set[str] = field(default_factory=set)  # ids past the push cursor it holds
    push_timer: asyncio.TimerHandle | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    failing: bool = False
    last_error: str | None = None
    done_at: dict[str, float] = field(default_factory=dict)  # "pull"/"push": last success
    denied: bool = False  # the remote's last answer refused our key (403): access withdrawn

    @property
    def db(self) -> str:
        return self.row.db

    @property
    def address(self) -> str:
        return self.row.address


class Exchange:
    """The pull and push steps over ``client`` for any pair of this ledger; counts into
    ``counters`` and saves the cursors through ``remotes``."""

    def __init__(
        self,
        ledger: Ledger,
        client: SyncClient,
        remotes: Remotes,
        counters: SyncCounters,
        *,
        batch: int,
        clock: Callable[[], float],
        pull_pass_s: float,
    ) -> None:
        self.ledger = ledger
        self.client = client
        self.remotes = remotes
        self.counters = counters
        self.batch = batch
        self.clock = clock
        self.pull_pass_s = pull_pass_s

    # ---- pull -----------------------------------------------------------------------------

    async def pull(self, pair: Pair, wait: float, deadline: float | None = -1.0) -> int:
        """Fetch what the remote has and we lack; return how many entries came.

        One pass stops after ``pull_pass_s`` (``deadline``: a monotonic time, None for no
        limit, the default ``-1`` for ``pull_pass_s`` from now), so a remote that always
        has more cannot hold a pair in one pass; the next pass resumes from the cursor.
        """
        if deadline is not None and deadline < 0:
            deadline = time.monotonic() + self.pull_pass_s
        heads = await self.client.heads(pair.address, pair.db)
        pair.done_at["pull"] = self.clock()  # it answers: a long wait for entries may follow
        await self.check_log(pair, heads)
        known = await self.ledger.run(read_known, pair.db, heads.tips)
        if len(known) == len(set(heads.tips)):
            if heads.max_seq > pair.row.pulled:
                pair.row.pulled = heads.max_seq
                await self.remotes.save(pair.row)
        else:
            wait = 0.0
        batch = await self.client.entries(pair.address, pair.db, pair.row.pulled, self.batch, wait)
        # Batch k+1 is fetched while batch k is ingested; ingests run one after another,
        # so the cursor passes a batch only once it and all before it are committed.
        total = 0
        while True:
            nxt: asyncio.Task[EntriesAnswer] | None = None
            if batch.more and (deadline is None or time.monotonic() < deadline):
                nxt = asyncio.create_task(
                    self.client.entries(pair.address, pair.db, batch.next, self.batch)
                )
            try:
                total += await self.apply(pair, batch)
            except BaseException:
                if nxt is not None:
                    nxt.cancel()
                    with contextlib.suppress(BaseException):
                        await nxt
                raise
            if nxt is None:
                return total
            batch = await nxt

    async def check_log(self, pair: Pair, heads: HeadsAnswer) -> None:
        """Cursors belong to one remote log; a rebuilt remote is read (and fed) afresh."""
        row = pair.row
        if not row.log:
            row.log = heads.log
            await self.remotes.save(row)
        elif row.log != heads.log or heads.max_seq < row.pulled:
            log.warning(
                "remote %s was rebuilt; syncing %s with it from the start",
                pair.address,
                pair.db[:19],
            )
            row.log, row.pulled, row.pushed = heads.log, 0, 0
            pair.remote_has.clear()
            await self.remotes.save(row)

    async def apply(self, pair: Pair, batch: EntriesAnswer) -> int:
        """Ingest one batch, then move the cursors; return how many entries came."""
        if not batch.entries:
            return 0
        if batch.log != pair.row.log:
            raise BackendError(f"peer {pair.address} changed its log during a pull")
        # Entries at or below the pull cursor are held already (the cursor may have moved
        # past them since this batch was asked for, e.g. by a push that taught us the tips).
        fresh = [data for seq, data in batch.entries if seq > pair.row.pulled]
        ours = [data for data in fresh if entry_db(data) == pair.db]
        foreign = len(fresh) - len(ours)
        received = {content_id(data) for data in ours}
        # Marked before the ingest commits, so a push running meanwhile does not send
        # them back to the remote they came from.
        if len(pair.remote_has) + len(received) <= MAX_REMOTE_HAS:
            pair.remote_has |= received
        result = await self.ledger.ingest(ours)
        pair.row.pulled = max(pair.row.pulled, batch.next)
        await self.skip_received(pair, received)
        await self.remotes.save(pair.row)
        refused = len(result.rejected) + foreign
        self.counters.received += len(result.accepted)
        self.counters.duplicates += result.duplicates
        self.counters.refused += refused
        if foreign:
            log.warning("peer %s sent %d entries of another database", pair.address, foreign)
        for eid, reason in result.rejected[:5]:
            log.warning("refused entry %s from %s: %s", eid[:19], pair.address, reason)
        return len(batch.entries)

    async def skip_received(self, pair: Pair, received: set[str]) -> None:
        """Move the push cursor past entries the remote sent us (it holds them)."""
        start = pair.row.pushed
        rows = await self.ledger.run(read_ids_after, pair.db, start, len(received) + 1)
        end = start
        for seq, eid in rows:
            if eid not in received:
                break
            end = seq
            pair.remote_has.discard(eid)
        pair.row.pushed = max(pair.row.pushed, end)

    # ---- push -----------------------------------------------------------------------------

    async def push(self, pair: Pair) -> int:
        """Send our entries after the push cursor; return how many the remote accepted."""
        sent = 0
        async with pair.push_lock:
            while True:
                rows, more = await self.ledger.run(
                    read_after, pair.db, pair.row.pushed, self.batch, MAX_BATCH_BYTES
                )
                if not rows:
                    return sent
                ids = [eid for _, eid, _ in rows]
                todo = [(eid, data) for _, eid, data in rows if eid not in pair.remote_has]
                if len(todo) > HAVE_CHECK_OVER:  # worth a round trip to send only what it lacks
                    lacking = await self.client.missing(pair.address, pair.db, [e for e, _ in todo])
                    todo = [(eid, data) for eid, data in todo if eid in lacking]
                send = [data for _, data in todo]
                if send:
                    result = await self.client.push(pair.address, pair.db, send)
                    sent += result.accepted
                    await self.note_push(pair, result)
                pair.remote_has.difference_update(ids)
                pair.row.pushed = max(pair.row.pushed, rows[-1][0])
                await self.remotes.save(pair.row)
                if not more:
                    return sent

    async def note_push(self, pair: Pair, result: PushAnswer) -> None:
        self.counters.sent += result.accepted
        self.counters.duplicates += result.duplicates
        self.counters.refused += result.refused
        for eid, reason in result.rejected[:5]:
            log.warning("peer %s refused entry %s: %s", pair.address, eid[:19], reason)
        # If we know every tip the remote has now, we hold everything up to its max seq.
        if result.log == pair.row.log and result.max_seq > pair.row.pulled:
            known = await self.ledger.run(read_known, pair.db, result.tips)
            if len(known) == len(set(result.tips)):
                pair.row.pulled = result.max_seq


__all__ = ["HAVE_CHECK_OVER", "MAX_REMOTE_HAS", "Exchange", "Pair"]

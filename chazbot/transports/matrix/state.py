"""What the bot remembers between runs, in its own peer-local tables (``state_tables``).

Never twice, never lost (SPEC §8): after each sync, one transaction commits the sync token,
the ids of the events it brought (so paging back and a replayed sync never queue one twice)
and a **pending job** per event to answer. A job leaves the pending table only when it is
done (answered, or failed for good); each start is counted in it first. After a crash (or a
stop that cut a job short) the pending jobs are queued again, in order, before the first new
sync's: a job never started simply runs; one that had started is answered only when the room
holds no reply to it yet (``bot``), and replies carry a transaction id derived from the
event, so a send repeated after a crash is deduplicated by the homeserver. A job that was
started ``MAX_STARTS`` times without finishing (it takes the process down) is dropped with a
log line. The newest ``HANDLED_KEEP`` handled ids are kept (older ones are pruned now and
then), and the rooms already told that a message could not be decrypted.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections import OrderedDict

from chazbot.ledger.ledger import Ledger
from chazbot.transports.matrix.routing import Job
from chazbot.transports.matrix.state_tables import MatrixRecords, StoredJob

log = logging.getLogger(__name__)

HANDLED_KEEP = 5000
PRUNE_EVERY = 1000
MAX_STARTS = 3
"""A pending job started this many times without finishing is dropped (a poison event)."""
_JOB_KINDS = frozenset(
    {"command", "chat", "undecryptable", "redaction", "edit", "voice", "picture"}
)


@dataclasses.dataclass
class Pending:
    """A job in the pending table: its slot there and how often it was started."""

    job: Job
    slot: str
    starts: int = 0

    def stored(self) -> StoredJob:
        return StoredJob(self.slot, json.dumps(dataclasses.asdict(self.job)), self.starts)


def _pending_of(stored: StoredJob) -> Pending | None:
    """A stored pending job, or None when it does not read as one (logged, then dropped)."""
    try:
        raw, starts, slot = json.loads(stored.job), stored.starts, stored.slot
        fields = {f.name for f in dataclasses.fields(Job)}
        if not isinstance(raw, dict) or set(raw) - fields or raw.get("kind") not in _JOB_KINDS:
            return None
        job = Job(**raw)
        strings = (job.room_id, job.event_id, job.sender, job.text)
        if not all(isinstance(s, str) for s in strings) or not isinstance(job.content, dict):
            return None
        heard = job.heard_by
        if heard is not None and not (
            isinstance(heard, list) and all(isinstance(u, str) for u in heard)
        ):
            return None
        if not isinstance(starts, int) or isinstance(starts, bool):
            return None
        return Pending(job, slot, starts)
    except (ValueError, KeyError, TypeError):
        return None


class MatrixState:
    """The sync token, the handled event ids, the pending jobs and the rooms noticed as
    undecryptable."""

    def __init__(self, ledger: Ledger, user_id: str) -> None:
        self._records = MatrixRecords(ledger, user_id)  # another account's are not replayed
        self.since: str | None = None
        self.handled: OrderedDict[str, None] = OrderedDict()
        self.undecryptable_noticed: set[str] = set()
        self.replay: list[Pending] = []
        """Pending jobs found at ``load``, oldest first: queued again before new ones."""
        self._pending: dict[str, Pending] = {}  # event id -> its pending job
        self.redacted: dict[str, set[str]] = {}
        """Events a pending redaction names -> who redacted them: a job for one of them is
        not answered (when one of them may redact it)."""
        self._persisted_token: str | None = None
        self._writes_since_prune = 0

    async def load(self) -> None:
        loaded = await self._records.load(HANDLED_KEEP)
        self.since = loaded.token
        self._persisted_token = self.since
        for event_id in loaded.handled:
            self.handled[event_id] = None
        self.undecryptable_noticed = loaded.undecryptable
        self.replay = []
        for stored in loaded.pending:
            pending = _pending_of(stored)
            if pending is None:
                log.warning(
                    "matrix: a pending job that does not read as one, dropped: %s", stored.slot
                )
                await self._records.drop(stored.slot)
                continue
            self._pending[pending.job.event_id] = pending
            self.handled[pending.job.event_id] = None
            self.replay.append(pending)
            self._note_redaction(pending.job)
        if self.replay:
            log.info("matrix: %d jobs left from the last run, answering them", len(self.replay))

    def take_replay(self) -> list[Pending]:
        """The jobs left from the last run (once)."""
        found, self.replay = self.replay, []
        return found

    async def commit(
        self, next_batch: str, jobs: list[Job], undecryptable_rooms: list[str]
    ) -> list[Pending]:
        """One commit: the new sync token, the events it brought and their pending jobs
        (before any starts), the rooms told about an undecryptable message. Returns the jobs
        to queue (each event once)."""
        unique: dict[str, Job] = {}
        for job in jobs:  # an event seen twice (a page back overlapping) is one job
            if job.event_id not in self._pending:
                unique.setdefault(job.event_id, job)
        jobs = list(unique.values())
        if not jobs and next_batch == self._persisted_token:
            self.since = next_batch
            return []
        base = time.time_ns()
        stamps = [f"{base + i:020d}" for i in range(len(jobs))]
        pending = [
            Pending(job, f"{stamp}:{job.event_id}") for job, stamp in zip(jobs, stamps, strict=True)
        ]
        handled = [(job.event_id, stamp) for job, stamp in zip(jobs, stamps, strict=True)]
        await self._records.commit(
            next_batch, handled, [p.stored() for p in pending], undecryptable_rooms
        )
        self._persisted_token = self.since = next_batch
        for p in pending:
            self.handled[p.job.event_id] = None
            self._pending[p.job.event_id] = p
            self._note_redaction(p.job)
        while len(self.handled) > HANDLED_KEEP:
            self.handled.popitem(last=False)
        self._writes_since_prune += len(jobs)
        if self._writes_since_prune >= PRUNE_EVERY:
            self._writes_since_prune = 0
            await self._records.prune_handled(HANDLED_KEEP)
        return pending

    def _note_redaction(self, job: Job) -> None:
        target = job.content.get("redacts") if job.kind == "redaction" else None
        if isinstance(target, str) and target in self._pending:
            self.redacted.setdefault(target, set()).add(job.sender)

    async def started(self, job: Job) -> int:
        """Count a start of ``job`` (stored before it runs); how often it had started before
        (0: never, so it cannot have been answered)."""
        pending = self._pending.get(job.event_id)
        if pending is None:
            return 0
        before = pending.starts
        pending.starts += 1
        await self._records.started(pending.slot, pending.starts)
        return before

    async def done(self, job: Job) -> None:
        """``job`` is finished (answered or failed for good): it is not replayed."""
        pending = self._pending.pop(job.event_id, None)
        self.redacted.pop(job.event_id, None)
        if pending is not None:
            await self._records.drop(pending.slot)


__all__ = ["HANDLED_KEEP", "MAX_STARTS", "MatrixState", "Pending"]

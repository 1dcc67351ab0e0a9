"""The replicator: keeps imported and shared databases in step with their remotes over HTTP.

A ``Replicator`` keeps every tracked (database, remote address) pair in step, exchanging
only what each side lacks:

- **pull**: ask the remote's heads; if every remote tip is known here, the remote has
  nothing we lack (every entry is an ancestor of a tip, and an entry is stored only after
  its parents), so the pull cursor jumps to the remote's highest seq. Otherwise fetch the
  remote's entries after the cursor in batches (batch k+1 is fetched while batch k is
  ingested), and move the cursor past a batch only once its ingest has committed. An
  idle pull is a long poll (``watch`` seconds), so remote writes arrive at once; idle
  polls are at most every ``pull_interval``.
- **push**: our entries after the push cursor, in batches, skipping those that came from
  that remote; a batch of more than a few entries first asks the remote which it lacks
  (``have``), so after a restart nothing it holds is sent again. A commit to a tracked
  database schedules a push after ``push_debounce``.
- entries we pulled move the push cursor past them when nothing of ours is in between,
  so what came from a remote is not sent back to it.
- every exchange is retried with exponential backoff (tenacity) after a failure; a remote
  that is down delays only its own pair and never blocks local writes.

Cursors live in the peer-local ``sync_remotes`` table and survive restarts; a restart
resumes from them (at worst the batch in flight is fetched again; duplicates are
ignored).

The steps are ``exchange.Exchange``'s (``pull``, ``push``) over each pair's state
(``exchange.Pair``); this module keeps the pairs, their loops and retries, and imports.

Owner side: ``SyncServer`` serves, ``Serving`` holds what is shared and the access requests
(``/sharing requests|approve|reject``). Importer side: ``Replicator.import_db(ticket, perm)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from aiohttp.abc import AbstractResolver
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    wait_exponential,
    wait_random,
)

from chazbot.errors import BackendError, ChazError, IntegrityError, PermissionDenied
from chazbot.ledger.keys import KeyPair
from chazbot.ledger.ledger import Ledger
from chazbot.ledger.records import Applied
from chazbot.sync.client import SyncClient
from chazbot.sync.exchange import Exchange, Pair
from chazbot.sync.protocol import MAX_BATCH_ENTRIES, SyncCounters
from chazbot.sync.reach import AddressRefused
from chazbot.sync.store import AccessDecision, RemoteRow, Remotes, check_db_id, parse_permission
from chazbot.sync.tickets import Ticket, check_address, parse_ticket

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class ImportResult:
    """What ``import_db`` did: ``done`` (the database is here and synced), ``pending``
    (the owner must approve ``request_id``; call again after) or ``rejected``."""

    status: str
    db: str
    request_id: int | None = None
    address: str | None = None


@dataclass(frozen=True)
class PairStatus:
    """How one (database, remote) pair is doing, for ``/sharing`` and metrics."""

    db: str
    address: str
    pulled: int
    pushed: int
    failing: bool
    last_error: str | None
    last_pull: float | None = None
    """When the remote last answered a pull (Unix time; None: not since the start)."""
    last_push: float | None = None
    """When a push last succeeded (the same)."""


class Replicator:
    """Keeps this peer's tracked databases in step with their remotes (see the module doc).

    ``key`` is this peer's key: it signs every request, and it is the key an import asks
    the owner to authorise. The last four settings are the client's (``SyncClient``).
    """

    def __init__(
        self,
        ledger: Ledger,
        key: KeyPair,
        *,
        pull_interval: float = 10.0,
        watch: float = 20.0,
        push_debounce: float = 0.05,
        batch: int = MAX_BATCH_ENTRIES,
        retry_initial: float = 0.5,
        retry_max: float = 30.0,
        timeout: float = 30.0,
        import_timeout: float = 600.0,
        pull_pass_s: float = 60.0,
        clock: Callable[[], float] = time.time,
        ssl_context: ssl.SSLContext | None = None,
        allow_plain_http: bool = False,
        allow_private_peers: bool = False,
        resolver: AbstractResolver | None = None,
    ) -> None:
        self.ledger = ledger
        self.import_timeout = import_timeout
        self.key = key
        self.pull_interval = pull_interval
        self.watch = watch
        self.push_debounce = push_debounce
        self.batch = max(1, min(batch, MAX_BATCH_ENTRIES))
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.clock = clock
        self.client = SyncClient(
            key,
            timeout=timeout,
            clock=clock,
            ssl_context=ssl_context,
            allow_plain_http=allow_plain_http,
            allow_private_peers=allow_private_peers,
            resolver=resolver,
        )
        self.remotes = Remotes(ledger)
        self.counters = SyncCounters()
        self.exchange = Exchange(
            ledger,
            self.client,
            self.remotes,
            self.counters,
            batch=self.batch,
            clock=clock,
            pull_pass_s=pull_pass_s,
        )
        self._pairs: dict[tuple[str, str], Pair] = {}
        self._started = False
        self._closed = False
        ledger.add_listener(self._on_commit)

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the tracked pairs and start syncing them (pushing whatever is pending)."""
        if self._started:
            return
        self._started = True
        for row in await self.remotes.list():
            self._run_pair(self._pair(row))

    async def close(self) -> None:
        """Stop every sync task and close the HTTP client (cursors are already saved)."""
        self._closed = True
        tasks = []
        for pair in self._pairs.values():
            if pair.push_timer is not None:
                pair.push_timer.cancel()
            tasks += pair.tasks
            for task in pair.tasks:
                task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.ledger.remove_listener(self._on_commit)
        await self.client.close()

    # ---- what is tracked --------------------------------------------------------------------

    async def tracked(self, db: str | None = None) -> list[RemoteRow]:
        """The (database, address) pairs synced, with their cursors."""
        return await self.remotes.list(db)

    def status(self) -> list[PairStatus]:
        """Every pair this replicator syncs, with its cursors and its last failure."""
        return [
            PairStatus(
                p.db,
                p.address,
                p.row.pulled,
                p.row.pushed,
                p.failing,
                p.last_error,
                p.done_at.get("pull"),
                p.done_at.get("push"),
            )
            for p in self._pairs.values()
        ]

    def withdrawn(self, db: str) -> str | None:
        """Why this peer should stop writing to ``db``: a remote that serves it now refuses
        our key (say, its owner revoked it), or None. A refused peer never receives the
        revocation itself, so this is how it learns; it clears once the remote answers."""
        for pair in self._pairs.values():
            if pair.db == db and pair.denied:
                return f"{pair.address} refuses this peer's key: {pair.last_error}"
        return None

    async def add_remote(self, db: str, address: str) -> None:
        """Sync ``db`` with the peer at ``address`` from now on (and after restarts)."""
        check_db_id(db)
        check_address(address)
        row = await self.remotes.add(db, address)
        pair = self._pair(row)
        if self._started and not pair.tasks:
            self._run_pair(pair)

    async def remove_remote(self, db: str, address: str | None = None) -> int:
        """Stop syncing ``db`` with ``address`` (or with every remote); return how many."""
        for key, pair in list(self._pairs.items()):
            if pair.db == db and address in (None, pair.address):
                for task in pair.tasks:
                    task.cancel()
                del self._pairs[key]
        return await self.remotes.remove(db, address)

    def _pair(self, row: RemoteRow) -> Pair:
        pair = self._pairs.get((row.db, row.address))
        if pair is None:
            pair = self._pairs[(row.db, row.address)] = Pair(row)
        return pair

    def _run_pair(self, pair: Pair) -> None:
        if self._closed:
            return
        pair.tasks = [
            asyncio.create_task(self._pull_loop(pair), name=f"sync-pull {pair.address}"),
            asyncio.create_task(self._push_loop(pair), name=f"sync-push {pair.address}"),
        ]
        pair.push_wanted.set()

    # ---- import ---------------------------------------------------------------------------

    async def import_db(self, ticket: str | Ticket, permission: str = "write") -> ImportResult:
        """Ask for ``permission`` on the ticket's database and, once granted, fetch it all.

        Tries the ticket's addresses in order until one answers. ``pending``: the owner
        must approve the request (``/sharing approve``); call again afterwards (the same
        request is found again). ``done``: every entry was pulled (the root first) and the
        remote is tracked for ongoing sync. Idempotent; an interrupted import resumes.
        """
        t = parse_ticket(ticket) if isinstance(ticket, str) else ticket
        parse_permission(permission)
        failures: list[str] = []
        refused: AddressRefused | None = None
        for address in t.addresses:
            try:  # an address this peer does not call (sync.reach, plain http): not asked
                decision: AccessDecision = await self.client.access(address, t.db, permission)
            except AddressRefused as exc:
                refused = refused or exc
                continue
            except BackendError as exc:
                failures.append(str(exc))
                continue
            if decision.status != "granted":
                log.info("import of %s from %s: %s", t.db, address, decision.status)
                return ImportResult(decision.status, t.db, decision.request, address)
            tracked = {(r.db, r.address) for r in await self.remotes.list(t.db)}
            row = await self.remotes.add(t.db, address)
            pair = self._pair(row)
            try:
                async with asyncio.timeout(self.import_timeout):
                    await self.exchange.pull(pair, 0.0, deadline=None)
                if not await self.ledger.exists(t.db):
                    raise IntegrityError(f"peer {address} did not serve database {t.db}")
            except Exception as exc:
                # A failed import leaves nothing tracked (no pair syncing a database nobody
                # registered); cancelled (the process stopping), it resumes after a restart.
                if (t.db, address) not in tracked:
                    self._pairs.pop((t.db, address), None)
                    await self.remotes.remove(t.db, address)
                if isinstance(exc, TimeoutError):
                    raise BackendError(
                        f"import from {address} did not finish within "
                        f"{self.import_timeout:.0f} s; try again later (what arrived is kept)"
                    ) from None
                raise
            if self._started and not pair.tasks:
                self._run_pair(pair)
            log.info("imported %s from %s", t.db, address)
            return ImportResult("done", t.db, None, address)
        if refused is not None and not failures:
            raise refused
        raise BackendError("no peer in the ticket answered: " + "; ".join(failures))

    async def sync_now(self, db: str | None = None) -> None:
        """One pull and one push of every pair (of ``db``), now; raises the first failure."""
        errors: list[Exception] = []
        for pair in list(self._pairs.values()):
            if db is None or pair.db == db:
                try:
                    await self.exchange.pull(pair, 0.0)
                    await self.exchange.push(pair)
                except ChazError as exc:
                    errors.append(exc)
        if errors:
            raise errors[0]

    # ---- the loops --------------------------------------------------------------------------

    def _on_commit(self, applied: Applied) -> None:
        if self._closed:
            return
        dbs = {entry.db_id for entry in applied.entries}
        for pair in self._pairs.values():
            if pair.db in dbs and pair.tasks and pair.push_timer is None:
                pair.push_timer = asyncio.get_running_loop().call_later(
                    self.push_debounce, self._fire_push, pair
                )

    def _fire_push(self, pair: Pair) -> None:
        pair.push_timer = None
        pair.push_wanted.set()

    async def _pull_loop(self, pair: Pair) -> None:
        while True:
            started = time.monotonic()
            got = await self._retrying(pair, "pull", lambda: self.exchange.pull(pair, self.watch))
            if got == 0:
                await asyncio.sleep(max(0.0, self.pull_interval - (time.monotonic() - started)))

    async def _push_loop(self, pair: Pair) -> None:
        while True:
            await pair.push_wanted.wait()
            pair.push_wanted.clear()
            await self._retrying(pair, "push", lambda: self.exchange.push(pair))

    async def _retrying(self, pair: Pair, what: str, step: Callable[[], Awaitable[T]]) -> T:
        def before_sleep(state: RetryCallState) -> None:
            self.counters.errors += 1
            exc = state.outcome.exception() if state.outcome else None
            wait = state.next_action.sleep if state.next_action else 0.0
            level = logging.DEBUG if pair.failing else logging.WARNING
            pair.failing = True
            pair.denied = isinstance(exc, PermissionDenied)
            pair.last_error = f"{what}: {exc}"
            if exc is not None and not isinstance(exc, ChazError):
                log.error(
                    "sync %s of %s with %s crashed", what, pair.db, pair.address, exc_info=exc
                )
            else:
                log.log(
                    level,
                    "sync %s of %s with %s failed (retry in %.1fs): %s",
                    what,
                    pair.db[:19],
                    pair.address,
                    wait,
                    exc,
                )

        retrying = AsyncRetrying(
            retry=retry_if_exception_type(Exception),
            wait=wait_exponential(multiplier=self.retry_initial, max=self.retry_max)
            + wait_random(0, self.retry_initial),
            before_sleep=before_sleep,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                result = await step()
        pair.done_at[what] = self.clock()
        if pair.failing:
            pair.failing = pair.denied = False
            log.info("sync %s of %s with %s works again", what, pair.db[:19], pair.address)
        return result

"""The ledger's thread: runs the ledger's steps one at a time, in arrival order, off the loop.

Each step is one function on the ``sqlite3`` connection (validate, store, commit: one atomic
step, see ``core``); callers await it from their event loop. Writes found queued one after
another run as one group: one transaction, one commit, one fsync (``LedgerCore.write_group``).

Why a thread and a queue of our own, not a one-thread ``ThreadPoolExecutor`` (issue #24 asked;
docs/architecture.md, "Why not aiosqlite", has the evidence and figures):

- Group commit must see what is queued behind a write. An executor's queue is private. A side
  list of pending writes drained by an executor job either lets a write overtake a step queued
  before it (arrival order lost) or must hold every step, which is this queue again.
- A queued step runs whatever its caller does. ``loop.run_in_executor`` cancels a job still
  queued when its awaiting task is cancelled (a cancelled turn would lose its write), and has
  no hook to run the commit's notice in the loop before the caller resumes; both need the
  hand-over below anyway.

What an executor would save is the loop in ``_serve``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from chazbot.errors import BackendError

T = TypeVar("T")
log = logging.getLogger(__name__)
MAX_GROUP = 64
"""Writes queued together that share one commit at most (group commit)."""

Then = Callable[[Any], None] | None
Group = tuple[Callable[..., Any], Callable[..., list[Any]]]
_Job = tuple[
    Callable[..., Any], tuple[Any, ...], asyncio.AbstractEventLoop, "asyncio.Future[Any]", Then
]


class Worker:
    """One thread that runs functions from a queue, one at a time, in arrival order.

    ``run`` hands a function over and awaits its result in the caller's event loop. A result
    whose loop has closed meanwhile is dropped (nobody awaits it), so the thread never touches
    a closed loop. ``then(result)`` runs in that loop when the function succeeded, before the
    caller resumes and whether or not the caller still waits (it may have been cancelled
    once the step was queued): a commit's notice must not depend on who awaits it.
    ``stop`` lets queued work finish, then ends the thread and waits for it.

    ``group``: ``(fn, fn_group)``: jobs of ``fn(target, *rest)`` found queued one after
    another run as one ``fn_group(target, [rest, ...])``, which returns each one's result or
    exception (the ledger's writes: one commit for several turns' entries).
    """

    def __init__(self, name: str, group: Group | None = None) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._stopped = False
        self._group = group
        # A daemon thread: a ledger that was never closed does not keep the process alive.
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    @property
    def stopped(self) -> bool:
        return self._stopped

    async def run(self, fn: Callable[..., T], *args: Any, then: Then = None) -> T:
        if self._stopped:
            raise BackendError("the state file is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((fn, args, loop, future, then))
        return await future

    async def stop(self) -> None:
        """Finish the queued work, end the thread and wait for it (idempotent)."""
        if not self._stopped:
            self._stopped = True
            self._jobs.put(None)
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join)

    def _serve(self) -> None:
        held: _Job | None = None  # taken from the queue while grouping; runs next
        while True:
            job = held if held is not None else self._jobs.get()
            if job is None:
                return
            jobs, held = self._take_group(job)
            if len(jobs) == 1:
                fn, args, loop, future, then = job
                try:
                    outcome: tuple[bool, Any] = (True, fn(*args))
                except BaseException as exc:  # handed to the awaiting caller, raised there
                    outcome = (False, exc)
                _hand_over(loop, future, outcome, then)
            else:
                self._run_group(jobs)
            del job, jobs  # no reference to a finished job's result outlives it

    def _take_group(self, job: _Job) -> tuple[list[_Job], _Job | None]:
        """``job`` and the jobs of the group function queued right behind it; the first
        other job taken meanwhile (it runs next, in its turn)."""
        jobs = [job]
        if self._group is None or job[0] is not self._group[0]:
            return jobs, None
        while len(jobs) < MAX_GROUP:
            try:
                more = self._jobs.get_nowait()
            except queue.Empty:
                break
            if more is None:  # stop: put back, after this group (nothing comes after it)
                self._jobs.put(None)
                break
            if more[0] is not self._group[0]:
                return jobs, more
            jobs.append(more)
        return jobs, None

    def _run_group(self, jobs: list[_Job]) -> None:
        assert self._group is not None
        target = jobs[0][1][0]
        try:
            results = self._group[1](target, [job[1][1:] for job in jobs])
            outcomes = [(not isinstance(r, Exception), r) for r in results]
        except BaseException as exc:  # the commit failed: every write in it did
            outcomes = [(False, exc)] * len(jobs)
        for (_, _, loop, future, then), outcome in zip(jobs, outcomes, strict=True):
            _hand_over(loop, future, outcome, then)


def _hand_over(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    outcome: tuple[bool, Any],
    then: Then,
) -> None:
    # A closed loop (RuntimeError) means nobody waits for this result any more.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_settle, future, *outcome, then)


def _settle(future: asyncio.Future[Any], ok: bool, value: Any, then: Then) -> None:
    if ok and then is not None:
        try:
            then(value)
        except BaseException as exc:  # the step did commit; the caller hears of the failure
            log.exception("ledger notice failed")
            ok, value = False, exc
    if future.done():  # the caller was cancelled; the step itself ran to its end
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)

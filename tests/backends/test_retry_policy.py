"""The shared retry policy (chazbot.backends.retry) on a fake clock."""

from __future__ import annotations

import logging

import pytest

from chazbot.backends.retry import Backoff, Retryable, retrying
from chazbot.errors import BackendError
from tests.support.waits import FakeSleep

log = logging.getLogger(__name__)


def test_delay_doubles_up_to_the_cap_and_honours_the_server_within_its_cap() -> None:
    policy = Backoff(attempts=9, first_s=1.0, max_s=5.0, retry_after_max_s=30.0)
    assert [int(policy.delay(n)) for n in range(1, 6)] == [1, 2, 4, 5, 5]
    assert all(policy.delay(n) < 6.0 for n in range(1, 40))  # jitter stays below one base
    assert policy.delay(3, retry_after=12.5) == 12.5
    assert policy.delay(3, retry_after=3600) == 30.0
    assert policy.delay(3, retry_after=-1) == 0.0


async def test_retryable_failures_are_retried_until_attempts_run_out() -> None:
    sleep = FakeSleep()
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise Retryable("busy", retry_after=0.25 * calls)
        return "done"

    policy = Backoff(attempts=3)
    assert await retrying(policy, "flaky", log, sleep=sleep)(flaky) == "done"
    assert calls == 3 and sleep.waits == [0.25, 0.5]

    calls = 0
    with pytest.raises(Retryable, match="busy"):
        await retrying(Backoff(attempts=2), "flaky", log, sleep=sleep)(flaky)
    assert calls == 2


async def test_other_errors_end_the_call_at_once() -> None:
    sleep = FakeSleep()
    calls = 0

    async def refused() -> None:
        nonlocal calls
        calls += 1
        raise BackendError("refused (HTTP 400)")

    with pytest.raises(BackendError, match="HTTP 400"):
        await retrying(Backoff(attempts=5), "refused", log, sleep=sleep)(refused)
    assert calls == 1 and sleep.waits == []


async def test_each_retry_is_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    attempts = 0

    async def twice() -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise Retryable("HTTP 503", retry_after=2)

    caplog.set_level(logging.WARNING)
    await retrying(Backoff(attempts=2), "request to X", log, sleep=FakeSleep())(twice)
    assert [r.getMessage() for r in caplog.records] == [
        "request to X failed (HTTP 503); retry 1 of 1 in 2.0 s"
    ]

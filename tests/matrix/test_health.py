"""``/metrics`` and ``/healthz`` of a real ``chazbot run`` process, with a real Synapse on
loopback and the stand-in LLM: the counters move after chat turns and commands, /healthz turns
unhealthy (503, matrix check false) when the homeserver stops and healthy again when it is
back, and the process log is one line per event with no secret in it.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import sqlite3
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.standin_llm import StandinLLM
from tests.support.synapse import (
    ChazbotProcess,
    Human,
    SynapseServer,
    User,
    bot_config,
    free_port,
    requires_synapse,
    wait_until,
)

pytestmark = [requires_synapse, pytest.mark.timeout(240)]

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]

LOG_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: \S"
)
"""One log record, one line: the format of ``chazbot run``'s log on stderr."""


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


async def get(url: str) -> tuple[int, str]:
    return await asyncio.to_thread(http_get, url)


def samples(text: str) -> dict[str, float]:
    """Every sample of a Prometheus text page: ``name{label="value",...}`` -> value."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}"] = float(sample.value)
    return found


def key(name: str, **labels: str) -> str:
    return f"{name}{{{','.join(f'{k}={json.dumps(v)}' for k, v in sorted(labels.items()))}}}"


async def scrape(base: str) -> dict[str, float]:
    status, body = await get(f"{base}/metrics")
    assert status == 200, body
    return samples(body)


def stand_in_llm_config(standin: StandinLLM) -> dict[str, Any]:
    return {
        "backend": "openai",
        "api_base": standin.url,
        "api_key": standin.api_key,
        "model": standin.model_name,
        "timeout_s": 20,
        "max_retries": 1,
    }


def matrix_credentials(workdir: Path) -> list[str]:
    """What the bot keeps of its Matrix session (device and access token records)."""
    path = workdir / "state" / "chazbot.sqlite3"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT value FROM credentials WHERE name LIKE 'matrix:%'").fetchall()
    tokens: list[str] = []
    for (value,) in rows:
        try:
            record = json.loads(value)
        except ValueError:
            tokens.append(str(value))  # e.g. the e2e store's pickle key
            continue
        if isinstance(record, dict) and record.get("access_token"):
            tokens.append(str(record["access_token"]))
    assert tokens, "the bot keeps its Matrix session in the credentials table"
    return tokens


def assert_clean_log(log: str, secrets_: list[str]) -> None:
    """One line per event, and no secret anywhere in the log."""
    lines = [line for line in log.splitlines() if line.strip()]
    assert lines, "chazbot logged nothing"
    odd = [line for line in lines if not LOG_LINE.match(line)]
    assert not odd, "log lines that are not one record each:\n" + "\n".join(odd[:20])
    for secret in secrets_:
        assert secret and secret not in log, "a secret was printed in chazbot's log"


async def test_metrics_move_after_chat_turns_and_commands(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM
) -> None:
    standin_llm.api_key = f"sk-test-{secrets.token_urlsafe(12)}"
    port = free_port()
    alice = await humans("alice")
    proc, bot = await chazbot(
        standin_llm.url,
        [alice.user_id],
        [alice.user_id],
        top={"http_listen": f"127.0.0.1:{port}", "llm": stand_in_llm_config(standin_llm)},
    )
    base = f"http://127.0.0.1:{port}"
    room = await alice.create_room([bot.user_id], direct=True)
    await alice.wait_member(room, bot.user_id)
    before = await scrape(base)

    noted = await alice.ask(room, "remember that the launch date is 2026-06-01", timeout=30)
    assert noted.body.startswith("Noted"), noted.body
    hinted = await alice.ask(room, "when is the launch date?", timeout=30)
    assert "2026-06-01" in hinted.body, hinted.body  # from the auto-recall block
    recalled = await alice.ask(room, "recall launch date", timeout=30)
    assert "2026-06-01" in recalled.body, recalled.body  # from the recall tool
    listed = await alice.ask(room, "!chaz memory list", timeout=30)
    assert listed.sender == bot.user_id
    after = await scrape(base)

    def moved(name: str, **labels: str) -> float:
        k = key(name, **labels)
        return after.get(k, 0.0) - before.get(k, 0.0)

    assert moved("chazbot_turns_total", outcome="ok") == 3
    assert moved("chazbot_tool_calls_total", tool="remember", outcome="ok") == 1
    assert moved("chazbot_tool_calls_total", tool="recall", outcome="ok") == 1
    assert moved("chazbot_commands_total", outcome="ok") == 1
    events = {
        k: v - before.get(k, 0.0)
        for k, v in after.items()
        if k.startswith("chazbot_matrix_events_total")
    }
    handled = sum(v for k, v in events.items() if not re.search(r"fail|ignor|not_allowed", k))
    assert handled == 4, events  # three chat messages and one command
    assert sum(v for k, v in events.items() if "fail" in k) == 0, events
    assert moved("chazbot_llm_seconds_count") >= 3
    assert moved("chazbot_llm_seconds_sum") > 0
    assert moved("chazbot_recall_seconds_count") >= 1  # the recall tool
    assert moved("chazbot_auto_recall_hits_total") >= 2  # the launch date, turns 2 and 3
    assert moved("chazbot_llm_errors_total") == 0
    assert moved("chazbot_turns_total", outcome="failed") == 0

    status, body = await get(f"{base}/healthz")
    assert status == 200, body
    health = json.loads(body)
    assert health["ok"] is True
    assert {name: check["ok"] for name, check in health["checks"].items()} == {
        "db": True,
        "matrix": True,
        "llm": True,
    }

    await proc.stop()
    assert_clean_log(
        proc.log(),
        [bot.password, standin_llm.api_key, *matrix_credentials(proc.workdir)],
    )


async def test_healthz_follows_the_homeserver(tmp_path: Path, standin_llm: StandinLLM) -> None:
    """A homeserver of its own (the shared one must keep running for the other tests)."""
    (tmp_path / "hs").mkdir()
    server = SynapseServer(tmp_path / "hs")
    server.start()
    proc: ChazbotProcess | None = None
    try:
        bot = server.register(f"chazbot-{uuid.uuid4().hex[:8]}")
        workdir = tmp_path / "bot"
        workdir.mkdir()
        port = free_port()
        config = bot_config(server, bot, workdir / "state", standin_llm.url, [], [])
        config["http_listen"] = f"127.0.0.1:{port}"
        proc = ChazbotProcess(workdir, config, env={"CHAZBOT_TEST_MATRIX_PASSWORD": bot.password})
        await proc.start()
        url = f"http://127.0.0.1:{port}/healthz"

        async def status_is(code: int) -> dict[str, Any] | None:
            status, body = await get(url)
            return json.loads(body) if status == code else None

        healthy = await wait_until(lambda: status_is(200), 30, "/healthz 200", interval=0.2)
        assert healthy["checks"]["matrix"]["ok"] is True

        server.stop()
        sick = await wait_until(lambda: status_is(503), 60, "/healthz 503", interval=0.2)
        assert sick["ok"] is False
        assert sick["checks"]["matrix"]["ok"] is False
        assert sick["checks"]["db"]["ok"] is True  # only the homeserver is down
        assert sick["checks"]["llm"]["ok"] is True

        server.start()
        again = await wait_until(lambda: status_is(200), 90, "/healthz 200 again", interval=0.2)
        assert again["checks"]["matrix"]["ok"] is True

        assert await proc.stop() == 0
        assert_clean_log(proc.log(), [bot.password, *matrix_credentials(workdir)])
    finally:
        if proc is not None:
            proc.kill()
        server.stop()

"""The local run remembers what its user says (issue 13's must-show), end to end.

``deploy/homeserver.py local`` as ``bash deploy/local.sh`` runs it: a real Synapse on
loopback, the embedded chat model and the local embedder (defaults, nothing configured but
DEBUG logging, where the turn loop writes each prompt's ``## Relevant Memories`` block), and
the DM it creates, encrypted as a client would make it. The user logs in with an encrypting
matrix-nio client and says a fact in the DM. In a second room ``!chaz memory search self``
finds it, and the next turn's prompt carries it; ``!chaz memory forget`` removes it from both.
Skipped without Synapse, the e2e extra or the embedded model.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from chazbot.agent import local_llm
from chazbot.config import e2e_installed, local_embedder_installed
from tests.support.paths import ROOT
from tests.support.synapse import HOMESERVER, Human, User, requires_synapse, wait_until

BANNER_FIELD = re.compile(r"^\s+(homeserver|user|password|bot|dm room):\s+(\S+)")
FACT = "My sister Ada lives in Lyon."
REPLY_TIMEOUT_S = 300.0

pytestmark = [
    requires_synapse,
    pytest.mark.skipif(not e2e_installed(), reason="the e2e extra is not installed"),
    pytest.mark.skipif(
        not (local_llm.local_available() and local_embedder_installed()),
        reason="the embedded model or the local embedder is not installed (the local extra)",
    ),
]


def banner(log: Path) -> dict[str, str] | None:
    text = log.read_text(errors="replace")
    if "Passwords are kept in" not in text:
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if match := BANNER_FIELD.match(line):
            fields[match.group(1)] = match.group(2)
    return fields


LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d ")


def blocks_after(log: Path, offset: int) -> list[str]:
    """The auto-recall blocks the turn loop logged (DEBUG) after ``offset`` in the log."""
    blocks: list[str] = []
    lines = log.read_text(errors="replace")[offset:].splitlines()
    for i, line in enumerate(lines):
        if "auto-recall for chaz in" in line:
            body = []
            for more in lines[i + 1 :]:
                if LOG_LINE.match(more):
                    break
                body.append(more)
            blocks.append("\n".join(body))
    return blocks


@pytest.mark.slow
@pytest.mark.timeout(1200)
async def test_local_run_remembers_and_forgets_what_the_user_says(tmp_path: Path) -> None:
    user_config = tmp_path / "config.yaml"
    user_config.write_text(yaml.safe_dump({"logging": {"level": "DEBUG"}}))
    log = tmp_path / "local.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "deploy/homeserver.py"),
                "local",
                "--state-dir",
                str(tmp_path / "state"),
                "--config",
                str(user_config),
            ],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
    human: Human | None = None
    try:

        def ready() -> dict[str, str] | None:
            assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
            return banner(log)

        fields = await wait_until(ready, 420, "the local run's banner", interval=0.5)
        base, bot, dm = fields["homeserver"], fields["bot"], fields["dm room"]
        started = log.read_text(errors="replace")
        line = next(x for x in started.splitlines() if "chazbot is running (state" in x)
        assert "(embedded)" in line and "embedder local/" in line and "capture messages" in line

        answer = await asyncio.to_thread(
            HOMESERVER.matrix_accounts.login,
            base,
            fields["user"],
            fields["password"],
            "capture-test",
        )
        user = User(
            answer["user_id"], fields["password"], answer["access_token"], answer["device_id"]
        )
        human = Human(SimpleNamespace(url=base), user, tmp_path / "store")  # type: ignore[arg-type]
        await human.start()
        client = human.client
        await wait_until(lambda: dm in client.rooms, 60, "the DM in the user's sync")
        assert client.rooms[dm].encrypted, "the local run's DM is encrypted"
        await wait_until(
            lambda: any(client.device_store.active_user_devices(bot)),
            60,
            "the bot's device keys",
        )

        # The user says a fact in the encrypted DM; the embedded model answers.
        said = await human.ask(dm, FACT, timeout=REPLY_TIMEOUT_S)
        assert said.sender == bot and type(said.event).__name__ == "RoomMessageText"

        # A second room: memory search finds the captured message.
        other = await human.create_room([bot], name="elsewhere")
        await human.wait_member(other, bot, timeout=60)

        async def search() -> str:
            return (await human.ask(other, "!chaz memory search self Lyon", timeout=60)).body

        async def found_it() -> str | None:
            body = await search()
            return body if FACT in body else None

        body = await wait_until(found_it, 60, "the fact in memory search", interval=0.5)
        match = re.search(
            r"- \[(\S+)\]: (.*" + re.escape(FACT) + r".*?)(?: \(tags: |$)", body, re.M
        )
        assert match is not None, body
        key, value = match.group(1), match.group(2)
        assert key.startswith(user.user_id + "/") and value.startswith(f"{user.user_id} (")

        # A question about her is answered from that one row, turned to the listener (#45).
        offset = len(log.read_text(errors="replace"))
        where = await human.ask(
            other, "!chaz Where does my sister Ada live?", timeout=REPLY_TIMEOUT_S
        )
        assert "Lyon" in where.body and not blocks_after(log, offset), where.body
        # Another turn's prompt carries it in the Relevant Memories block.
        offset = len(log.read_text(errors="replace"))
        await human.ask(other, "!chaz Any tips for a weekend in Lyon?", timeout=REPLY_TIMEOUT_S)
        [block] = blocks_after(log, offset)
        assert block.startswith("## Relevant Memories"), block
        # it says who said it (the reader: "you") and where (SPEC §5c): the DM, another room
        assert f"- [{key}] (you, another room, " in block and value in block, block

        # forget removes it from both.
        forgot = await human.ask(other, f"!chaz memory forget {key}", timeout=60)
        assert forgot.body.startswith("Forgot"), forgot.body
        assert key not in await search()
        offset = len(log.read_text(errors="replace"))
        await human.ask(other, "!chaz Tell me about Ada and Lyon.", timeout=REPLY_TIMEOUT_S)
        turn = log.read_text(errors="replace")[offset:]
        assert "turn agent=chaz" in turn  # the turn ran (with or without a block)
        for block in blocks_after(log, offset):
            assert f"[{key}]" not in block and FACT not in block, block
    finally:
        if human is not None:
            await human.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                await asyncio.to_thread(proc.wait, 60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        print(log.read_text(errors="replace")[-6000:])  # shown only when the test failed

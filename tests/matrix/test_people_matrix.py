"""People from chat (#40) through a real Synapse: a second person ignored with one notice,
allowed by an admin, answered at once, removed again; a burst of strangers gets one notice;
``deploy/homeserver.py add-person`` makes an allowed account. The commands on a real peer and
the notice's gate as a unit are in ``tests/commands/test_people.py``."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.standin_llm import StandinLLM
from tests.support.synapse import ChazbotProcess, Human, SynapseServer, User, requires_synapse

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]
NOTICE_START = "I only answer people an admin has allowed; ask "


@requires_synapse
@pytest.mark.timeout(240)
async def test_a_second_person_from_chat(
    chazbot: Bots,
    humans: Humans,
    standin_llm: StandinLLM,
    synapse: SynapseServer,
    matrix_user: Callable[[str], User],
) -> None:
    admin, ana = await humans("admin"), await humans("ana")
    proc, bot = await chazbot(standin_llm.url, [], [admin.user_id])
    room = await admin.create_room([bot.user_id, ana.user_id], name="family")
    await ana.wait_invite(room)
    await ana.join(room)
    await admin.wait_member(room, bot.user_id)
    await admin.wait_member(room, ana.user_id)

    # ignored: one notice, naming the admin, for the first message that addresses the bot
    await ana.send(room, "good morning everyone")  # chatter: nothing
    notice = await ana.ask(room, "!chaz help")
    assert notice.body == f"{NOTICE_START}{admin.user_id}.", notice.body
    assert notice.sender == bot.user_id and notice.content["msgtype"] == "m.notice"
    second = await ana.send(room, f"{bot.localpart}: are you there?")
    # the admin's reply comes after anything the bot said to ana's second message (one
    # queue per room, in order): when it is here, a second notice would be too
    listed = await admin.ask(room, "!chaz people list")
    assert ana.user_id not in listed.body
    assert ana.replies(second) == []
    assert "not allowed" in proc.log() and "notice 1," in proc.log()

    # an admin allows ana from chat: answered at once, no restart
    allowed = await admin.ask(room, f"!chaz people allow {ana.user_id}")
    assert allowed.body.startswith(f"Allowed {ana.user_id}"), allowed.body
    help_ = await ana.ask(room, "!chaz help")
    assert "people" in help_.body and NOTICE_START not in help_.body
    # help is a notice with an HTML body from its Markdown (a phone shows it formatted)
    assert help_.content["msgtype"] == "m.notice"
    assert help_.content["format"] == "org.matrix.custom.html"
    assert "<li><code>!chaz memory mine</code>" in help_.content["formatted_body"]
    listed = await admin.ask(room, "!chaz people list")
    assert f"- {ana.user_id} (allowed by {admin.user_id})" in listed.body
    # told a fact, the bot notes it in her words (#40), in the room where capture keeps it
    noted = await ana.ask(room, f"{bot.localpart}: My cat is called Miso.", timeout=30)
    assert noted.body == "Noted: your cat is called Miso.", noted.body
    # ana is not an admin: she cannot add someone herself
    refused = await ana.ask(room, "!chaz people allow @eve:example.org")
    assert "only admins" in refused.body

    # removed again: ignored at once (told already today in this room: no second notice)
    removed = await admin.ask(room, f"!chaz people remove {ana.user_id}")
    assert "I no longer answer them" in removed.body, removed.body
    after = await ana.send(room, "!chaz help")
    await admin.ask(room, "!chaz people list")
    assert ana.replies(after) == []
    assert "Traceback" not in proc.log()


@requires_synapse
@pytest.mark.timeout(240)
async def test_a_room_of_strangers_gets_one_notice(
    chazbot: Bots,
    humans: Humans,
    standin_llm: StandinLLM,
    synapse: SynapseServer,
    matrix_user: Callable[[str], User],
) -> None:
    """Strangers without a syncing client each (cheap): join by invite and address the bot."""
    from nio import AsyncClient, JoinResponse, RoomSendResponse

    admin = await humans("admin")
    proc, bot = await chazbot(standin_llm.url, [], [admin.user_id])
    strangers = [matrix_user(f"stranger{i}") for i in range(50)]
    room = await admin.create_room([bot.user_id, *(s.user_id for s in strangers)], name="crowd")
    await admin.wait_member(room, bot.user_id)
    clients = []
    try:
        sent = []
        for user in strangers:
            client = AsyncClient(synapse.url, user.user_id)
            client.restore_login(user.user_id, user.device_id, user.access_token)
            clients.append(client)
            assert isinstance(await client.join(room), JoinResponse)
        for client in clients:
            response = await client.room_send(
                room, "m.room.message", {"msgtype": "m.text", "body": "!chaz help"}
            )
            assert isinstance(response, RoomSendResponse), response
            sent.append(str(response.event_id))
        await admin.wait_member(room, strangers[-1].user_id)
        await admin.ask(room, "!chaz people list")  # after every stranger's message
        notices = [s for s in admin.messages(room, bot.user_id) if s.body.startswith(NOTICE_START)]
        assert len(notices) == 1, [n.body for n in notices]
        assert notices[0].in_reply_to == sent[0]
    finally:
        for client in clients:
            await client.close()
    assert "Traceback" not in proc.log()


@requires_synapse
@pytest.mark.timeout(240)
async def test_add_person_makes_an_allowed_account_and_prints_the_login(
    chazbot: Bots,
    humans: Humans,
    standin_llm: StandinLLM,
    synapse: SynapseServer,
    tmp_path: Path,
) -> None:
    import json
    import os
    import shutil
    import subprocess
    import sys

    from tests.support.synapse import SHARED_SECRET

    admin = await humans("admin")
    proc, bot = await chazbot(standin_llm.url, [], [admin.user_id])
    state = tmp_path / "local-state"
    (state / "homeserver").mkdir(parents=True)
    accounts = {
        "port": synapse.port,
        "registration_shared_secret": SHARED_SECRET,
        "macaroon_secret_key": "m",
        "form_secret": "f",
        "user": {"user_id": admin.user_id, "password": "unused"},
    }
    (state / "homeserver/accounts.json").write_text(json.dumps(accounts))
    shutil.copy(proc.config_path, state / "local-config.yaml")
    name = f"ana{os.getpid()}x{len(admin.user_id)}"

    def add(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(ROOT / "deploy/homeserver.py"), "add-person", *extra],
            cwd=tmp_path,
            env={**os.environ, **proc.env},
            capture_output=True,
            text=True,
            timeout=180,
        )

    done = add(name, "--state-dir", str(state))
    assert done.returncode == 0, done.stdout + done.stderr
    user_id = f"@{name}:localhost"
    fields = dict(re.findall(r"^\s+(homeserver|user|password):\s+(\S+)", done.stdout, re.MULTILINE))
    assert fields["user"] == user_id and fields["homeserver"] == synapse.url, done.stdout
    assert f"Allowed {user_id}" in done.stdout
    kept = json.loads((state / "homeserver/accounts.json").read_text())
    assert kept["people"][name]["password"] == fields["password"]
    # the login works, and the bot answers them now
    from tests.support.synapse import HOMESERVER

    token = HOMESERVER.matrix_accounts.login(synapse.url, user_id, fields["password"], "t")
    assert token["user_id"] == user_id
    dm = await admin.create_room([bot.user_id], direct=True)
    await admin.wait_member(dm, bot.user_id)
    listed = await admin.ask(dm, "!chaz people list")
    assert f"- {user_id} (allowed by the operator)" in listed.body, listed.body
    # asked again: the same login, nothing new; a bad name is one line
    again = add(name, "--state-dir", str(state))
    assert again.returncode == 0 and fields["password"] in again.stdout
    bad = add("Ana Smith!", "--state-dir", str(state))
    assert bad.returncode == 1 and bad.stderr.startswith("error: ") and bad.stderr[-1:] == "\n"
    gone = add("bo", "--state-dir", str(tmp_path / "nothing-here"))
    assert gone.returncode == 1 and "run bash deploy/local.sh first" in gone.stderr

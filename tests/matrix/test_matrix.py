"""The Matrix bot end to end: a real Synapse on loopback, a real ``chazbot run`` process, the
stand-in LLM, and matrix-nio clients as the people. "No reply" is checked with a barrier: a
later message in the same room is answered, and rooms are served in order.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.support.shared_bot import SharedBot, chazbot, humans, shared_bot, standin_llm
from tests.support.standin_llm import MEMORY_HEADING, StandinLLM, message_text
from tests.support.synapse import ChazbotProcess, Human, SynapseServer, User, requires_synapse
from tests.support.waits import wait_until

# one bot for the tests that need no process of their own, in the module's one event loop
pytestmark = [requires_synapse, pytest.mark.timeout(120), pytest.mark.asyncio(loop_scope="module")]
__all__ = ["chazbot", "humans", "shared_bot", "standin_llm"]  # the module's fixtures

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]


async def dm(human: Human, bot: User, encrypted: bool = False) -> str:
    room = await human.create_room([bot.user_id], direct=True, encrypted=encrypted)
    await human.wait_member(room, bot.user_id)
    return room


async def group(owner: Human, bot: User, *others: Human) -> str:
    room = await owner.create_room([bot.user_id, *(o.user_id for o in others)], name="group")
    for other in others:
        await other.wait_invite(room)
        await other.join(room)
    await owner.wait_member(room, bot.user_id)
    for other in others:
        await owner.wait_member(room, other.user_id)
    return room


def bot_secrets(proc: ChazbotProcess) -> list[str]:
    path = proc.workdir / "state" / "chazbot.sqlite3"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT value FROM credentials WHERE name LIKE 'matrix:%'").fetchall()
    found = [str(v) for (v,) in rows]
    assert found, "the bot keeps its Matrix session in the credentials table"
    return found


async def test_dm_chat_markdown_typing_and_long_replies(
    shared_bot: SharedBot, humans: Humans, standin_llm: StandinLLM
) -> None:
    alice = await humans("alice")
    proc, bot = shared_bot
    room = await dm(alice, bot)

    reply = await alice.ask(room, "hello **there**")
    assert reply.sender == bot.user_id
    assert reply.content["msgtype"] == "m.text"
    assert reply.body == "You said: hello **there**"
    assert reply.content["format"] == "org.matrix.custom.html"
    assert "<strong>there</strong>" in reply.content["formatted_body"]

    # A long reply comes in several messages, cut at line ends, each a reply to the question.
    long = "\n".join(f"line {i:05d} " + "x" * 60 for i in range(300))  # ~21k characters
    event_id = await alice.send(room, long)
    parts = await alice.wait_reply(event_id, count=3)
    await wait_until(lambda: len(alice.replies(event_id)) == len(parts), what="all parts")
    assert all(len(p.body) <= 8000 for p in parts)
    assert "\n".join(p.body for p in parts) == "You said: " + long

    # A typing notice while the agent works (the turn is held until released).
    standin_llm.hang(1)
    asked = len(standin_llm.requests)
    event_id = await alice.send(room, "take your time")
    await standin_llm.wait_for_requests(asked + 1)
    await wait_until(
        lambda: any(r == room and bot.user_id in users for r, users in alice.typing),
        what="the bot's typing notice",
    )
    standin_llm.release()  # the held request fails with 503; the LLM client retries once
    [reply] = await alice.wait_reply(event_id)
    assert reply.body == "You said: take your time"

    # Secrets never reach the log.
    log = proc.log()
    for secret in [bot.password, *bot_secrets(proc)]:
        for piece in secret.replace('"', " ").split():
            if len(piece) > 12:
                assert piece not in log
    store = proc.workdir / "state" / "matrix-store"
    assert stat.S_IMODE(store.stat().st_mode) == 0o700


async def test_group_rooms_answer_prefix_and_mentions_only(
    shared_bot: SharedBot, humans: Humans
) -> None:
    alice, bob = await humans("alice"), await humans("bob")
    proc, bot = shared_bot
    room = await group(alice, bot, bob)
    localpart = bot.user_id[1:].split(":")[0]

    chatter = [
        await alice.send(room, "just chatting among ourselves"),
        await bob.send(room, "indeed"),
        await alice.send(room, f"{localpart} is nice", {"m.mentions": {}}),  # authoritative: nobody
    ]
    reply = await alice.ask(room, "what do you think", {"m.mentions": {"user_ids": [bot.user_id]}})
    assert reply.body == "You said: what do you think"
    assert reply.content["m.mentions"] == {"user_ids": [alice.user_id]}

    reply = await bob.ask(room, f"{bot.user_id}: plain mention")  # legacy: the MXID in the body
    assert reply.body == "You said: plain mention"

    reply = await alice.ask(room, "!chaz how are you")  # prefix + text: the agent
    assert reply.body == "You said: how are you"

    # A room's history from before the bot was invited is not answered.
    older = await alice.create_room([bob.user_id], name="older")
    history = await alice.send(older, "!chaz memory list")
    invited = await alice.client.room_invite(older, bot.user_id)
    assert type(invited).__name__ == "RoomInviteResponse", invited
    await alice.wait_member(older, bot.user_id)
    await alice.ask(older, "!chaz agents")
    assert alice.replies(history) == []

    reply = await bob.ask(room, "!chaz memory list")  # prefix + command word: a command
    assert reply.content["msgtype"] == "m.notice"
    assert "memory new" in reply.body

    # In a thread, the answer stays in the thread.
    root = await alice.send(room, "a thread")
    reply = await alice.ask(
        room, "!chaz help", {"m.relates_to": {"rel_type": "m.thread", "event_id": root}}
    )
    assert reply.content["m.relates_to"]["rel_type"] == "m.thread"
    assert reply.content["m.relates_to"]["event_id"] == root

    # Notices (from any bot) and edits are never answered; the barrier proves it.
    notice = await bob.send(room, "!chaz memory list", {"msgtype": "m.notice"})
    edit = await alice.send(
        room,
        "* !chaz memory list",
        {
            "m.relates_to": {"rel_type": "m.replace", "event_id": root},
            "m.new_content": {"msgtype": "m.text", "body": "!chaz memory list"},
        },
    )
    await alice.ask(room, "!chaz agents")
    for event_id in [*chatter, root, notice, edit]:
        assert alice.replies(event_id) == []
    await asyncio.sleep(0)  # keep the loop fair before teardown
    assert proc.log().count("Traceback") == 0


async def test_commands_admins_strangers_and_room_agents(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM
) -> None:
    admin, member, stranger = (
        await humans("admin"),
        await humans("member"),
        await humans("stranger"),
    )
    _, bot = await chazbot(
        standin_llm.url,
        [member.user_id],
        [admin.user_id],
        top={"agents": [{"name": "chaz"}, {"name": "sage"}]},
    )
    room = await group(admin, bot, member, stranger)

    reply = await admin.ask(room, "!chaz memory new projx")
    assert reply.content["msgtype"] == "m.notice"
    assert "Created bank projx" in reply.body
    reply = await member.ask(room, "!chaz memory list")  # a non-admin: what chaz can read
    assert "projx" not in reply.body

    reply = await member.ask(room, "!chaz memory grant projx chaz read")
    assert reply.body == "only admins may use !chaz memory grant"
    reply = await admin.ask(room, "!chaz memory grant projx chaz read")
    assert reply.body == "Granted chaz read on projx."
    reply = await member.ask(room, "!chaz memory list")
    assert "projx" in reply.body

    # A stranger is ignored: one short notice in the room (#40), nothing more; their DM
    # gets the notice once and the bot leaves (#47, tests/matrix/test_stranger_dm_matrix.py).
    ignored = [
        await stranger.send(room, "!chaz memory list"),
        await stranger.send(room, f"{bot.user_id}: hello?"),
    ]
    await member.ask(room, "!chaz agents")  # the barrier
    (notice,) = stranger.replies(ignored[0])
    assert notice.body.startswith("I only answer people an admin has allowed; ask @admin")
    assert stranger.replies(ignored[1]) == []
    private = await stranger.create_room([bot.user_id], direct=True)
    await stranger.wait_member(private, bot.user_id, "leave")  # told once, then left
    (told,) = stranger.messages(private, sender=bot.user_id)
    assert told.body.startswith("I only answer people an admin has allowed; ask @admin")

    # The room is a session: its agent is chosen per room, by an admin (SPEC §6).
    reply = await member.ask(room, "!chaz agent sage")
    assert reply.body.startswith("only admins may choose another agent")
    reply = await admin.ask(room, "!chaz agent sage")
    assert reply.body == "sage answers in this session now."
    reply = await member.ask(room, "!chaz agents")
    assert "- sage (this session)" in reply.body
    other = await dm(member, bot)
    reply = await member.ask(other, "!chaz agents")
    assert "- chaz (this session)" in reply.body
    reply = await member.ask(room, "!chaz memory nonsense")
    assert reply.body.startswith("unknown memory subcommand")


async def test_remember_in_one_room_recalled_in_another(
    shared_bot: SharedBot, humans: Humans, standin_llm: StandinLLM
) -> None:
    alice = await humans("alice")
    _, bot = shared_bot
    room_a = await dm(alice, bot)
    reply = await alice.ask(room_a, "remember the launch code is 4242")
    assert reply.body.startswith("Noted")

    room_b = await alice.create_room([bot.user_id], name="elsewhere")
    await alice.wait_member(room_b, bot.user_id)
    reply = await alice.ask(room_b, "!chaz what is the launch code?")
    assert "4242" in reply.body
    assert reply.body.startswith("From memory:")
    seen = "\n".join(message_text(m) for m in standin_llm.last_request["messages"])
    assert MEMORY_HEADING in seen


async def test_restart_answers_missed_command_once(
    chazbot: Bots,
    humans: Humans,
    standin_llm: StandinLLM,
    synapse: SynapseServer,
    synapse_admin: User,
) -> None:
    alice = await humans("alice")
    proc, bot = await chazbot(standin_llm.url, [alice.user_id], [alice.user_id])
    room = await dm(alice, bot)
    before = [await alice.send(room, "!chaz memory list"), await alice.send(room, "hi there")]
    for event_id in before:
        await alice.wait_reply(event_id)

    assert await proc.stop() == 0
    missed = await alice.send(room, "!chaz memory new missed")
    await proc.start()
    [reply] = await alice.wait_reply(missed)
    assert "Created bank missed" in reply.body
    after = await alice.ask(room, "!chaz memory list")
    assert "missed" in after.body

    # Killed (no clean stop) right after answering: nothing is answered twice on restart.
    answered = await alice.send(room, "!chaz agents")
    await alice.wait_reply(answered)
    proc.kill()
    missed_again = await alice.send(room, "!chaz memory new missed2")
    await proc.start()
    [reply] = await alice.wait_reply(missed_again)
    assert "Created bank missed2" in reply.body
    await alice.ask(room, "!chaz agents")  # the barrier

    for event_id in [*before, missed, answered, missed_again]:
        assert len(alice.replies(event_id)) == 1, event_id
    assert len(alice.messages(room, sender=bot.user_id)) == 7
    assert "history not answered" in proc.log()
    assert "resumed" in proc.log()
    assert "reused" in proc.log()
    devices = synapse.devices(bot.user_id, synapse_admin.access_token)
    logged_in = [d for d in devices if d["device_id"] != bot.device_id]  # not registration's
    assert len(logged_in) == 1, devices


async def test_encrypted_dm_and_undecryptable_notice(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM
) -> None:
    alice = await humans("alice", encrypted=True)
    _, bot = await chazbot(standin_llm.url, [alice.user_id], [], encryption=True)
    room = await dm(alice, bot, encrypted=True)
    await wait_until(
        lambda: any(alice.client.device_store.active_user_devices(bot.user_id)),
        what="the bot's device keys",
    )
    reply = await alice.ask(room, "hello in secret")
    assert type(reply.event).__name__ == "RoomMessageText"  # decrypted
    assert reply.body == "You said: hello in secret"
    reply = await alice.ask(room, "!chaz memory list")
    assert reply.content["msgtype"] == "m.notice"

    # A message the bot cannot decrypt gets one short notice per room, not one per message.
    plain = await alice.create_room([bot.user_id], name="plain")
    await alice.wait_member(plain, bot.user_id)
    garbage = {
        "algorithm": "m.megolm.v1.aes-sha2",
        "ciphertext": "AwgAEnB",
        "sender_key": "nokey",
        "device_id": "NODEVICE",
        "session_id": "nosession",
    }
    bad = []
    for _ in range(2):
        sent = await alice.client.room_send(plain, "m.room.encrypted", garbage)
        bad.append(sent.event_id)
    [notice] = await alice.wait_reply(bad[0])
    assert "could not decrypt" in notice.body
    await alice.ask(plain, "!chaz agents")  # the barrier
    assert alice.replies(bad[1]) == []


async def test_burst_of_50_commands_gets_50_replies(shared_bot: SharedBot, humans: Humans) -> None:
    alice = await humans("alice")
    _, bot = shared_bot
    room = await dm(alice, bot)
    # Each command differs by an extra content field: Synapse names an event by its hash, so
    # identical contents sent in the same millisecond on the same parents are one event (the
    # same event id for two sends: seen in 2 of 13 runs under load), which is Matrix, not us.
    sent = await asyncio.gather(
        *(alice.send(room, "!chaz memory list", {"n": n}) for n in range(50))
    )
    assert len(set(sent)) == 50
    await wait_until(lambda: all(alice.replies(e) for e in sent), timeout=30, what="50 replies")
    assert all(len(alice.replies(e)) == 1 for e in sent)
    assert len(alice.messages(room, sender=bot.user_id)) == 50


async def test_slow_agent_in_one_room_does_not_block_another(
    shared_bot: SharedBot, humans: Humans, standin_llm: StandinLLM
) -> None:
    alice = await humans("alice")
    _, bot = shared_bot
    slow_room, fast_room = await dm(alice, bot), await dm(alice, bot)
    asked = len(standin_llm.requests)  # the module's stand-in: counted from here
    standin_llm.hang(1)
    slow = await alice.send(slow_room, "think hard")
    await standin_llm.wait_for_requests(asked + 1)
    reply = await alice.ask(fast_room, "!chaz memory list")  # answered while the turn hangs
    assert reply.content["msgtype"] == "m.notice"
    assert alice.replies(slow) == []
    standin_llm.release()
    [reply] = await alice.wait_reply(slow)
    assert reply.body == "You said: think hard"


async def test_homeserver_restart_is_ridden_out_and_sends_are_not_duplicated(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM, synapse: SynapseServer
) -> None:
    alice = await humans("alice")
    proc, bot = await chazbot(standin_llm.url, [alice.user_id], [])
    room = await dm(alice, bot)
    await alice.ask(room, "!chaz memory list")

    # The agent's answer is ready while the homeserver is down: the send is retried.
    asked = len(standin_llm.requests)  # the module's stand-in: counted from here
    standin_llm.hang(1)
    pending = await alice.send(room, "answer me later")
    await standin_llm.wait_for_requests(asked + 1)
    synapse.stop()
    standin_llm.release()
    await wait_until(lambda: "sending to" in proc.log(), what="a failed send in the log")
    synapse.start()
    alice.resume_sync()

    [reply] = await alice.wait_reply(pending, timeout=40)
    assert reply.body == "You said: answer me later"
    reply = await alice.ask(room, "!chaz memory list", timeout=40)
    assert reply.content["msgtype"] == "m.notice"
    assert len(alice.replies(pending)) == 1
    log = proc.log()
    assert "matrix: sync loop stopped" in log
    assert proc.proc is not None and proc.proc.poll() is None


async def test_limited_timelines_are_paged_back_in_process(
    humans: Humans,
    matrix_user: Callable[[str], User],
    standin_llm: StandinLLM,
    synapse: SynapseServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Timeline limit 3: bursts (live, and while the bot was down) still all get replies."""
    from chazbot.config import Config, MatrixConfig
    from chazbot.peer import Peer
    from chazbot.transports.matrix.bot import MatrixBot

    caplog.set_level(logging.INFO, logger="chazbot.transports.matrix")
    alice = await humans("alice")
    bot_user = matrix_user("chazbot")
    mcfg = MatrixConfig(
        homeserver_url=synapse.url,
        user_id=bot_user.user_id,
        password=bot_user.password,
        allow_list=[alice.user_id],
    )
    config = Config(
        state_dir=tmp_path / "state",
        sync_listen="",
        http_listen="",
        llm=standin_llm.config(),
        matrix=mcfg,
    )
    peer = await Peer.open(config)
    bot = MatrixBot(peer, mcfg, timeline_limit=3)
    try:
        await bot.start()
        await bot.wait_synced(20)
        assert bot.healthy
        room = await dm(alice, bot_user)
        live = await asyncio.gather(  # distinct contents: see the burst test above
            *(alice.send(room, "!chaz memory list", {"n": n}) for n in range(12))
        )
        await wait_until(lambda: all(alice.replies(e) for e in live), 30, "12 live replies")

        await bot.stop()
        device = bot.device_id
        missed = [await alice.send(room, f"!chaz memory new bank{i}") for i in range(12)]
        bot = MatrixBot(peer, mcfg, timeline_limit=3)
        await bot.start()
        assert bot.device_id == device
        await wait_until(lambda: all(alice.replies(e) for e in missed), 30, "12 missed replies")
        assert "limited timeline, paged back" in caplog.text

        # The same transaction id twice is one message: a retried send is never a duplicate.
        content = {"msgtype": "m.notice", "body": "only once"}
        assert bot.sender is not None
        first = await bot.sender.send(room, content, "chazbot-test-txn")
        second = await bot.sender.send(room, content, "chazbot-test-txn")
        assert first == second
        await alice.ask(room, "!chaz agents")  # the barrier
        assert [m.body for m in alice.messages(room, bot_user.user_id)].count("only once") == 1
        for event_id in [*live, *missed]:
            assert len(alice.replies(event_id)) == 1
    finally:
        await bot.stop()
        await peer.close()


async def test_rate_limited_replies_wait_and_all_arrive(
    chazbot: Bots,
    humans: Humans,
    standin_llm: StandinLLM,
    synapse: SynapseServer,
    synapse_admin: User,
) -> None:
    alice = await humans("alice")
    proc, bot = await chazbot(standin_llm.url, [alice.user_id], [])
    room = await dm(alice, bot)
    synapse.override_ratelimit(bot.user_id, synapse_admin.access_token, 4, 1)
    sent = [await alice.send(room, "!chaz memory list") for _ in range(5)]
    await wait_until(lambda: all(alice.replies(e) for e in sent), 30, "5 rate-limited replies")
    assert all(len(alice.replies(e)) == 1 for e in sent)
    assert "Got 429 response (ratelimited)" in proc.log()


async def test_access_token_login_in_process(
    humans: Humans,
    matrix_user: Callable[[str], User],
    synapse: SynapseServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from chazbot.config import Config, MatrixConfig
    from chazbot.errors import BackendError
    from chazbot.peer import Peer
    from chazbot.transports.matrix.bot import MatrixBot

    caplog.set_level(logging.DEBUG)
    alice = await humans("alice")
    bot_user = matrix_user("chazbot")
    mcfg = MatrixConfig(
        homeserver_url=synapse.url,
        user_id=bot_user.user_id,
        access_token=bot_user.access_token,
        allow_list=[alice.user_id],
    )
    peer = await Peer.open(Config(state_dir=tmp_path / "state", sync_listen="", http_listen=""))
    try:
        for _ in range(2):  # the second start reuses the saved device
            bot = MatrixBot(peer, mcfg)
            await bot.start()
            try:
                await bot.wait_synced(20)
                assert bot.device_id == bot_user.device_id
                room = await dm(alice, bot_user)
                reply = await alice.ask(room, "!chaz agents")
                assert "chaz" in reply.body
            finally:
                await bot.stop()
        wrong = mcfg.model_copy(update={"access_token": "syt_not_a_real_token_at_all"})
        with pytest.raises(BackendError, match="access token was refused") as caught:
            await MatrixBot(peer, wrong).start()
        assert "syt_not_a_real_token" not in str(caught.value)
    finally:
        await peer.close()
    assert bot_user.access_token not in caplog.text
    assert "syt_not_a_real_token" not in caplog.text

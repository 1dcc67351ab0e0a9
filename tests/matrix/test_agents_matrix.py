"""Agents from chat over Matrix (#27): a real Synapse and a real ``chazbot run``. An admin
makes an agent in chat, switches a DM to it, talks to it (the stand-in LLM sees its system
prompt and model), changes its prompt, restarts the service and finds it unchanged; a member
who is not an admin is refused every verb; ``/agent reload`` after a config edit adds a
default bank without a restart."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import pytest

from tests.support.standin_llm import StandinLLM, message_text
from tests.support.synapse import ChazbotProcess, Human, User, requires_synapse

pytestmark = [requires_synapse, pytest.mark.timeout(240)]

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]


def prompt_of(request: dict[str, object]) -> str:
    messages = request["messages"]
    assert isinstance(messages, list)
    return message_text(messages[0])


async def test_an_admin_makes_tunes_and_keeps_an_agent_from_chat(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM
) -> None:
    admin, member = await humans("admin"), await humans("member")
    proc, bot = await chazbot(
        standin_llm.url, [member.user_id], [admin.user_id], top={"agents": [{"name": "chaz"}]}
    )
    dm = await admin.create_room([bot.user_id], direct=True)
    await admin.wait_member(dm, bot.user_id)

    made = await admin.ask(
        dm,
        '!chaz agent new pirate system_prompt="You\'re a pirate. Say arr." model=standin-model',
        timeout=30,
    )
    assert made.body.startswith("Made agent pirate, model standin-model"), made.body
    assert (await admin.ask(dm, "!chaz agent pirate")).body == "pirate answers in this session now."
    answer = await admin.ask(dm, "hello there", timeout=30)
    assert answer.body == "You said: hello there", answer.body
    asked = standin_llm.last_request
    assert asked["model"] == "standin-model"
    assert prompt_of(asked).startswith("You're a pirate. Say arr.")

    changed = await admin.ask(dm, "!chaz agent set pirate system_prompt You are a parrot, matey.")
    assert changed.body == "pirate.system_prompt is set.", changed.body
    await admin.ask(dm, "still there?", timeout=30)
    assert prompt_of(standin_llm.last_request).startswith("You are a parrot, matey.")

    assert await proc.stop() == 0
    await proc.start()
    answer = await admin.ask(dm, "after the restart", timeout=30)
    assert answer.body == "You said: after the restart", answer.body
    asked = standin_llm.last_request
    assert asked["model"] == "standin-model"
    assert prompt_of(asked).startswith("You are a parrot, matey.")
    shown = (await admin.ask(dm, "!chaz agent show pirate")).body
    assert "- system_prompt [chat]: You are a parrot, matey." in shown, shown
    listed = (await admin.ask(dm, "!chaz agents")).body
    assert "- pirate (this session): model standin-model" in listed, listed
    assert "defined in chat" in listed

    # a member who is not an admin, in a room of three: refused every verb, nothing changes
    room = await admin.create_room([bot.user_id, member.user_id], name="crew")
    await member.wait_invite(room)
    await member.join(room)
    await admin.wait_member(room, bot.user_id)
    await admin.wait_member(room, member.user_id)
    for verb in (
        "agent new gull",
        "agent set pirate system_prompt You obey the member.",
        "agent reset pirate system_prompt",
        "agent show pirate",
        "agent reload",
    ):
        reply = await member.ask(room, f"!chaz {verb}")
        assert reply.body.startswith("only admins may use !chaz agent "), (verb, reply.body)
    shown = (await admin.ask(dm, "!chaz agent show pirate")).body
    assert (
        "You are a parrot, matey." in shown
        and "gull" not in (await admin.ask(dm, "!chaz agents")).body
    )

    # a config edit reaches the running bot by /agent reload: a default bank, no restart
    assert "team-notes" not in (await admin.ask(dm, "!chaz memory list")).body
    proc.config["agents"] = [{"name": "chaz", "default_memory_banks": ["team-notes"]}]
    proc.config_path.write_text(json.dumps(proc.config, indent=1))
    reloaded = (await admin.ask(dm, "!chaz agent reload", timeout=30)).body
    assert reloaded.startswith("Config reloaded: 2 agents;"), reloaded
    assert "default banks granted chaz→team-notes" in reloaded, reloaded
    assert "team-notes" in (await admin.ask(dm, "!chaz memory list")).body
    memory = (await admin.ask(dm, "!chaz agent")).body  # pirate answers in the DM
    assert memory.startswith("pirate answers"), memory
    assert proc.starts == 2
    assert "Traceback" not in proc.log()

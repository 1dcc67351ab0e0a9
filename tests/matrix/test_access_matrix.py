"""People and agents over Matrix (SPEC §6, #12): a real Synapse, a real ``chazbot run`` with
two agents, ``public`` serving a group room and ``hr`` with private memory. A member (not an
admin) of the group room cannot read hr's memory by any command, nor switch the room to hr;
an admin can, which shows the memory was there to leak."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests.support.standin_llm import StandinLLM
from tests.support.synapse import ChazbotProcess, Human, User, requires_synapse

pytestmark = [requires_synapse, pytest.mark.timeout(180)]

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]

SECRET = "Bob earns 90k"


async def test_a_member_cannot_read_another_agents_memory(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM
) -> None:
    admin, member = await humans("admin"), await humans("member")
    proc, bot = await chazbot(
        standin_llm.url,
        [member.user_id],
        [admin.user_id],
        top={"agents": [{"name": "public"}, {"name": "hr"}]},
    )
    # hr's private memory, written by an admin in a DM the admin switched to hr
    private = await admin.create_room([bot.user_id], direct=True)
    await admin.wait_member(private, bot.user_id)
    assert (await admin.ask(private, "!chaz agent hr")).body == "hr answers in this session now."
    noted = await admin.ask(private, f"remember salary.bob is {SECRET}", timeout=30)
    assert noted.body.startswith("Noted"), noted.body

    room = await admin.create_room([bot.user_id, member.user_id], name="public")
    await member.wait_invite(room)
    await member.join(room)
    await admin.wait_member(room, bot.user_id)
    await admin.wait_member(room, member.user_id)

    refused = {
        # hr's name is a word of the query to someone who may not read it: the answer is
        # the same as for a name nothing has (which names exist is not told)
        "!chaz memory search hr salary": "No memories found in public's own memory.",
        "!chaz memory search hx salary": "No memories found in public's own memory.",
        "!chaz memory stats hr": "cannot read 'hr' (or nothing has that name)",
        "!chaz memory stats hx": "cannot read 'hx' (or nothing has that name)",
        "!chaz agent hr": "only admins may choose another agent",
        "!chaz memory forget salary.bob hr": "no bank named 'hr'",
        "!chaz memory forget salary.bob": "no memory with key",  # public's own memory
    }
    for text, why in refused.items():
        reply = await member.ask(room, text)
        assert why in reply.body, (text, reply.body)
        assert SECRET not in reply.body
    reply = await member.ask(room, "!chaz agents")
    assert "- public (this session)" in reply.body
    # asking the room's agent does not reach hr's memory either
    reply = await member.ask(
        room, '!chaz call recall {"query": "salary", "bank": "hr"}', timeout=30
    )
    assert "no bank named 'hr'" in reply.body and SECRET not in reply.body
    reply = await member.ask(room, "!chaz recall salary", timeout=30)
    assert SECRET not in reply.body

    # the member reads the room's own agent: allowed
    reply = await member.ask(room, "!chaz memory stats")
    assert "Stats for public's own memory" in reply.body
    # an admin may browse hr's memory, but a reply in the group obeys the group's audience
    # (SPEC §5c: the member was not in the DM where it was said) ...
    reply = await admin.ask(room, "!chaz memory search hr salary")
    assert reply.body == "No memories found in hr.", reply.body
    # ... while in the admin's DM it is there, untouched all along
    reply = await admin.ask(private, "!chaz memory search hr salary")
    assert SECRET in reply.body
    assert "Traceback" not in proc.log()

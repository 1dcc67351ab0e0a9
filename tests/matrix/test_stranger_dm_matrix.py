"""A stranger who writes to the bot in a DM gets one notice (issue #47): the README said so,
but the DM invite was declined without a word. Now the bot accepts a stranger's DM invite,
sends the not-allowed notice once and leaves; once per inviter a day and at most
``NoticeLimits.burst`` a minute over all strangers, so invites cannot make it join rooms
without end. A stranger's group invite is still declined without a word."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from nio import InviteMemberEvent

from chazbot.config import MatrixConfig
from chazbot.transports.matrix.routing import Router
from chazbot.transports.matrix.rules import NoticeGate, NoticeLimits
from tests.support.standin_llm import StandinLLM
from tests.support.synapse import ChazbotProcess, Human, User, requires_synapse, wait_until

Humans = Callable[..., Awaitable[Human]]
Bots = Callable[..., Awaitable[tuple[ChazbotProcess, User]]]
BOT = "@chaz:example.org"
NOTICE = "I only answer people an admin has allowed; ask @admin"


# -- the decision, on a clock of our own ---------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def router(clock: Clock) -> Router:
    cfg = MatrixConfig(
        homeserver_url="http://x", user_id=BOT, allow_list=["@ana:example.org"], admins=[]
    )
    limits = NoticeLimits()
    return Router(
        cfg, ["help"], clock=clock, notices=NoticeGate(limits), invites=NoticeGate(limits)
    )


def invite_state(direct: bool | None, who: str = BOT) -> list[Any]:
    content: dict[str, Any] = {"membership": "invite"}
    if direct is not None:
        content["is_direct"] = direct
    event = InviteMemberEvent.from_dict(
        {"type": "m.room.member", "sender": "@eve:x", "state_key": who, "content": content}
    )
    return [event]


def test_only_the_bots_own_invite_marked_direct_is_a_dm() -> None:
    r = router(Clock())
    assert r.direct(invite_state(True))
    assert not r.direct(invite_state(False))
    assert not r.direct(invite_state(None))
    assert not r.direct(invite_state(True, who="@someone:else"))


def test_a_stranger_is_greeted_once_a_day_and_all_strangers_within_a_burst() -> None:
    clock = Clock()
    r = router(clock)
    assert r.answer_invite("!a:x", "@ana:example.org", direct=False) == "join"
    assert r.answer_invite("!g:x", "@eve:x", direct=False) == "decline"  # a group: never
    assert r.answer_invite("!d1:x", "@eve:x", direct=True) == "greet"
    # the same stranger again, in a new DM: declined (no join) for a day
    assert r.answer_invite("!d2:x", "@eve:x", direct=True) == "decline"
    clock.now += NoticeLimits().per_room_s - 1
    assert r.answer_invite("!d3:x", "@eve:x", direct=True) == "decline"
    clock.now += 2
    assert r.answer_invite("!d4:x", "@eve:x", direct=True) == "greet"
    # many strangers at once: no more than the burst a minute, whoever they are
    clock.now += 3_600
    burst = NoticeLimits().burst
    answers = [r.answer_invite(f"!s{i}:x", f"@s{i}:x", direct=True) for i in range(50)]
    assert answers.count("greet") == burst and answers[:burst] == ["greet"] * burst
    clock.now += NoticeLimits().window_s
    assert r.answer_invite("!late:x", "@late:x", direct=True) == "greet"
    # the notices to messages share the overall burst: no second notice in a greeted DM
    assert not r.notices.allow("!late:x", clock.now)


# -- a real Synapse and a real ``chazbot run`` ---------------------------------------------


@requires_synapse
@pytest.mark.timeout(180)
async def test_a_strangers_dm_gets_one_notice_then_the_bot_leaves(
    chazbot: Bots, humans: Humans, standin_llm: StandinLLM
) -> None:
    admin, stranger = await humans("admin"), await humans("stranger")
    proc, bot = await chazbot(standin_llm.url, [], [admin.user_id])

    private = await stranger.create_room([bot.user_id], direct=True)
    await stranger.wait_member(private, bot.user_id, "join")
    await stranger.wait_member(private, bot.user_id, "leave")
    notices = stranger.messages(private, sender=bot.user_id)
    assert len(notices) == 1, [n.body for n in notices]
    assert notices[0].content["msgtype"] == "m.notice"
    assert notices[0].body.startswith(NOTICE), notices[0].body

    # again the same day: declined without a word (the bot never joins)
    again = await stranger.create_room([bot.user_id], direct=True)
    await stranger.wait_member(again, bot.user_id, "leave")
    # a stranger's group room: declined without a word
    room = await stranger.create_room([bot.user_id], name="a group")
    await stranger.wait_member(room, bot.user_id, "leave")
    # an allowed person's DM still works (and is the barrier for what came before)
    mine = await admin.create_room([bot.user_id], direct=True)
    await admin.wait_member(mine, bot.user_id)
    assert (await admin.ask(mine, "!chaz agents")).body
    for where in (again, room):
        joined = [
            s
            for s in stranger.seen
            if s.room_id == where
            and getattr(s.event, "state_key", None) == bot.user_id
            and getattr(s.event, "membership", None) == "join"
        ]
        assert joined == [] and stranger.messages(where, sender=bot.user_id) == []
    await wait_until(lambda: "telling them once, then leaving" in proc.log(), 10, "the log line")
    assert proc.log().count("telling them once, then leaving") == 1
    assert "Traceback" not in proc.log()

"""Memory under load (issue 28) through a real Synapse: a held turn sends one typing notice,
and nothing to stop it. The rest of the load tests, on real peers: ``tests/memory/test_load.py``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests.support.standin_llm import StandinLLM
from tests.support.synapse import ChazbotProcess, Human, User, requires_synapse
from tests.support.waits import wait_until


@requires_synapse
@pytest.mark.timeout(120)
async def test_one_typing_notice_a_turn_and_none_to_stop_it(
    chazbot: Callable[..., Awaitable[tuple[ChazbotProcess, User]]],
    humans: Callable[..., Awaitable[Human]],
    standin_llm: StandinLLM,
) -> None:
    alice = await humans("alice")
    _, bot = await chazbot(standin_llm.url, [alice.user_id], [])
    room = await alice.create_room([bot.user_id], direct=True)
    await alice.wait_member(room, bot.user_id)

    def notices() -> list[list[str]]:
        return [users for r, users in alice.typing if r == room]

    standin_llm.hang(1)  # the first turn is held until the notice is seen
    first = await alice.send(room, "My sister Ada lives in Lyon")
    await wait_until(lambda: [bot.user_id] in notices(), what="the bot's typing notice")
    standin_llm.release()  # the held request fails with 503; the LLM client retries once
    await alice.wait_reply(first)
    # A second turn in the same room: its reply comes after anything the bot sent to stop
    # the first turn's notice (one room's turns run in order), so such a stop would show.
    await alice.ask(room, "My brother Bob lives in Nantes")
    assert notices() == [[bot.user_id]], notices()

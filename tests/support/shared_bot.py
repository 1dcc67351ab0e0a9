"""One ``chazbot run`` shared by the tests of a Matrix module that need no fresh process of
their own: starting a bot (imports, login, first sync) is a few seconds, much of a short
Matrix test. A module opts in by importing these fixtures (they replace the per-test ones
of ``tests/conftest.py`` by name) and running its tests in the module's event loop::

    from tests.support.shared_bot import chazbot, humans, shared_bot, standin_llm

    pytestmark = [requires_synapse, pytest.mark.asyncio(loop_scope="module")]

Then everything the module's tests touch lives in that one loop: the stand-in LLM (one per
module: a test counts its requests from where it starts, never from 0), the people and the
bots a test still starts for itself (``chazbot``: a test about a restart, a config of its
own, a homeserver or rate limit it changes). The shared bot (``shared_bot``; its config's
top-level keys from the module's ``shared_bot_top`` fixture) lets in anyone whose localpart
starts with one of ``SHARED_PEOPLE`` and has no admin: each test's people are new users in
new rooms, so what one test says is never told to another's (SPEC §5c), and a stranger is
anyone else ("stranger-…").
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.support.standin_llm import StandinLLM
from tests.support.synapse import (
    SERVER_NAME,
    ChazbotProcess,
    Human,
    SynapseServer,
    User,
    bot_config,
    bots_made,
    humans_made,
    stop_and_show,
)

SHARED_PEOPLE = ("alice", "bob", "carol", "mallory")
"""Whom the shared bot lets in: ``humans("alice")`` and the like."""

SharedBot = tuple[ChazbotProcess, User]


@pytest.fixture(scope="module")
def shared_bot_top() -> dict[str, Any]:
    """The shared bot's top-level config keys (a module overrides this fixture)."""
    return {}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def standin_llm() -> AsyncIterator[StandinLLM]:
    """One stand-in LLM for the module's tests and bots."""
    async with StandinLLM() as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_bot(
    synapse: SynapseServer,
    standin_llm: StandinLLM,
    shared_bot_top: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[SharedBot]:
    """The module's running bot, started by its first test that asks, stopped at its end."""
    bot = synapse.register(f"chazbot-shared-{uuid.uuid4().hex[:8]}")
    workdir = tmp_path_factory.mktemp("shared-bot")
    allow = [f"@{person}-*:{SERVER_NAME}" for person in SHARED_PEOPLE]
    config = bot_config(synapse, bot, workdir / "state", standin_llm.url, allow, [])
    config.update(shared_bot_top)
    proc = ChazbotProcess(workdir, config, env={"CHAZBOT_TEST_MATRIX_PASSWORD": bot.password})
    await proc.start()
    try:
        yield proc, bot
    finally:
        await stop_and_show(proc)


@pytest_asyncio.fixture(loop_scope="module")
async def humans(
    synapse: SynapseServer, matrix_user: Callable[[str], User], tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[Human]]]:
    """``tests.support.synapse.humans`` in the module's loop."""
    async with humans_made(synapse, matrix_user, tmp_path) as make:
        yield make


@pytest_asyncio.fixture(loop_scope="module")
async def chazbot(
    synapse: SynapseServer, matrix_user: Callable[[str], User], tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[SharedBot]]]:
    """``tests.support.synapse.chazbot`` in the module's loop: a bot of the test's own."""
    async with bots_made(synapse, matrix_user, tmp_path) as make:
        yield make


__all__ = [
    "SHARED_PEOPLE",
    "SharedBot",
    "chazbot",
    "humans",
    "shared_bot",
    "shared_bot_top",
    "standin_llm",
]

"""What a few keys that hold read can make a sync server hold (issue #22, item 2).

A real server on loopback, real signed requests. The replay cache used to refuse everyone
(503 for five minutes) once a few keys had filled it: its global cap was five per-key quotas.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chazbot.ledger import KeyPair, Permission
from tests.test_sync_support import Owner, raw_call

READ = Permission.parse("read")


@pytest.fixture
async def owner(tmp_path: Path) -> AsyncIterator[Owner]:
    opened = await Owner.open(tmp_path / "owner.sqlite3", replay_capacity=100, replay_per_key=20)
    yield opened
    await opened.close()


async def test_a_few_keys_cannot_fill_the_replay_cache(owner: Owner) -> None:
    flooders = [KeyPair.generate() for _ in range(5)]
    honest = KeyPair.generate()
    for key in [*flooders, honest]:
        await owner.ledger.set_auth(owner.db, owner.admin, key.public, READ)
    path = owner.path("heads")
    first: dict[str, dict[str, str]] = {}
    for key in flooders:  # each sends more than its quota: 30 live nonces each
        for n in range(30):
            status, answer, headers = await raw_call(owner.server.address, path, b"{}", key)
            assert status == 200, (n, status, answer)
            first.setdefault(key.public, headers)
    assert len(owner.server.replay) <= 100
    # an honest key is served at once, again and again
    for _ in range(10):
        status, answer, _ = await raw_call(owner.server.address, path, b"{}", honest)
        assert status == 200, answer
    # and no nonce dropped to make room can be replayed: the key's floor refuses it
    for key in flooders:
        status, answer, _ = await raw_call(
            owner.server.address, path, b"{}", None, headers=first[key.public]
        )
        assert status == 401 and "replay" in answer["error"], answer

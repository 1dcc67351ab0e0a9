"""The fixed sentences of a forget by meaning, embedded once per embedder and kept (#45):
the first forget of a process embedded all of them (1-8 s); now a peer reads them from its
state directory, or embeds them in the background when it opens, and a restart embeds none.
Real files, the real local embedder."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np
import pytest

import chazbot
from chazbot.agent.meaning_vectors import FIXED, FIXED_VECTORS, FixedVectors, _read, fingerprint
from chazbot.config import AgentConfig, Config, EmbeddingConfig, local_embedder_installed
from chazbot.memory.audience import room_audience
from chazbot.memory.embedders import make_embedder

needs_embedder = pytest.mark.skipif(
    not local_embedder_installed(), reason="the local multilingual embedder is not installed"
)
ANN = "@ann:example.org"


def test_the_fingerprint_is_the_embedder_and_the_sentences() -> None:
    assert fingerprint("local/a") == fingerprint("local/a")
    assert fingerprint("local/a") != fingerprint("local/b")


def test_a_file_that_is_not_whole_and_sound_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "v.npy"
    np.save(path, np.ones((3, 4), np.float32))  # wrong shape
    assert _read(path) is None
    np.save(path, np.ones((len(FIXED), 4), np.float32))  # no unit vectors
    assert _read(path) is None
    path.write_bytes(b"\x93NUMPY garbage")
    assert _read(path) is None
    assert _read(tmp_path / "absent.npy") is None
    unit = np.zeros((len(FIXED), 4), np.float32)
    unit[:, 0] = 1.0
    np.save(path, unit)
    found = _read(path)
    assert found is not None and found.shape == (len(FIXED), 4)


@needs_embedder
async def test_kept_in_the_state_directory_a_restart_embeds_none(tmp_path: Path) -> None:
    embedder = make_embedder(EmbeddingConfig(backend="local"))
    assert embedder is not None
    first = FixedVectors()
    made = await first.warm(embedder, tmp_path)
    assert first.embedded == len(FIXED) and made.shape[0] == len(FIXED)
    (kept,) = tmp_path.glob("*.npy")
    assert kept.stat().st_mode & 0o077 == 0  # the owner's only
    again = FixedVectors()  # another process, as after a restart
    began = time.perf_counter()
    read = (
        await again.of(embedder) if again.kept(embedder) else await again.warm(embedder, tmp_path)
    )
    assert again.embedded == 0 and time.perf_counter() - began < 1.0
    assert np.array_equal(read, made)
    foreign = made.copy()
    foreign[len(FIXED) - 1] = made[0]  # unit vectors of the right shape, but not its own
    np.save(kept, foreign)
    fourth = FixedVectors()
    await fourth.warm(embedder, tmp_path)
    assert fourth.embedded == len(FIXED) and np.array_equal(np.load(kept), made)
    kept.write_bytes(b"broken")  # a torn or foreign file is made again
    third = FixedVectors()
    await third.warm(embedder, tmp_path)
    assert third.embedded == len(FIXED) and _read(kept) is not None


@needs_embedder
async def test_a_peer_makes_them_at_its_start_and_the_first_forget_embeds_none(
    tmp_path: Path,
) -> None:
    cfg = Config(
        state_dir=tmp_path,
        agents=[AgentConfig(name="chaz", capture="messages")],
        embedding=EmbeddingConfig(backend="local"),
    )
    async with chazbot.open(tmp_path, cfg) as peer:
        assert peer.meaning_warm is not None and peer.embedder is not None
        await asyncio.wait_for(asyncio.shield(peer.meaning_warm), 120)
        assert FIXED_VECTORS.kept(peer.embedder)
        assert list((tmp_path / "meaning").glob("*.npy"))
        embedded = FIXED_VECTORS.embedded
        dm = room_audience("dm", [ANN], lambda u: True)
        await peer.chat(
            "Mijn fiets is gestolen, nu loop ik overal.", session="dm", sender=ANN, audience=dm
        )
        await peer.wait_captures()
        await peer.memory.wait_vectors(60)
        reply = await peer.chat(
            "Vergiss bitte das mit meinem Fahrrad.", session="dm", sender=ANN, audience=dm
        )
        assert "fiets" in reply.text, reply.text
        assert FIXED_VECTORS.embedded == embedded  # none embedded on the forget's path

"""``VectorCache`` (#48): each text embedded once per purpose; failures are never kept, a caller
that gives up leaves the embedding to the others, and vectors handed out are read-only."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from chazbot.errors import BackendError
from chazbot.memory.embedders.cache import CacheTuning, VectorCache


class Counting:
    """An embed function: a vector per text from its length and first letter, every call kept;
    ``gate`` (when set) holds each call until it is set, ``fail`` fails the next call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.gate: asyncio.Event | None = None
        self.fail = False

    async def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            self.fail = False
            raise BackendError("embedding API: 500")
        return np.array([[len(t), ord(t[0]), 1.0] for t in texts], dtype=np.float32)


async def test_a_text_is_embedded_once_per_purpose() -> None:
    cache, embed = VectorCache(), Counting()
    first = await cache.query("dog called", embed)
    again = await cache.query("dog called", embed)
    passage = await cache.documents(["dog called"], embed)
    assert embed.calls == [["dog called"], ["dog called"]]  # a query, then a passage
    assert again is first and not first.flags.writeable
    assert passage.shape == (1, 3) and passage.flags.writeable  # a fresh matrix
    with pytest.raises(ValueError):
        first[0] = 0.0


async def test_one_purpose_for_an_api_that_embeds_both_alike() -> None:
    cache, embed = VectorCache(by_purpose=False), Counting()
    await cache.query("dog called", embed)
    await cache.documents(["dog called"], embed)
    assert embed.calls == [["dog called"]]


async def test_a_batch_sends_each_distinct_text_not_kept_once() -> None:
    cache, embed = VectorCache(), Counting()
    await cache.documents(["b"], embed)
    out = await cache.documents(["a", "b", "a", "cc", "a"], embed)
    assert embed.calls == [["b"], ["a", "cc"]]
    assert out[:, 0].tolist() == [1, 1, 1, 2, 1] and out[:, 1].tolist()[:2] == [97, 98]


async def test_texts_under_way_are_waited_for_not_sent_again() -> None:
    cache, embed = VectorCache(), Counting()
    embed.gate = asyncio.Event()
    first = asyncio.ensure_future(cache.query("x", embed))
    second = asyncio.ensure_future(cache.documents(["y"], embed))
    third = asyncio.ensure_future(cache.query("x", embed))
    await asyncio.sleep(0)
    embed.gate.set()
    await asyncio.gather(first, second, third)
    assert first.result() is third.result() and embed.calls == [["x"], ["y"]]


async def test_a_failure_reaches_every_waiter_and_is_not_kept() -> None:
    cache, embed = VectorCache(), Counting()
    embed.gate, embed.fail = asyncio.Event(), True
    both = asyncio.gather(cache.query("x", embed), cache.query("x", embed), return_exceptions=True)
    await asyncio.sleep(0)
    embed.gate.set()
    assert [type(r) for r in await both] == [BackendError, BackendError]
    assert len(cache) == 0
    await cache.query("x", embed)  # tried again, now it works
    assert embed.calls == [["x"], ["x"]] and len(cache) == 1


async def test_a_caller_that_gives_up_leaves_the_embedding_to_the_others() -> None:
    cache, embed = VectorCache(), Counting()
    embed.gate = asyncio.Event()
    impatient = asyncio.ensure_future(cache.query("x", embed))
    patient = asyncio.ensure_future(cache.query("x", embed))
    await asyncio.sleep(0)
    impatient.cancel()  # a query's timeout
    await asyncio.sleep(0)
    embed.gate.set()
    assert (await patient).tolist() == [1.0, 120.0, 1.0]
    assert impatient.cancelled() and embed.calls == [["x"]] and len(cache) == 1


async def test_the_least_recently_used_goes_past_the_entries() -> None:
    cache, embed = VectorCache(CacheTuning(entries=2)), Counting()
    for text in ("a", "b", "a", "c"):  # "a" used again: "b" is the oldest when "c" comes
        await cache.query(text, embed)
    await cache.query("a", embed)
    await cache.query("b", embed)
    assert embed.calls == [["a"], ["b"], ["c"], ["b"]]
    zero, embed = VectorCache(CacheTuning(entries=0)), Counting()
    await zero.query("a", embed)
    await zero.query("a", embed)
    assert embed.calls == [["a"], ["a"]] and len(zero) == 0

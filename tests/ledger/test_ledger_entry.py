"""Signed entries: fixed test vectors, forgeries and tampering refused, canonical encoding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chazbot.errors import InputError, IntegrityError
from chazbot.ledger import Entry, KeyPair, Ledger, Permission, canonical, content_id
from chazbot.ledger.auth import AUTH_STORE, auth_op

# ed25519 is deterministic, so a fixed key, timestamp and ops give fixed bytes and a fixed id.
# These literals were computed once; any change to the encoding or the id breaks them (and
# breaks every peer that has stored entries).
FIXED_KEY = KeyPair.from_private_bytes(bytes(range(32)))
FIXED_PUBLIC = "ed25519:03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
ROOT_BYTES = (
    b'{"author":"ed25519:03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8",'
    b'"db":null,"height":0,"ops":{"_auth":[{"key":"ed25519:03a107bff3ce10be1d70dd18e74bc0996'
    b'7e4d6309ba50d5f1ddc8664125531b8","op":"set_key","perm":"admin","prio":0,"status":"activ'
    b'e"}],"meta":[{"field":"name","op":"set","value":"bank \xc3\xbc"}]},"parents":[],"sig":"33e'
    b"97502d2fb387c6438824557ba266429b488ea2a462c3a13ce1b51b847da7f989132b5ca3f161824fcad6d9c58c"
    b'e73687b7c73465e65a29880a547f7ffc505","ts":1700000000000000,"v":1}'
)
ROOT_ID = "sha256:1246d8363885108d8f5af3ffb80b4c8b49fea16b81d1a27ab0bb314b590b0e3f"
CHILD_BYTES = (
    b'{"author":"ed25519:03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8",'
    b'"db":"sha256:1246d8363885108d8f5af3ffb80b4c8b49fea16b81d1a27ab0bb314b590b0e3f","height":1,'
    b'"ops":{"memory":[{"op":"insert","row":{"key":"colour","n":-3,"none":null,"ok":true,"tags":'
    b'["a","b"],"value":"blue"}}]},"parents":["sha256:1246d8363885108d8f5af3ffb80b4c8b49fea16b81'
    b'd1a27ab0bb314b590b0e3f"],"sig":"45f1e97da1e6462277055642eff76982cb537430d4e18038413a7810fa'
    b"b48a556a5c58d4786f637256baf5d602e9faa65d5f83e0cb52e46781c70bbc80337f07"
    b'","ts":1700000000000001,"v":1}'
)
CHILD_ID = "sha256:ccbd216d61996e41cc4fcb83c307ed60c0211c1150807ecebc9dab0c5663b04d"


def fixed_root() -> Entry:
    ops: dict[str, list[Any]] = {
        AUTH_STORE: [auth_op(FIXED_KEY.public, Permission.parse("admin", 0))],
        "meta": [{"op": "set", "field": "name", "value": "bank ü"}],
    }
    return Entry.create(FIXED_KEY, None, [], 0, ops, ts=1_700_000_000_000_000)


def fixed_child() -> Entry:
    row = {"key": "colour", "value": "blue", "tags": ["a", "b"], "n": -3, "ok": True, "none": None}
    ops: dict[str, list[Any]] = {"memory": [{"op": "insert", "row": row}]}
    return Entry.create(FIXED_KEY, ROOT_ID, [ROOT_ID], 1, ops, ts=1_700_000_000_000_001)


def reencode(entry: Entry, **changes: Any) -> bytes:
    """The entry's JSON with some fields replaced, re-encoded canonically (sig untouched)."""
    body = json.loads(entry.data)
    body.update(changes)
    return canonical(body)


# ---- test vectors -------------------------------------------------------------------------


def test_fixed_key_has_fixed_public_name() -> None:
    assert FIXED_KEY.public == FIXED_PUBLIC
    assert "KeyPair(ed25519:" in repr(FIXED_KEY) and FIXED_KEY.private_bytes().hex() not in repr(
        FIXED_KEY
    )


def test_fixed_root_encodes_to_fixed_bytes_and_id() -> None:
    root = fixed_root()
    assert root.data == ROOT_BYTES
    assert root.id == ROOT_ID
    assert content_id(ROOT_BYTES) == ROOT_ID
    assert root.db_id == ROOT_ID and root.is_root


def test_fixed_child_encodes_to_fixed_bytes_and_id() -> None:
    child = fixed_child()
    assert child.data == CHILD_BYTES
    assert child.id == CHILD_ID
    assert child.db_id == ROOT_ID and not child.is_root


@pytest.mark.parametrize("make", [fixed_root, fixed_child])
def test_decode_round_trip(make: Any) -> None:
    entry = make()
    decoded = Entry.decode(entry.data)
    assert decoded == entry
    assert Entry.decode(entry.data, entry.id) == entry
    with pytest.raises(IntegrityError, match="id mismatch"):
        Entry.decode(entry.data, ROOT_ID if entry.id != ROOT_ID else CHILD_ID)


# ---- forgery and tampering ----------------------------------------------------------------


def forged_sig(entry: Entry) -> bytes:
    """Same content claiming the same author, signed by another key."""
    other = KeyPair.from_private_bytes(bytes(range(1, 33)))
    body = json.loads(entry.data)
    del body["sig"]
    return canonical({**body, "sig": other.sign(canonical(body)).hex()})


def flipped_sig(entry: Entry) -> bytes:
    sig = entry.sig
    return reencode(entry, sig=sig[:40] + ("0" if sig[40] != "0" else "1") + sig[41:])


def tampered_ops(entry: Entry) -> bytes:
    return reencode(
        entry, ops={"memory": [{"op": "insert", "row": {"key": "colour", "value": "red"}}]}
    )


def other_author(entry: Entry) -> bytes:
    other = KeyPair.from_private_bytes(bytes(range(1, 33)))
    return reencode(entry, author=other.public)


def uppercase_sig(entry: Entry) -> bytes:
    # Same signature bytes, different text: would give a second id for one signed entry.
    return reencode(entry, sig=entry.sig.upper())


def spaced_json(entry: Entry) -> bytes:
    return json.dumps(json.loads(entry.data), sort_keys=True, ensure_ascii=False).encode()


def unsorted_json(entry: Entry) -> bytes:
    body = json.loads(entry.data)
    return json.dumps(
        dict(reversed(body.items())), separators=(",", ":"), ensure_ascii=False
    ).encode()


def ascii_escaped(entry: Entry) -> bytes:
    body = json.loads(entry.data)
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def trailing_newline(entry: Entry) -> bytes:
    return entry.data + b"\n"


BAD_SIGNATURE = [forged_sig, flipped_sig, tampered_ops, other_author]
NOT_CANONICAL = [spaced_json, unsorted_json, trailing_newline]


@pytest.mark.parametrize("forge", BAD_SIGNATURE)
def test_bad_signature_refused_by_decode(forge: Any) -> None:
    data = forge(fixed_child())
    assert data != CHILD_BYTES
    with pytest.raises(IntegrityError, match="bad signature"):
        Entry.decode(data)


@pytest.mark.parametrize("forge", [*NOT_CANONICAL, ascii_escaped])
def test_non_canonical_bytes_refused_by_decode(forge: Any) -> None:
    entry = fixed_root()  # has a non-ASCII value, so ascii_escaped changes the bytes
    data = forge(entry)
    assert data != entry.data and json.loads(data) == json.loads(entry.data)
    with pytest.raises(IntegrityError, match="canonical"):
        Entry.decode(data)


def test_uppercase_signature_refused() -> None:
    with pytest.raises(IntegrityError, match="sig must be 128 lowercase hex digits"):
        Entry.decode(uppercase_sig(fixed_child()))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"null",
        b"[]",
        b"\xff\xfe",
        b"[" * 100_000 + b"]" * 100_000,  # deeper than the JSON parser's recursion limit
        b'{"v":1}',
        b'"\\ud800"',
    ],
)
def test_garbage_is_an_integrity_error(data: bytes) -> None:
    with pytest.raises(IntegrityError):
        Entry.decode(data)


async def counts(ledger: Ledger) -> dict[str, int]:
    tables = ("entries", "rows", "fields", "auth", "tips", "auth_heads", "field_sets")
    return {t: (await ledger.local(f"SELECT count(*) FROM {t}"))[0][0] for t in tables}


@pytest.mark.parametrize(
    "forge", [*BAD_SIGNATURE, *NOT_CANONICAL, uppercase_sig], ids=lambda f: f.__name__
)
async def test_ingest_refuses_forgeries_and_stores_nothing(tmp_path: Path, forge: Any) -> None:
    ledger = await Ledger.open(tmp_path / "state.db")
    try:
        result = await ledger.ingest([fixed_root()])
        assert result.accepted == [ROOT_ID]
        before = await counts(ledger)
        result = await ledger.ingest([forge(fixed_child())])
        assert result.accepted == []
        assert len(result.rejected) == 1
        assert await counts(ledger) == before
        assert await ledger.tips(ROOT_ID) == [ROOT_ID]
        assert await ledger.rows(ROOT_ID, "memory") == []
        # the genuine entry is still accepted afterwards
        result = await ledger.ingest([fixed_child().data])
        assert result.accepted == [CHILD_ID]
        assert [r.data["value"] for r in await ledger.rows(ROOT_ID, "memory")] == ["blue"]
    finally:
        await ledger.close()


async def test_ingest_with_garbage_keeps_the_good_entries(tmp_path: Path) -> None:
    ledger = await Ledger.open(tmp_path / "state.db")
    try:
        garbage = [b"[" * 100_000, b"\xff", flipped_sig(fixed_child())]
        result = await ledger.ingest([*garbage, fixed_root().data, fixed_child().data])
        assert sorted(result.accepted) == sorted([ROOT_ID, CHILD_ID])
        assert len(result.rejected) == 3
        assert await ledger.count_entries() == 2
    finally:
        await ledger.close()


# ---- shape checks on create: a local write never makes an entry its peers refuse ----------


@pytest.mark.parametrize("store", ["memory\n", "bad name", "", "9lives", "x" * 200])
def test_create_refuses_bad_store_names(store: str) -> None:
    with pytest.raises(InputError, match="store name"):
        Entry.create(FIXED_KEY, ROOT_ID, [ROOT_ID], 1, {store: []}, ts=1)


def test_create_refuses_too_many_parents() -> None:
    parents = [content_id(str(i).encode()) for i in range(65)]
    with pytest.raises(InputError, match="parents"):
        Entry.create(FIXED_KEY, ROOT_ID, parents, 1, {}, ts=1)


def test_create_refuses_lone_surrogates_and_floats() -> None:
    with pytest.raises(InputError, match="Unicode"):
        Entry.create(FIXED_KEY, None, [], 0, {"m": [{"op": "insert", "row": {"t": "\ud800"}}]})
    with pytest.raises(InputError, match="float"):
        Entry.create(FIXED_KEY, None, [], 0, {"m": [{"op": "insert", "row": {"t": 0.5}}]})


# ---- canonical encoding properties --------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_canonical_round_trip(value: Any) -> None:
    data = canonical(value)
    assert json.loads(data) == value
    assert canonical(json.loads(data)) == data  # a fixed point: decoding and re-encoding
    assert (
        data
        == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    )


@settings(max_examples=100, deadline=None)
@given(json_values, st.floats(allow_nan=True))
def test_canonical_refuses_floats_anywhere(value: Any, number: float) -> None:
    with pytest.raises(InputError, match="float"):
        canonical({"a": [value, {"b": number}]})


@settings(max_examples=50, deadline=None)
@given(json_values)
def test_entry_round_trip_with_random_ops(row: Any) -> None:
    entry = Entry.create(
        FIXED_KEY, ROOT_ID, [ROOT_ID], 1, {"memory": [{"op": "insert", "row": {"v": row}}]}, ts=5
    )
    assert Entry.decode(entry.data, entry.id) == entry
    assert entry.id == content_id(entry.data)

"""Signed, content-addressed entries.

An entry is the canonical JSON (see ``encoding``) of::

    {"v": 1, "db": <db id or null for a root>, "parents": [<ids, sorted>], "height": n,
     "ops": {<store>: [<operation>, ...]}, "author": "ed25519:…", "ts": <µs since epoch UTC>,
     "sig": "<hex ed25519 signature>"}

The signature covers the canonical bytes of everything but ``sig``. The entry id is the
content id of the canonical bytes including ``sig``; a database's id is its root entry's id.
``height`` is 0 for a root and one more than the highest parent otherwise.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from chazbot.errors import InputError, IntegrityError
from chazbot.ledger.encoding import canonical, content_id, encode_checked, is_content_id
from chazbot.ledger.keys import KeyPair, verify

VERSION = 1
MAX_ENTRY_BYTES = 4 * 1024 * 1024
MAX_PARENTS = 64
MAX_STORES = 32
MAX_OPS = 4096
MAX_INT = 2**53  # heights and timestamps stay below this: exact in JSON, SQLite and floats
STORE_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_.:/@+-]{0,127}\Z")  # \Z: no trailing "\n"
HEX_DIGITS = frozenset("0123456789abcdef")


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass(frozen=True)
class Entry:
    """One signed entry. ``data`` is its canonical bytes, ``id`` their content id."""

    id: str
    db: str | None
    parents: tuple[str, ...]
    height: int
    ops: dict[str, list[Any]]
    author: str
    ts: int
    sig: str
    data: bytes

    @property
    def db_id(self) -> str:
        """The database this entry belongs to (a root belongs to itself)."""
        return self.db if self.db is not None else self.id

    @property
    def is_root(self) -> bool:
        return self.db is None

    def sort_key(self) -> tuple[int, str]:
        return (self.height, self.id)

    @classmethod
    def create(
        cls,
        key: KeyPair,
        db: str | None,
        parents: list[str],
        height: int,
        ops: dict[str, list[Any]],
        ts: int | None = None,
    ) -> Entry:
        # The checks ``decode`` makes on shape, so a local write never makes an entry that
        # its peers (or ``verify``) would refuse.
        if len(set(parents)) != len(parents) or len(parents) > MAX_PARENTS:
            raise InputError(f"an entry has at most {MAX_PARENTS} distinct parents")
        if ts is not None and not 0 <= ts < MAX_INT:
            raise InputError(f"an entry's timestamp must be from 0 to 2^53, got {ts}")
        _check_counts(ops, InputError)
        for store, store_ops in ops.items():
            if not isinstance(store, str) or not STORE_NAME.fullmatch(store):
                raise InputError(f"bad store name {str(store)[:80]!r}")
            if not isinstance(store_ops, list):
                raise InputError(f"store {store}: operations must be a list")
        body: dict[str, Any] = {
            "v": VERSION,
            "db": db,
            "parents": sorted(parents),
            "height": height,
            "ops": ops,
            "author": key.public,
            "ts": now_us() if ts is None else ts,
        }
        sig = key.sign(canonical(body)).hex()
        body["sig"] = sig
        data = encode_checked(body)  # the body was checked above; sig is hex
        if len(data) > MAX_ENTRY_BYTES:
            raise InputError(f"entry is {len(data)} bytes, more than {MAX_ENTRY_BYTES}")
        return cls(
            content_id(data),
            db,
            tuple(body["parents"]),
            height,
            ops,
            key.public,
            body["ts"],
            sig,
            data,
        )

    @classmethod
    def decode(cls, data: bytes, expected_id: str | None = None) -> Entry:
        """Parse and check an entry's shape, id and signature (not its authorisation)."""
        if len(data) > MAX_ENTRY_BYTES:
            raise IntegrityError(f"entry is {len(data)} bytes, more than {MAX_ENTRY_BYTES}")
        try:
            body = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise IntegrityError("entry is not valid JSON") from exc
        if not isinstance(body, dict) or set(body) != {
            "v",
            "db",
            "parents",
            "height",
            "ops",
            "author",
            "ts",
            "sig",
        }:
            raise IntegrityError("entry does not have exactly the fields of a version 1 entry")
        _check_shape(body)
        db, parents, height, ops = body["db"], body["parents"], body["height"], body["ops"]
        author, ts, sig = body["author"], body["ts"], body["sig"]
        _check_counts(ops, IntegrityError)
        if (db is None) != (not parents) or (db is None) != (height == 0):
            raise IntegrityError("a root entry has no db and no parents; others have both")
        try:
            if canonical(body) != data:
                raise IntegrityError("entry is not in canonical form")
            unsigned = dict(body)
            del unsigned["sig"]
            payload = encode_checked(unsigned)  # checked with the whole body above
        except InputError as exc:
            raise IntegrityError(f"entry is not canonical JSON: {exc}") from exc
        eid = content_id(data)
        if expected_id is not None and eid != expected_id:
            raise IntegrityError(f"entry id mismatch: stored as {expected_id}, content is {eid}")
        try:
            raw_sig = bytes.fromhex(sig)
        except ValueError as exc:
            raise IntegrityError("entry signature is not hex") from exc
        if not verify(author, raw_sig, payload):
            raise IntegrityError(f"entry {eid[:19]}… has a bad signature")
        return cls(eid, db, tuple(parents), height, ops, author, ts, sig, data)


def _check_shape(body: dict[str, Any]) -> None:
    """Each field of a decoded entry within its form and bounds; the first that is not is
    named in the IntegrityError, with the bound it broke (SPEC §2: a named reason)."""

    def bad(text: str) -> IntegrityError:
        return IntegrityError(f"entry {text}")

    if body["v"] != VERSION or type(body["v"]) is not int:
        raise bad(f"v must be {VERSION} (version 1 entries only), not {str(body['v'])[:20]!r}")
    db = body["db"]
    if db is not None and not is_content_id(db):
        raise bad("db must be null (a root) or sha256:<64 lowercase hex digits>")
    parents = body["parents"]
    if not isinstance(parents, list):
        raise bad("parents must be a list of entry ids")
    if len(parents) > MAX_PARENTS:
        raise bad(f"parents holds {len(parents)} ids, at most {MAX_PARENTS}")
    if not all(is_content_id(p) for p in parents):
        raise bad("parents must be entry ids (sha256:<64 lowercase hex digits>)")
    if parents != sorted(set(parents)):
        raise bad("parents must be sorted and distinct")
    for name in ("height", "ts"):
        value = body[name]
        if type(value) is not int:
            raise bad(f"{name} must be an integer, not {type(value).__name__}")
        if not 0 <= value < MAX_INT:
            raise bad(f"{name} must be from 0 to 2^53 - 1, got {str(value)[:24]}")
    ops = body["ops"]
    if not isinstance(ops, dict):
        raise bad("ops must be an object of store name -> list of operations")
    for store, store_ops in ops.items():
        if not STORE_NAME.fullmatch(store):
            raise bad(
                f"has a bad store name {store[:40]!r} (a letter or _, then up to 127 of "
                "letters, digits and _.:/@+-)"
            )
        if not isinstance(store_ops, list):
            raise bad(f"store {store}: operations must be a list")
    if not isinstance(body["author"], str):
        raise bad("author must be a string (ed25519:<64 hex digits>)")
    sig = body["sig"]
    if not (isinstance(sig, str) and len(sig) == 128 and HEX_DIGITS.issuperset(sig)):
        # lowercase only: one signature, one entry id
        raise bad("sig must be 128 lowercase hex digits")


def _check_counts(
    ops: dict[str, list[Any]], error: type[InputError] | type[IntegrityError]
) -> None:
    if len(ops) > MAX_STORES:
        raise error(f"an entry touches at most {MAX_STORES} stores, this one {len(ops)}")
    total = sum(len(v) for v in ops.values() if isinstance(v, list))
    if total > MAX_OPS:
        raise error(f"an entry carries at most {MAX_OPS} operations, this one {total}")

"""The sync wire protocol, sans I/O: signed requests, the replay cache, body checks.

Every request carries four headers::

    Eidetica-Key:        ed25519:<64 hex>      the requesting key (a peer key)
    Eidetica-Time:       <ms since the epoch>  refused when more than 5 minutes off
    Eidetica-Nonce:      <32 hex>              16 random bytes, refused when seen before
    Eidetica-Signature:  <128 hex>             ed25519 over ``signing_payload`` below

The signature covers the method, the raw path with its query string, the time, the nonce
and the SHA-256 of the body, so no part of a request can be changed or replayed (within
the window the server remembers nonces; outside it the time check refuses). It does not
name the server: a request captured on the wire could be replayed to another server within
five minutes. Sync runs over plain HTTP, so entries are public to anyone on the path anyway;
what signatures protect is who may read a database from a server and who is asking.

Bodies are JSON objects; entries travel as base64 of their canonical bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chazbot.errors import InputError, PermissionDenied, Unavailable
from chazbot.ledger.encoding import content_id
from chazbot.ledger.keys import KeyPair, parse_public_key, verify

PROTOCOL = "eidetica-sync/1"
KEY_HEADER = "Eidetica-Key"
TIME_HEADER = "Eidetica-Time"
NONCE_HEADER = "Eidetica-Nonce"
SIGNATURE_HEADER = "Eidetica-Signature"

MAX_SKEW_S = 300.0
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_BATCH_ENTRIES = 1000
MAX_BATCH_BYTES = 4 * 1024 * 1024  # raw entry bytes per response or push (base64 adds 1/3)
MAX_WAIT_S = 60.0
_HEX = frozenset("0123456789abcdef")


class Unauthenticated(PermissionDenied):
    """A request's signature, time or nonce is refused (HTTP 401)."""


class Busy(Unavailable):
    """The server cannot take the request now (HTTP 503); the client should retry later."""


def signing_payload(method: str, path: str, ts_ms: int, nonce: str, body: bytes) -> bytes:
    """The bytes a request signature covers."""
    digest = hashlib.sha256(body).hexdigest()
    return f"{PROTOCOL}\n{method.upper()}\n{path}\n{ts_ms}\n{nonce}\n{digest}".encode()


def sign_request(key: KeyPair, method: str, path: str, body: bytes, now_s: float) -> dict[str, str]:
    """Headers that sign a request by ``key`` at ``now_s`` (seconds since the epoch)."""
    ts_ms = int(now_s * 1000)
    nonce = secrets.token_hex(16)
    sig = key.sign(signing_payload(method, path, ts_ms, nonce, body)).hex()
    return {
        KEY_HEADER: key.public,
        TIME_HEADER: str(ts_ms),
        NONCE_HEADER: nonce,
        SIGNATURE_HEADER: sig,
    }


class ReplayCache:
    """Nonces seen within the time window, bounded; full means busy, never forgetful.

    A nonce is kept until its request's time leaves the window: after that the time check
    refuses a replay by itself. When ``capacity`` nonces are all still live, new requests
    are refused (``Busy``) rather than evicting a live nonce, which would reopen a replay.
    """

    def __init__(self, capacity: int = 100_000, window_s: float = MAX_SKEW_S) -> None:
        self.capacity = capacity
        self.window_s = window_s
        self._seen: set[str] = set()
        self._expiry: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._seen)

    def add(self, token: str, ts_s: float, now_s: float) -> None:
        """Remember ``token``; Unauthenticated if seen already, Busy if the cache is full."""
        while self._expiry and self._expiry[0][0] < now_s:
            _, old = heapq.heappop(self._expiry)
            self._seen.discard(old)
        if token in self._seen:
            raise Unauthenticated("request replayed (nonce already used)")
        if len(self._seen) >= self.capacity:
            raise Busy("too many requests; try again later")
        self._seen.add(token)
        heapq.heappush(self._expiry, (ts_s + self.window_s, token))


def verify_request(
    headers: Mapping[str, str],
    method: str,
    path: str,
    body: bytes,
    now_s: float,
    replay: ReplayCache,
) -> str:
    """Check a request's signature headers; return the requesting public key.

    Raises Unauthenticated (missing or bad headers, a time outside the window, a bad
    signature, a replayed nonce) or Busy (the replay cache is full).
    """
    key = headers.get(KEY_HEADER, "")
    ts_text = headers.get(TIME_HEADER, "")
    nonce = headers.get(NONCE_HEADER, "")
    sig_text = headers.get(SIGNATURE_HEADER, "")
    if not (key and ts_text and nonce and sig_text):
        raise Unauthenticated("request is not signed (Eidetica-Key/Time/Nonce/Signature)")
    try:
        parse_public_key(key)
    except InputError:
        raise Unauthenticated("request key is not ed25519:<64 hex digits>") from None
    if not (ts_text.isascii() and ts_text.isdigit() and len(ts_text) <= 16):
        raise Unauthenticated("request time is not milliseconds since the epoch")
    if len(nonce) != 32 or not _HEX.issuperset(nonce):
        raise Unauthenticated("request nonce is not 32 lowercase hex digits")
    if len(sig_text) != 128 or not _HEX.issuperset(sig_text):
        raise Unauthenticated("request signature is not 128 lowercase hex digits")
    ts_ms = int(ts_text)
    if abs(ts_ms / 1000 - now_s) > replay.window_s:
        raise Unauthenticated("request time is more than 5 minutes off; check the clocks")
    if not verify(key, bytes.fromhex(sig_text), signing_payload(method, path, ts_ms, nonce, body)):
        raise Unauthenticated("request signature does not verify")
    replay.add(f"{key} {nonce}", ts_ms / 1000, now_s)
    return key


# ---- bodies ----------------------------------------------------------------------------


def parse_body(body: bytes) -> dict[str, Any]:
    """A request or response body: one JSON object (empty body = ``{}``)."""
    if not body:
        return {}
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise InputError("body is not valid JSON") from None
    if not isinstance(value, dict):
        raise InputError("body must be a JSON object")
    return value


def get_int(body: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = body.get(name, default)
    if type(value) is not int or not low <= value <= high:
        raise InputError(f"{name} must be an integer from {low} to {high}")
    return value


def get_seconds(body: Mapping[str, Any], name: str, default: float, high: float) -> float:
    value = body.get(name, default)
    if type(value) not in (int, float) or not 0 <= value <= high:
        raise InputError(f"{name} must be a number of seconds from 0 to {high:g}")
    return float(value)


def get_str(body: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> str:
    value = body.get(name)
    if value not in allowed:
        raise InputError(f"{name} must be one of: {', '.join(allowed)}")
    return str(value)


def encode_entry(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode_entry(text: Any) -> bytes:
    if not isinstance(text, str):
        raise InputError("an entry must be a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InputError("an entry is not valid base64") from None


def get_entries(body: Mapping[str, Any], name: str = "entries") -> list[bytes]:
    items = body.get(name)
    if not isinstance(items, list) or len(items) > MAX_BATCH_ENTRIES:
        raise InputError(f"{name} must be a list of at most {MAX_BATCH_ENTRIES} base64 entries")
    return [decode_entry(item) for item in items]


def entry_db(data: bytes) -> str | None:
    """The database a raw entry claims to belong to, or None if it is not even JSON.

    A cheap look before full validation, so a peer can refuse entries of another database
    sent under this one's name (``Ledger.ingest`` checks everything else).
    """
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(body, dict):
        return None
    db = body.get("db")
    if db is None:
        return content_id(data)  # a root entry is its own database
    return db if isinstance(db, str) else None


@dataclass
class SyncCounters:
    """What a sync server or replicator has moved, for logs and metrics.

    ``sent``: entries the other side accepted from us. ``received``: entries we accepted.
    ``refused``: entries refused (by us on receipt, or by the remote on push).
    ``duplicates``: entries that arrived but were already known. ``requests_refused``:
    requests refused for a bad signature, time or nonce (server). ``errors``: failed
    exchanges (client: connection errors and error answers; server: error answers).
    """

    sent: int = 0
    received: int = 0
    refused: int = 0
    duplicates: int = 0
    requests_refused: int = 0
    errors: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))

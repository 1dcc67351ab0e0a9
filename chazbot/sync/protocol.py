"""The sync wire protocol, sans I/O: signed requests, the replay cache, body checks.

Every request carries six headers::

    Eidetica-Protocol:   eidetica-sync/2       the protocol both sides must speak
    Eidetica-Server:     https:<host>:<port>   the server the request is for (its address)
    Eidetica-Key:        ed25519:<64 hex>      the requesting key (a peer key)
    Eidetica-Time:       <ms since the epoch>  refused when more than 5 minutes off
    Eidetica-Nonce:      <32 hex>              16 random bytes, refused when seen before
    Eidetica-Signature:  <128 hex>             ed25519 over ``signing_payload`` below

The signature covers the protocol, the server, the method, the raw path with its query
string, the time, the nonce and the SHA-256 of the body, so no part of a request can be
changed or replayed (within the window the server remembers nonces; outside it the time
check refuses).

**A request names its server** (issue #47): the client signs the peer address it sends the
request to (``canonical_address``: the form both sides compare), and a server refuses a
request signed for any address that is not one of its own (``Misdirected``, 401, counted).
So a peer M that receives another peer V's requests (V imported a ticket naming M) cannot
send them on to a third peer O and read O's databases with V's key: O is not at M's
address. The address, not the server's key, is what is bound: a client learns a key only
from whoever answers at an address, and M could pass O's key off as its own; what M cannot
do is receive what was sent to O's address. Answers carry ``Eidetica-Protocol`` too, so the
client tells a chazbot peer from any other service. A request without the protocol header
(an older chazbot, ``eidetica-sync/1``) is refused with 426 and a line saying so.

Bodies are JSON objects, declared in ``chazbot.sync.wire``; entries travel as base64 of
their canonical bytes.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import secrets
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from chazbot.errors import InputError, PermissionDenied, Unavailable
from chazbot.ledger.encoding import content_id
from chazbot.ledger.keys import KeyPair, parse_public_key, verify
from chazbot.sync.tickets import canonical_address

PROTOCOL = "eidetica-sync/2"
OLD_PROTOCOL = "eidetica-sync/1"
PROTOCOL_HEADER = "Eidetica-Protocol"
SERVER_HEADER = "Eidetica-Server"
KEY_HEADER = "Eidetica-Key"
TIME_HEADER = "Eidetica-Time"
NONCE_HEADER = "Eidetica-Nonce"
SIGNATURE_HEADER = "Eidetica-Signature"

MAX_SKEW_S = 300.0
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_BATCH_ENTRIES = 1000
MAX_BATCH_BYTES = 4 * 1024 * 1024  # raw entry bytes per response or push (base64 adds 1/3)
MAX_WAIT_S = 60.0
BODY_LIMITS = {  # bytes of body each endpoint takes, checked against Content-Length first
    "heads": 1024,
    "entries": 1024,
    "access": 1024,
    "have": 128 * 1024,  # 1000 ids of 71 characters, quoted
    "push": MAX_BODY_BYTES,  # a batch of MAX_BATCH_BYTES in base64, with room to spare
}
_HEX = frozenset("0123456789abcdef")


class Unauthenticated(PermissionDenied):
    """A request's signature, time or nonce is refused (HTTP 401)."""


class Misdirected(Unauthenticated):
    """A request signed for another server (HTTP 401, counted as ``misdirected``)."""


class ProtocolMismatch(InputError):
    """A request in another version of the protocol (HTTP 426)."""


class Busy(Unavailable):
    """The server cannot take the request now (HTTP 503); the client should retry later."""


class RateLimited(Busy):
    """Too many requests from this address or key (HTTP 429); retry later."""


def signing_payload(
    server: str, method: str, path: str, ts_ms: int, nonce: str, body: bytes
) -> bytes:
    """The bytes a request signature covers (``server``: its canonical address)."""
    digest = hashlib.sha256(body).hexdigest()
    lines = (PROTOCOL, server, method.upper(), path, str(ts_ms), nonce, digest)
    return "\n".join(lines).encode()


def sign_request(
    key: KeyPair, method: str, path: str, body: bytes, now_s: float, *, server: str
) -> dict[str, str]:
    """Headers that sign a request by ``key`` at ``now_s`` (seconds since the epoch) for
    the server at the peer address ``server``."""
    ts_ms = int(now_s * 1000)
    nonce = secrets.token_hex(16)
    server = canonical_address(server)
    sig = key.sign(signing_payload(server, method, path, ts_ms, nonce, body)).hex()
    return {
        PROTOCOL_HEADER: PROTOCOL,
        SERVER_HEADER: server,
        KEY_HEADER: key.public,
        TIME_HEADER: str(ts_ms),
        NONCE_HEADER: nonce,
        SIGNATURE_HEADER: sig,
    }


class ReplayCache:
    """Nonces seen within the time window, bounded, never full for anyone.

    A nonce is kept until its request's time leaves the window: after that the time check
    refuses a replay by itself. Room is made by dropping the *oldest* nonce of one key: that
    key's own when it holds ``per_key`` of them, else, when all ``capacity`` are taken, the
    busiest key's. Dropping a nonce would reopen its replay, so each key has a **floor**:
    the newest request time dropped from it; a request of that key at or below its floor is
    refused as a replay (until the floor leaves the window). So a few keys holding read
    cannot lock the others out (issue #22: the cap used to be five quotas, and full meant
    503 for everyone for five minutes): the keys that pay for a flood are the flooding ones,
    whose old requests still in flight may be refused. The server records a nonce only after
    the signature verifies and only for a key that holds something here (a grant or an
    access request), so keys that hold nothing never reach it.
    """

    def __init__(
        self, capacity: int = 100_000, window_s: float = MAX_SKEW_S, per_key: int = 2_000
    ) -> None:
        self.capacity = capacity
        self.window_s = window_s
        self.per_key = max(1, min(per_key, capacity))
        self._seen: set[str] = set()
        self._by_key: dict[str, list[tuple[float, str]]] = {}  # heap of (ts, nonce) per key
        self._count: dict[str, int] = {}
        self._floor: dict[str, float] = {}
        self._expiry: list[tuple[float, str, str]] = []  # (ts, key, nonce); dropped ones stay
        self.dropped = 0  # nonces dropped to make room (a flood under way)

    def __len__(self) -> int:
        return len(self._seen)

    def _expire(self, now_s: float) -> None:
        oldest = now_s - self.window_s
        while self._expiry and self._expiry[0][0] < oldest:
            _, key, _ = heapq.heappop(self._expiry)
            heap = self._by_key.get(key)
            while heap and heap[0][0] < oldest:
                self._forget(key)
                heap = self._by_key.get(key)
        if self._floor and len(self._floor) > 64:
            self._floor = {k: f for k, f in self._floor.items() if f >= oldest}
        if len(self._expiry) > 2 * self.capacity + 1024:  # dropped nonces piled up: rebuild
            self._expiry = [(ts, k, n) for k, heap in self._by_key.items() for ts, n in heap]
            heapq.heapify(self._expiry)

    def _forget(self, key: str) -> tuple[float, str]:
        """Remove ``key``'s oldest live nonce; return it."""
        heap = self._by_key[key]
        ts, nonce = heapq.heappop(heap)
        self._seen.discard(f"{key} {nonce}")
        left = self._count[key] - 1
        if left:
            self._count[key] = left
        else:
            del self._count[key], self._by_key[key]
        return ts, nonce

    def _drop_oldest(self, key: str) -> None:
        ts, _ = self._forget(key)
        self._floor[key] = max(ts, self._floor.get(key, ts))
        self.dropped += 1

    def _too_old(self, key: str, ts_s: float | None, now_s: float) -> bool:
        floor = self._floor.get(key)
        return floor is not None and ts_s is not None and ts_s <= floor >= now_s - self.window_s

    def seen(self, key: str, nonce: str, now_s: float, ts_s: float | None = None) -> bool:
        """Whether ``key``'s ``nonce`` (sent at ``ts_s``) would be a replay, recording nothing."""
        self._expire(now_s)
        return f"{key} {nonce}" in self._seen or self._too_old(key, ts_s, now_s)

    def add(self, key: str, nonce: str, ts_s: float, now_s: float) -> None:
        """Remember a nonce, making room as the class doc says; Unauthenticated if it is a
        replay (seen, or at or below its key's floor)."""
        self._expire(now_s)
        token = f"{key} {nonce}"
        if token in self._seen or self._too_old(key, ts_s, now_s):
            raise Unauthenticated("request replayed (nonce already used, or older than allowed)")
        if self._count.get(key, 0) >= self.per_key:
            self._drop_oldest(key)
        elif len(self._seen) >= self.capacity:
            self._drop_oldest(max(self._count, key=self._count.__getitem__))
        self._seen.add(token)
        heapq.heappush(self._by_key.setdefault(key, []), (ts_s, nonce))
        self._count[key] = self._count.get(key, 0) + 1
        heapq.heappush(self._expiry, (ts_s, key, nonce))


@dataclass(frozen=True)
class SignedHeaders:
    """A request's signature headers, checked for form and time (not yet the signature)."""

    key: str
    ts_ms: int
    nonce: str
    signature: bytes
    server: str


def check_headers(
    headers: Mapping[str, str],
    now_s: float,
    window_s: float = MAX_SKEW_S,
    servers: Sequence[str] = (),
) -> SignedHeaders:
    """Check the signature headers' form, the protocol, the server the request names (one
    of ``servers``, canonical addresses, the one it is known by first) and the time window,
    before any body is read.

    Raises ProtocolMismatch (another protocol version), Misdirected (signed for another
    server) or Unauthenticated (missing or malformed headers, a time outside the window).
    """
    key = headers.get(KEY_HEADER, "")
    ts_text = headers.get(TIME_HEADER, "")
    nonce = headers.get(NONCE_HEADER, "")
    sig_text = headers.get(SIGNATURE_HEADER, "")
    if not (key and ts_text and nonce and sig_text):
        raise Unauthenticated("request is not signed (Eidetica-Key/Time/Nonce/Signature)")
    check_protocol(headers.get(PROTOCOL_HEADER))
    try:
        named = canonical_address(headers.get(SERVER_HEADER, ""))
    except InputError:
        raise Unauthenticated("request names no server (Eidetica-Server: <address>)") from None
    if named not in servers:
        this = f", this one is {servers[0]}" if servers else ""
        raise Misdirected(f"request was signed for another server ({named[:80]}){this}")
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
    if abs(ts_ms / 1000 - now_s) > window_s:
        raise Unauthenticated("request time is more than 5 minutes off; check the clocks")
    return SignedHeaders(key, ts_ms, nonce, bytes.fromhex(sig_text), named)


def check_protocol(named: str | None) -> None:
    """ProtocolMismatch (one line) unless ``named`` (a request's or an answer's
    ``Eidetica-Protocol``; None: absent, an older chazbot) is this protocol."""
    if named == PROTOCOL:
        return
    spoken = OLD_PROTOCOL if named is None else named[:40]
    raise ProtocolMismatch(
        f"request speaks {spoken!r}, this peer {PROTOCOL}: run the same chazbot release "
        "on both peers"
    )


def check_signature(signed: SignedHeaders, method: str, path: str, body: bytes) -> None:
    """Unauthenticated unless ``signed.signature`` covers this request (see the module doc)."""
    payload = signing_payload(signed.server, method, path, signed.ts_ms, signed.nonce, body)
    if not verify(signed.key, signed.signature, payload):
        raise Unauthenticated("request signature does not verify")


class RateLimiter:
    """Token buckets per name (an address or a key), bounded in how many names it holds.

    Each name may spend ``burst`` requests at once and regains ``rate`` per second. At most
    ``max_names`` buckets are kept: past that, the least recently used are dropped (a
    dropped name starts again with a full bucket, so the bound costs some precision under
    a flood of distinct names, never memory).
    """

    def __init__(self, rate: float, burst: float, max_names: int = 10_000) -> None:
        self.rate = rate
        self.burst = burst
        self.max_names = max_names
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def allow(self, name: str, now: float) -> bool:
        """Spend one token of ``name``'s bucket if it has one."""
        tokens, then = self._buckets.pop(name, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        ok = tokens >= 1.0
        self._buckets[name] = (tokens - 1.0 if ok else tokens, now)
        while len(self._buckets) > self.max_names:
            self._buckets.popitem(last=False)
        return ok

    def __len__(self) -> int:
        return len(self._buckets)


# ---- bodies ----------------------------------------------------------------------------


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
    requests refused for a bad signature, time or nonce (server); ``misdirected``: those
    of them signed for another server (a peer relaying another's requests). ``errors``: failed
    exchanges (client: connection errors and error answers; server: error answers).
    """

    sent: int = 0
    received: int = 0
    refused: int = 0
    duplicates: int = 0
    requests_refused: int = 0
    misdirected: int = 0
    errors: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))

"""The sync client: signed requests to another peer's ``SyncServer``, answers checked.

Errors are translated here, once: an unreachable peer, a timeout, a 429 or a 5xx answer is a
BackendError; 401/403 a PermissionDenied, 404 a NotFound, 409 a ConflictError, other 4xx an
InputError; an answer that does not have the expected shape is a BackendError.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import yarl

from chazbot.errors import (
    BackendError,
    ChazError,
    ConflictError,
    InputError,
    NotFound,
    PermissionDenied,
)
from chazbot.ledger.encoding import is_content_id
from chazbot.ledger.keys import KeyPair
from chazbot.sync.protocol import (
    MAX_BATCH_ENTRIES,
    decode_entry,
    encode_entry,
    parse_body,
    sign_request,
)
from chazbot.sync.store import AccessDecision, check_db_id
from chazbot.sync.tickets import base_url

MAX_ANSWER_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class RemoteHeads:
    db: str
    tips: list[str]
    count: int
    max_seq: int
    log: str
    permission: str


@dataclass(frozen=True)
class EntryBatch:
    """Entries (remote seq, raw bytes) after a cursor; ``next`` is the cursor after them."""

    entries: list[tuple[int, bytes]]
    next: int
    more: bool
    log: str


@dataclass(frozen=True)
class PushResult:
    accepted: int
    duplicates: int
    refused: int
    rejected: list[tuple[str, str]]
    tips: list[str]
    max_seq: int
    log: str


def _bad(address: str, what: str) -> BackendError:
    return BackendError(f"peer {address} answered badly: {what}")


def _int(value: Any, address: str, what: str) -> int:
    if type(value) is not int or value < 0:
        raise _bad(address, f"{what} is not a count")
    return value


def _str(value: Any, address: str, what: str) -> str:
    if not isinstance(value, str) or len(value) > 200:
        raise _bad(address, f"{what} is not a short string")
    return value


def _ids(value: Any, address: str, what: str) -> list[str]:
    if not isinstance(value, list) or not all(is_content_id(v) for v in value):
        raise _bad(address, f"{what} is not a list of ids")
    return [str(v) for v in value]


class SyncClient:
    """Signs requests with ``key`` (this peer's key) and talks to other peers' servers."""

    def __init__(
        self,
        key: KeyPair,
        *,
        timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.key = key
        self.timeout = timeout
        self.clock = clock
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=self.timeout)
            )
        return self._session

    async def call(
        self, address: str, db: str, name: str, body: dict[str, Any], wait: float = 0.0
    ) -> dict[str, Any]:
        """POST a signed JSON ``body`` to ``/v1/dbs/{db}/{name}`` at ``address``."""
        check_db_id(db)
        url = yarl.URL(base_url(address) + f"/v1/dbs/{db}/{name}", encoded=True)
        data = json.dumps(body, separators=(",", ":")).encode()
        headers = sign_request(self.key, "POST", url.raw_path_qs, data, self.clock())
        headers["Content-Type"] = "application/json"
        timeout = aiohttp.ClientTimeout(total=self.timeout + wait, connect=self.timeout)
        try:
            async with self._get_session().post(
                url, data=data, headers=headers, timeout=timeout
            ) as resp:
                status = resp.status
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.content.iter_chunked(1 << 16):
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        raise _bad(address, "answer is too large")
                    chunks.append(chunk)
                raw = b"".join(chunks)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            reason = str(exc) or type(exc).__name__
            raise BackendError(f"peer {address} is unreachable: {reason}") from exc
        try:
            answer = parse_body(raw)
        except InputError as exc:
            raise _bad(address, f"HTTP {status}, not a JSON object") from exc
        if status != 200:
            message = str(answer.get("error", ""))[:300] or f"HTTP {status}"
            raise _translate(status, f"peer {address}: {message}")
        return answer

    async def heads(self, address: str, db: str) -> RemoteHeads:
        a = await self.call(address, db, "heads", {})
        return RemoteHeads(
            db,
            _ids(a.get("tips"), address, "tips"),
            _int(a.get("count"), address, "count"),
            _int(a.get("max_seq"), address, "max_seq"),
            _str(a.get("log"), address, "log"),
            _str(a.get("permission"), address, "permission"),
        )

    async def entries(
        self, address: str, db: str, after: int, limit: int = MAX_BATCH_ENTRIES, wait: float = 0.0
    ) -> EntryBatch:
        body: dict[str, Any] = {"after": after, "limit": limit}
        if wait > 0:
            body["wait"] = wait
        a = await self.call(address, db, "entries", body, wait)
        items = a.get("entries")
        if not isinstance(items, list) or len(items) > limit:
            raise _bad(address, "entries is not a list of at most the limit")
        out: list[tuple[int, bytes]] = []
        last = after
        for item in items:
            if not isinstance(item, list) or len(item) != 2:
                raise _bad(address, "an entry is not [seq, base64]")
            seq = _int(item[0], address, "seq")
            if seq <= last:
                raise _bad(address, "entry seqs are not increasing past the cursor")
            try:
                out.append((seq, decode_entry(item[1])))
            except InputError as exc:
                raise _bad(address, str(exc)) from exc
            last = seq
        nxt = _int(a.get("next"), address, "next")
        more = a.get("more")
        if nxt != last or not isinstance(more, bool):
            raise _bad(address, "next/more do not match the entries")
        if more and not out:
            raise _bad(address, "more entries announced but none sent")
        return EntryBatch(out, nxt, more, _str(a.get("log"), address, "log"))

    async def missing(self, address: str, db: str, ids: list[str]) -> set[str]:
        """Which of ``ids`` the remote does not hold."""
        a = await self.call(address, db, "have", {"ids": ids})
        return set(_ids(a.get("missing"), address, "missing")) & set(ids)

    async def push(self, address: str, db: str, entries: list[bytes]) -> PushResult:
        a = await self.call(address, db, "push", {"entries": [encode_entry(e) for e in entries]})
        rejected_raw = a.get("rejected")
        if not isinstance(rejected_raw, list):
            raise _bad(address, "rejected is not a list")
        rejected = [
            (str(r.get("id", "?"))[:80], str(r.get("reason", ""))[:300])
            for r in rejected_raw
            if isinstance(r, dict)
        ]
        return PushResult(
            _int(a.get("accepted"), address, "accepted"),
            _int(a.get("duplicates"), address, "duplicates"),
            _int(a.get("refused"), address, "refused"),
            rejected,
            _ids(a.get("tips"), address, "tips"),
            _int(a.get("max_seq"), address, "max_seq"),
            _str(a.get("log"), address, "log"),
        )

    async def access(self, address: str, db: str, permission: str) -> AccessDecision:
        a = await self.call(address, db, "access", {"permission": permission})
        status, request = a.get("status"), a.get("request")
        if status not in ("granted", "pending", "rejected"):
            raise _bad(address, "access status is not granted, pending or rejected")
        if request is not None:
            request = _int(request, address, "request")
        return AccessDecision(str(status), request)


def _translate(status: int, message: str) -> ChazError:
    if status == 429:
        return BackendError(message)  # rate-limited: busy, try later
    if status in (401, 403):
        return PermissionDenied(message)
    if status == 404:
        return NotFound(message)
    if status == 409:
        return ConflictError(message)
    if 400 <= status < 500:
        return InputError(message)
    return BackendError(message)

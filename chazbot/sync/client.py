"""The sync client: signed requests to another peer's ``SyncServer``, answers checked.

Requests are built and answers read with the wire's declarations (``chazbot.sync.wire``),
the same the server uses. A request out of their bounds is an InputError before anything
is sent; an answer that does not fit its model, or not the request it answers (an entries
batch past the cursor, heads of another database), is a BackendError "peer … answered
badly: <what>", one line.

Errors are translated here, once: an unreachable peer, a timeout, a 429 or a 5xx answer is a
BackendError; 401/403 a PermissionDenied, 404 a NotFound, 409 a ConflictError, other 4xx an
InputError.

**Nothing another service says is repeated** (issue #47: a ticket names any host and port,
and an import must not become a probe): a closed port, a timeout, a service that is not HTTP
and an HTTP answer without this protocol's ``Eidetica-Protocol`` header are all the same one
line, ``peer not reachable, or not a chazbot peer (eidetica-sync/2): <address>``. Only a peer
that names the protocol has its error message shown (one line, cut short). Requests go only
to addresses ``sync.reach`` allows: never link-local or cloud metadata ones, loopback and
private ones only with ``allow_private_peers`` (``sync_allow_private_peers``); a name is
judged by what it resolves to, and the connection goes only there. Redirects are never
followed.

An ``https:`` peer's certificate is checked (``ssl_context``: the system's CAs and the
operator's ``sync_ca_file``); one that fails is a BackendError saying so. A plain ``http:``
peer on another machine is refused before anything is sent (an InputError naming
``sync_allow_plain_http``, the one config line that allows it).
"""

from __future__ import annotations

import re
import ssl
import time
from collections.abc import Callable
from typing import Any, TypeVar

import aiohttp
import yarl
from aiohttp.abc import AbstractResolver

from chazbot.errors import (
    BackendError,
    ChazError,
    ConflictError,
    InputError,
    NotFound,
    PermissionDenied,
)
from chazbot.ledger.keys import KeyPair
from chazbot.sync import wire
from chazbot.sync.protocol import MAX_BATCH_ENTRIES, PROTOCOL, PROTOCOL_HEADER, sign_request
from chazbot.sync.reach import (
    AddressRefused,
    PeerResolver,
    Refusal,
    check_reachable,
    refused_by,
)
from chazbot.sync.store import AccessDecision, check_db_id
from chazbot.sync.tickets import base_url, plain_off_host

MAX_ANSWER_BYTES = 16 * 1024 * 1024
MAX_ERROR_SHOWN = 300  # characters of a peer's error message repeated in ours
PLAIN_HTTP_KEY = "sync_allow_plain_http"

Answer = TypeVar("Answer", bound=wire.WireModel)


_SPOKEN = re.compile(r"eidetica-sync/[0-9]{1,4}")


def _bad(address: str, what: str) -> BackendError:
    return BackendError(f"peer {address} answered badly: {what}")


def not_a_peer(address: str) -> BackendError:
    """The one line for every failure that is not a chazbot peer's own answer."""
    return BackendError(f"peer not reachable, or not a chazbot peer ({PROTOCOL}): {address}")


def _other_protocol(address: str, spoken: str | None) -> BackendError:
    if spoken is not None and _SPOKEN.fullmatch(spoken):
        return BackendError(
            f"peer {address} speaks {spoken}, this peer {PROTOCOL}: run the same chazbot "
            "release on both peers"
        )
    return not_a_peer(address)


class SyncClient:
    """Signs requests with ``key`` (this peer's key) and talks to other peers' servers.

    ``ssl_context``: whom an ``https:`` peer's certificate must come from (default: the
    system's CAs); ``allow_plain_http``: talk plain HTTP to other machines too (off: only to
    this one); ``allow_private_peers``: connect to loopback and private addresses too
    (``sync.reach``); ``resolver``: what resolves peers' names (default: the system's)."""

    def __init__(
        self,
        key: KeyPair,
        *,
        timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
        ssl_context: ssl.SSLContext | None = None,
        allow_plain_http: bool = False,
        allow_private_peers: bool = False,
        resolver: AbstractResolver | None = None,
    ) -> None:
        self.key = key
        self.timeout = timeout
        self.clock = clock
        self.ssl_context = ssl_context
        self.allow_plain_http = allow_plain_http
        self.allow_private_peers = allow_private_peers
        self.resolver = resolver
        self._session: aiohttp.ClientSession | None = None
        self._resolver: PeerResolver | None = None

    async def close(self) -> None:
        session, self._session = self._session, None
        resolver, self._resolver = self._resolver, None
        if session is not None:
            await session.close()
        if resolver is not None:
            await resolver.close()

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            if self._resolver is None:
                self._resolver = PeerResolver(self.allow_private_peers, self.resolver)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(resolver=self._resolver),
                timeout=aiohttp.ClientTimeout(total=None, connect=self.timeout),
            )
        return self._session

    async def call(
        self,
        address: str,
        db: str,
        name: str,
        request: wire.WireModel,
        answer: type[Answer],
        wait: float = 0.0,
        context: dict[str, Any] | None = None,
    ) -> Answer:
        """POST the signed ``request`` to ``/v1/dbs/{db}/{name}`` at ``address``; its
        answer read into ``answer`` (``context``: what the answer is checked against)."""
        check_db_id(db)
        self.check_address(address)
        url = yarl.URL(base_url(address) + f"/v1/dbs/{db}/{name}", encoded=True)
        data = request.model_dump_json().encode()
        headers = sign_request(
            self.key, "POST", url.raw_path_qs, data, self.clock(), server=address
        )
        headers["Content-Type"] = "application/json"
        timeout = aiohttp.ClientTimeout(total=self.timeout + wait, connect=self.timeout)
        try:
            async with self._get_session().post(
                url,
                data=data,
                headers=headers,
                timeout=timeout,
                ssl=self.ssl_context if self.ssl_context is not None else True,
                allow_redirects=False,  # a peer's redirect would carry the signed body elsewhere
            ) as resp:
                status = resp.status
                spoken = resp.headers.get(PROTOCOL_HEADER)
                if spoken != PROTOCOL:  # not a chazbot peer of this protocol: read nothing
                    raise _other_protocol(address, spoken)
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.content.iter_chunked(1 << 16):
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        raise _bad(address, "answer is too large")
                    chunks.append(chunk)
                raw = b"".join(chunks)
        except aiohttp.ClientConnectorCertificateError as exc:
            raise BackendError(
                f"peer not reachable: {address} has a certificate this peer does not trust "
                "(a self-signed peer's CA goes in sync_ca_file)"
            ) from exc
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            refused = refused_by(exc)
            if refused is not None:
                raise AddressRefused(refused.line(address)) from None
            raise not_a_peer(address) from exc
        if status != 200:
            try:
                error = " ".join(wire.parse(wire.ErrorAnswer, raw).error.split())
            except InputError as exc:
                raise _bad(address, f"HTTP {status}, {exc}") from None
            error = error[:MAX_ERROR_SHOWN]
            raise _translate(status, f"peer {address}: {error or f'HTTP {status}'}")
        try:
            return wire.parse(answer, raw, context)
        except InputError as exc:
            raise _bad(address, str(exc)) from None

    def check_address(self, address: str) -> None:
        """AddressRefused (one line) when ``address`` is one this peer never connects to, or
        loopback or private ones and the operator did not allow those (``sync.reach``), or
        plain HTTP to another machine and the operator did not allow it."""
        try:
            check_reachable(address, self.allow_private_peers)
        except Refusal as exc:
            raise AddressRefused(exc.line(address)) from None
        if not self.allow_plain_http and plain_off_host(address):
            raise AddressRefused(
                f"peer {address} is plain http on another machine (anyone on the way reads "
                f"every synced row): use its https: address, or set {PLAIN_HTTP_KEY}: true in "
                "the config to allow it"
            )

    async def heads(self, address: str, db: str) -> wire.HeadsAnswer:
        """The remote's tips, count and highest seq of ``db``, and our key's permission."""
        return await self.call(
            address, db, "heads", wire.HeadsRequest(), wire.HeadsAnswer, context={"db": db}
        )

    async def entries(
        self, address: str, db: str, after: int, limit: int = MAX_BATCH_ENTRIES, wait: float = 0.0
    ) -> wire.EntriesAnswer:
        """The remote's entries after its seq ``after`` (at most ``limit``; ``wait`` > 0
        waits that long for one when there is none yet)."""
        ask = wire.build(wire.EntriesRequest, after=after, limit=limit, wait=wait)
        context = {"after": after, "limit": limit}
        return await self.call(address, db, "entries", ask, wire.EntriesAnswer, wait, context)

    async def missing(self, address: str, db: str, ids: list[str]) -> set[str]:
        """Which of ``ids`` the remote does not hold."""
        a = await self.call(
            address, db, "have", wire.build(wire.HaveRequest, ids=ids), wire.HaveAnswer
        )
        return set(a.missing) & set(ids)

    async def push(self, address: str, db: str, entries: list[bytes]) -> wire.PushAnswer:
        """Send ``entries``; what the remote accepted, refused and holds now."""
        ask = wire.build(wire.PushRequest, entries=entries)
        return await self.call(address, db, "push", ask, wire.PushAnswer)

    async def access(self, address: str, db: str, permission: str) -> AccessDecision:
        ask = wire.build(wire.AccessRequest, permission=permission)
        a = await self.call(address, db, "access", ask, wire.AccessAnswer)
        return AccessDecision(a.status, a.request)


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

"""``web_fetch``: one http(s) GET, its text (HTML reduced to its words), bounded in bytes and
time, that never reaches an address the operator did not allow (``addresses``).

Each hop is checked: the URL's host when it is an address, in any spelling, before a
connection is tried; a name through ``GuardedResolver`` (the connection goes to the answers it
checked); redirects are followed here, one by one, each through the same checks, at most
``max_redirects``. No proxy from the environment, no cookies kept, nothing sent but the GET.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import aiohttp
from yarl import URL

from chazbot.errors import BackendError, InputError, PermissionDenied
from chazbot.tools.addresses import (
    AddressPolicy,
    GuardedResolver,
    Lookup,
    numeric_host,
    system_lookup,
)
from chazbot.tools.htmltext import html_text

MAX_URL_CHARS = 2_048
REDIRECTS = frozenset({301, 302, 303, 307, 308})
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml")
CHUNK = 16_384


@dataclass(frozen=True)
class FetchSettings:
    """How far ``web_fetch`` goes: bytes read at most, seconds in all, redirects followed,
    and the addresses it may reach."""

    max_bytes: int = 2_000_000
    timeout_s: float = 15.0
    max_redirects: int = 5
    policy: AddressPolicy = field(default_factory=AddressPolicy)
    user_agent: str = "chazbot-web-fetch/1 (+https://github.com/chazbot)"


def checked_url(url: str) -> URL:
    """``url`` parsed, or InputError: http(s), a host, no user or password in it."""
    if not isinstance(url, str) or not url.strip():
        raise InputError("url must be an http(s) URL")
    if len(url) > MAX_URL_CHARS:
        raise InputError(f"url is at most {MAX_URL_CHARS:,} characters")
    try:
        parsed = URL(url.strip())
    except (ValueError, TypeError) as exc:
        raise InputError(f"url cannot be read: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InputError("url must be http:// or https:// with a host")
    if parsed.user or parsed.password:
        raise InputError("url may not carry a user name or password")
    return parsed


def _precheck(url: URL, policy: AddressPolicy) -> None:
    """A host spelled as an address is checked before anything (aiohttp connects to an
    address without asking the resolver)."""
    host = url.raw_host or ""
    ip = numeric_host(host)
    if ip is not None:
        policy.check(ip, host)


async def fetch(url: str, settings: FetchSettings, lookup: Lookup = system_lookup) -> str:
    """The text at ``url``: its final URL on the first line, then the text (HTML as words),
    cut at ``settings.max_bytes``. PermissionDenied for a private address on any hop,
    InputError for a bad URL or a body that is not text, BackendError when the site fails."""
    target = checked_url(url)
    resolver = GuardedResolver(settings.policy, lookup)
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, limit=2)
    timeout = aiohttp.ClientTimeout(total=settings.timeout_s)
    headers = {"User-Agent": settings.user_agent, "Accept": "text/html, text/*;q=0.9, */*;q=0.1"}
    try:
        async with (
            asyncio.timeout(settings.timeout_s),
            aiohttp.ClientSession(
                connector=connector, timeout=timeout, trust_env=False, headers=headers
            ) as http,
        ):
            for _ in range(settings.max_redirects + 1):
                _precheck(target, settings.policy)
                try:
                    async with http.get(target, allow_redirects=False) as resp:
                        if resp.status in REDIRECTS and "Location" in resp.headers:
                            target = checked_url(str(target.join(URL(resp.headers["Location"]))))
                            continue
                        return await _body(resp, target, settings)
                except aiohttp.ClientConnectorError as exc:
                    if resolver.refused:
                        raise PermissionDenied(resolver.refused[-1]) from None
                    raise BackendError(f"cannot connect to {target.host}: {exc.os_error}") from exc
            raise InputError(f"more than {settings.max_redirects} redirects; not followed")
    except TimeoutError:
        raise BackendError(f"no answer within {settings.timeout_s:g} s") from None
    except aiohttp.ClientError as exc:
        if resolver.refused:
            raise PermissionDenied(resolver.refused[-1]) from None
        raise BackendError(f"fetching failed: {type(exc).__name__}: {exc}"[:300]) from exc


async def _body(resp: aiohttp.ClientResponse, url: URL, settings: FetchSettings) -> str:
    kind = resp.content_type or "application/octet-stream"
    if resp.status >= 400:
        raise BackendError(f"{url.host} answered {resp.status} {resp.reason or ''}".strip())
    if not kind.startswith(TEXT_TYPES):
        raise InputError(f"{kind} is not text; web_fetch reads text and HTML only")
    data = bytearray()
    cut = False
    while len(data) < settings.max_bytes:
        chunk = await resp.content.read(min(CHUNK, settings.max_bytes - len(data) + 1))
        if not chunk:
            break
        data += chunk
    if len(data) > settings.max_bytes:
        del data[settings.max_bytes :]
        cut = True
    try:
        text = bytes(data).decode(resp.charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        text = bytes(data).decode("utf-8", errors="replace")
    if "html" in kind:
        text = await asyncio.to_thread(html_text, text)
    note = f"\n(cut at {settings.max_bytes:,} bytes)" if cut else ""
    return f"{url}\n\n{text}{note}"


__all__ = ["FetchSettings", "checked_url", "fetch"]

"""Reading an HTTP body with a byte cap (#47): what a server sends is read while it arrives
and dropped as soon as it passes the cap, so a server that says "1,234 bytes" and sends 64 MB
(or a speech server that answers 50 MB) never makes the bot hold more than the cap and one
chunk. The caller turns "too much" into its own one-line error; the deadline is the caller's
(``asyncio.timeout`` around the request and this read).
"""

from __future__ import annotations

import aiohttp

CHUNK = 64 * 1024


async def read_capped(resp: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The body of ``resp``, or None when it is longer than ``limit`` bytes (said by its
    Content-Length, or found while reading: the rest is never read)."""
    said = resp.content_length
    if said is not None and said > limit:
        return None
    body = bytearray()
    async for chunk in resp.content.iter_chunked(CHUNK):
        if len(body) + len(chunk) > limit:
            return None
        body += chunk
    return bytes(body)


__all__ = ["read_capped"]

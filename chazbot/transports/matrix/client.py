"""The nio client as the bot uses it, and how its answers read in a log line."""

from __future__ import annotations

from typing import Any

import aiohttp
from nio import AsyncClient

MAX_RETRY_AFTER_MS = 30_000
"""A 429's ``retry_after_ms`` is honoured up to this; Synapse may ask for minutes."""
MAX_LIMIT_EXCEEDED = 5
MAX_TIMEOUTS = 2
REQUEST_TIMEOUT_S = 30.0
TRANSIENT = (aiohttp.ClientError, TimeoutError, ConnectionError)
"""Connection trouble: worth another try after a pause."""


class NioClient(AsyncClient):  # type: ignore[misc]  # nio ships no type information
    """nio's client with a cap on ``retry_after_ms``: a 429 waits, but never for minutes."""

    async def create_matrix_response(self, *args: Any, **kwargs: Any) -> Any:
        response = await super().create_matrix_response(*args, **kwargs)
        retry = getattr(response, "retry_after_ms", None)
        if isinstance(retry, int | float) and retry > MAX_RETRY_AFTER_MS:
            response.retry_after_ms = MAX_RETRY_AFTER_MS
        return response


def error_text(response: Any) -> str:
    """An error response as ``M_CODE: message``."""
    code = getattr(response, "status_code", None) or "error"
    message = getattr(response, "message", None) or type(response).__name__
    return f"{code}: {message}"


def retry_after_s(response: Any) -> float | None:
    """The homeserver's ``retry_after_ms`` of an error response, in seconds (capped)."""
    retry_ms = getattr(response, "retry_after_ms", None)
    if isinstance(retry_ms, int | float) and not isinstance(retry_ms, bool):
        return min(max(retry_ms, 0), MAX_RETRY_AFTER_MS) / 1000
    return None


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


__all__ = [
    "MAX_LIMIT_EXCEEDED",
    "MAX_RETRY_AFTER_MS",
    "MAX_TIMEOUTS",
    "REQUEST_TIMEOUT_S",
    "TRANSIENT",
    "NioClient",
    "error_text",
    "one_line",
    "retry_after_s",
]

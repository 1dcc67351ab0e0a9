"""One client for OpenAI-compatible HTTP APIs, used by the chat model and the embedder.

It owns what both need and what must not differ between them: one aiohttp session with the
bearer key, the timeout, the retry policy (:mod:`chazbot.backends.retry`: 408, 409, 425, 429,
5xx, connection errors and timeouts are retried; a server's ``retry-after-ms`` or
``Retry-After``, in seconds or as an HTTP date, wins over the backoff), one redaction of the
API key, and one mapping of every failure to a one-line :class:`~chazbot.errors.BackendError`
that names the service by its URL without credentials and never holds the key.
"""

from __future__ import annotations

import dataclasses
import email.utils
import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC
from typing import Any, Protocol

import aiohttp
from yarl import URL

from chazbot.backends.capped import read_capped
from chazbot.backends.retry import Backoff, Retryable, Sleep, retrying
from chazbot.errors import BackendError

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 425, 429})
"""Client errors worth another attempt (every 5xx is, too); as OpenAI's own SDK does."""
DEFAULT_BACKOFF = Backoff(attempts=4, first_s=0.5, max_s=8.0, retry_after_max_s=30.0)
"""Retry timing for OpenAI-compatible endpoints (``attempts`` comes from ``max_retries``)."""
PING_TIMEOUT_S = 10.0
_DETAIL_CHARS = 200


def public_url(api_base: str) -> str:
    """``api_base`` as it may be shown: no user, password, query or fragment."""
    try:
        url = URL(api_base)
        return str(url.with_user(None).with_query(None).with_fragment(None)).rstrip("/")
    except (ValueError, TypeError):
        return "(unparseable URL)"


def retry_after_s(headers: Mapping[str, str], now: Callable[[], float] = time.time) -> float | None:
    """The server's wish in seconds: ``retry-after-ms``, else ``Retry-After`` (seconds or an
    HTTP date, measured against ``now``); None when absent or unreadable."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms)
        except ValueError:
            ms = math.nan
        if math.isfinite(ms):
            return max(ms / 1000.0, 0.0)
    raw = (headers.get("retry-after") or "").strip()
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(when.timestamp() - now(), 0.0)
    return max(seconds, 0.0) if math.isfinite(seconds) else None


class EndpointSettings(Protocol):
    """The config fields every OpenAI-compatible endpoint has (``llm:``, ``embedding:``)."""

    @property
    def api_base(self) -> str: ...
    @property
    def api_key(self) -> str | None: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def max_retries(self) -> int: ...


class OpenAICompatClient:
    """``POST``/``GET`` against ``api_base`` of an OpenAI-compatible API.

    ``service`` names it in errors ("LLM backend", "embedding API"); ``setting`` is the config
    section errors point to ("llm", "embedding"). ``sleep`` and ``now`` are the clock (tests
    pass fake ones).
    """

    def __init__(
        self,
        api_base: str,
        api_key: str | None,
        *,
        service: str,
        setting: str,
        timeout_s: float,
        backoff: Backoff,
        sleep: Sleep | None = None,
        now: Callable[[], float] = time.time,
        answer_max_bytes: int | None = None,
    ) -> None:
        self._base = api_base.rstrip("/")
        self._answer_max = answer_max_bytes
        self._api_key = api_key
        self._setting = setting
        self.where = f"{service} at {public_url(api_base)}"
        self.timeout_s = timeout_s
        self.backoff = backoff
        self._sleep = sleep
        self._now = now
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def for_endpoint(
        cls,
        cfg: EndpointSettings,
        service: str,
        setting: str,
        backoff: Backoff,
        sleep: Sleep | None,
        answer_max_bytes: int | None = None,
    ) -> OpenAICompatClient:
        """The client for a config section: ``backoff``'s timing, ``max_retries`` retries;
        ``answer_max_bytes``: a longer answer is cut while it is read (a failure)."""
        backoff = dataclasses.replace(backoff, attempts=cfg.max_retries + 1)
        return cls(
            cfg.api_base,
            cfg.api_key,
            service=service,
            setting=setting,
            timeout_s=cfg.timeout_s,
            backoff=backoff,
            sleep=sleep,
            answer_max_bytes=answer_max_bytes,
        )

    def __repr__(self) -> str:
        return f"OpenAICompatClient({self.where!r})"

    # -- what both callers use --------------------------------------------------------------

    def redact(self, text: str) -> str:
        """One short line of outside text, with the API key (if it is echoed) blanked out."""
        text = " ".join(str(text).split())
        if self._api_key:
            text = text.replace(self._api_key, "***")
        if len(text) > _DETAIL_CHARS:
            text = text[:_DETAIL_CHARS] + "..."
        return text

    def error(self, message: str) -> BackendError:
        """A BackendError about this service: ``"<service> at <url> <message>"``."""
        return BackendError(self.redact(f"{self.where} {message}"))

    def malformed(self, why: str) -> BackendError:
        return self.error(f"returned an unexpected response: {why}")

    async def post_json(self, path: str, body: dict[str, Any], *, model: str) -> Any:
        """POST ``body`` to ``path`` (retrying what is worth it); the parsed JSON answer.

        ``model`` is named in the error for a 404 (the usual cause: an unknown model).
        """
        attempts = self.backoff.attempts
        policy = retrying(self.backoff, f"request to {self.where}", log, sleep=self._sleep)
        try:
            return await policy(self._post_once, path, body, model)
        except Retryable as exc:
            tries = f" (after {attempts} attempts)" if attempts > 1 else ""
            raise self.error(f"{exc.message}{tries}") from exc

    async def _get_once(self, path: str, failed: Callable[[int], bool]) -> tuple[int, str]:
        """GET ``path`` once, not retried: (status, body text); a status ``failed`` refuses,
        and every transport failure, is a one-line BackendError."""
        timeout = min(self.timeout_s, PING_TIMEOUT_S)
        try:
            async with self._session_now().get(
                self._base + path, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as resp:
                text = await resp.text(errors="replace")
                if failed(resp.status):
                    raise self._status_error(resp.status, text, "", resp.headers)
                return resp.status, text
        except Retryable as exc:
            raise self.error(exc.message) from exc
        except (TimeoutError, aiohttp.ClientError) as exc:
            failure = self._transport_error(exc, timeout)
            if isinstance(failure, Retryable):
                failure = self.error(failure.message)
            raise failure from exc

    async def ping(self, path: str = "/models") -> None:
        """GET ``path`` once: any answer but 401/403/5xx means the service is there (a 404
        too: some compatible servers have no ``/models``)."""
        await self._get_once(path, lambda status: status in (401, 403) or status >= 500)

    async def model_ids(self, path: str = "/models") -> list[str] | None:
        """GET ``path`` once: the ids it lists (``{"data": [{"id": …}]}``), or None when the
        server has no such list (HTTP 404); any other failure is a one-line BackendError."""
        status, text = await self._get_once(path, lambda status: status >= 400 and status != 404)
        if status == 404:
            return None
        try:
            data = json.loads(text)
            return [str(m["id"]) for m in data["data"] if isinstance(m, dict) and "id" in m]
        except (ValueError, KeyError, TypeError) as exc:
            raise self.malformed(f"its {path} list is not {{data: [{{id}}]}}") from exc

    async def aclose(self) -> None:
        """Close the session; the client opens a new one if used again."""
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    # -- one attempt ------------------------------------------------------------------------

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"User-Agent": "chazbot", "Accept": "application/json"}
            if self._api_key:
                headers["Authorization"] = f"Bearer {self._api_key}"
            self._session = aiohttp.ClientSession(headers=headers)
        return self._session

    async def post_form(
        self, path: str, fields: Mapping[str, str], file: tuple[str, bytes, str], *, model: str
    ) -> Any:
        """POST a multipart form (``fields`` and one ``file`` as (name, bytes, type)) to
        ``path``, retried as ``post_json`` is; the parsed JSON answer."""
        attempts = self.backoff.attempts
        policy = retrying(self.backoff, f"request to {self.where}", log, sleep=self._sleep)
        try:
            return await policy(self._post_once, path, None, model, (fields, file))
        except Retryable as exc:
            tries = f" (after {attempts} attempts)" if attempts > 1 else ""
            raise self.error(f"{exc.message}{tries}") from exc

    async def _post_once(
        self,
        path: str,
        body: dict[str, Any] | None,
        model: str,
        form: tuple[Mapping[str, str], tuple[str, bytes, str]] | None = None,
    ) -> Any:
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        payload: dict[str, Any] = {"json": body}
        if form is not None:  # built anew for every attempt: a sent FormData is spent
            data = aiohttp.FormData()
            for name, value in form[0].items():
                data.add_field(name, value)
            name, blob, kind = form[1]
            data.add_field("file", blob, filename=name, content_type=kind)
            payload = {"data": data}
        try:
            async with self._session_now().post(
                self._base + path, timeout=timeout, **payload
            ) as resp:
                text = await self._answer_text(resp)
                if resp.status >= 400:
                    raise self._status_error(resp.status, text, model, resp.headers)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise self._transport_error(exc, self.timeout_s) from exc
        try:
            return json.loads(text)
        except ValueError as exc:
            raise self.error(f"returned a body that is not JSON (HTTP {resp.status})") from exc

    async def _answer_text(self, resp: aiohttp.ClientResponse) -> str:
        """The answer's text, read at most ``answer_max_bytes`` of it (#47: a speech server's
        50 MB answer was read whole before it was cut)."""
        if self._answer_max is None:
            return await resp.text(errors="replace")
        body = await read_capped(resp, self._answer_max)
        if body is None:
            raise self.error(f"answered more than {self._answer_max} bytes (HTTP {resp.status})")
        try:
            return body.decode(resp.charset or "utf-8", errors="replace")
        except LookupError:  # a charset Python does not know
            return body.decode("utf-8", errors="replace")

    def _transport_error(self, exc: BaseException, timeout_s: float) -> BackendError:
        """The error for a failure below HTTP: TLS and bad URLs are final, the rest retried."""
        if isinstance(exc, TimeoutError):
            return Retryable(f"did not answer within {timeout_s:g} s")
        if isinstance(exc, aiohttp.ClientSSLError):
            return self.error(f"failed the TLS handshake ({type(exc).__name__})")
        if isinstance(exc, aiohttp.InvalidURL):
            return self.error(f"is not a valid URL; check {self._setting}.api_base")
        return Retryable(f"is unreachable: {self.redact(str(exc) or type(exc).__name__)}")

    def _detail(self, body: str) -> str:
        """The server's own message from an error body (``{"error": {"message": …}}``)."""
        try:
            data = json.loads(body)
        except ValueError:
            return self.redact(body)
        if isinstance(data, dict):
            error = data.get("error", data.get("detail", data.get("message")))
            if isinstance(error, dict):
                error = error.get("message", error)
            if error is not None:
                return self.redact(error if isinstance(error, str) else json.dumps(error))
        return self.redact(body)

    def _status_error(
        self, status: int, body: str, model: str, headers: Mapping[str, str]
    ) -> BackendError:
        """The one mapping of an HTTP error status: Retryable or a final BackendError."""
        if status in (401, 403):
            # The body is left out: servers like to echo (part of) the key they were given.
            if not self._api_key:
                return self.error(
                    f"requires an API key (HTTP {status}); set {self._setting}.api_key"
                )
            return self.error(
                f"rejected the API key (HTTP {status}); check {self._setting}.api_key"
            )
        detail = self._detail(body)
        suffix = f": {detail}" if detail else ""
        if status >= 500 or status in RETRY_STATUSES:
            what = "is rate limiting" if status == 429 else "failed"
            return Retryable(f"{what} (HTTP {status}){suffix}", retry_after_s(headers, self._now))
        if status == 404:
            return self.error(
                f"answered HTTP 404 for model {model!r} (unknown model, or api_base lacks "
                f"the /v1 part?){suffix}"
            )
        return self.error(f"refused the request (HTTP {status}){suffix}")


__all__ = [
    "DEFAULT_BACKOFF",
    "RETRY_STATUSES",
    "EndpointSettings",
    "OpenAICompatClient",
    "public_url",
    "retry_after_s",
]

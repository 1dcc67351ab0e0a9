"""What every page of the memory page shares (SPEC §10): sign-in, sessions, CSRF, headers,
rendering, and the command path every action takes.

``person``, ``admin`` and ``uploads`` add their routes to a ``Pages``; ``app.WebUI`` is the
``Pages`` with all of them, mounted under ``/ui/`` on the http listener
(``transports/http.py``) when ``web.enabled``. This module imports none of them.
Who is signed in is decided on every request from the session *and* the current config: a
person taken off ``allow_list`` is signed out at once, and admin pages follow
``matrix.admins`` as it is now. Every change goes through ``Peer.command`` (the command tree
of Matrix commands and ``chazbot cmd``: the same permission and audience checks, the same one-line
errors), with the signed-in person as the sender, and is logged under their name.
"""

from __future__ import annotations

import hmac
import logging
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode, urlsplit

import jinja2
from aiohttp import web
from multidict import MultiDictProxy

from chazbot.commands import Call, Meaning, Reply
from chazbot.commands.web_cmds import (
    LINK_NOT_VALID,
    LINK_SHARED_ROOM,
    NOT_SIGNED_IN,
    ask_for_link,
    digest,
)
from chazbot.commands.web_signins import WebGrant, WebSignIns
from chazbot.memory.audience import OPERATOR, Audience, room_audience
from chazbot.memory.rows import MemoryRow, to_datetime
from chazbot.memory.tokenize import bound_query
from chazbot.memory.tools import cut_note
from chazbot.transports.matrix.rules import matches_any
from chazbot.transports.web.import_jobs import Imports
from chazbot.transports.web.wording import ENGLISH, Flash, Words, cut, page_lang

if TYPE_CHECKING:
    from chazbot.config import Config
    from chazbot.peer import Peer

log = logging.getLogger(__name__)

PREFIX = "/ui"
WEB_SESSION = "web"
"""The command session the page's commands run in (one for everyone: the page keeps no
per-session state, and ``Peer.command`` needs one)."""
COOKIE = "chazbot_web"
SECURE_COOKIE = "__Host-chazbot_web"
FORM_MAX_BYTES = 64 * 1024
FIELD_MAX_CHARS = 4096
FLASHES_KEPT = 1000
CSP = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
CROSS_SITE = "This form was posted from another site. Open the page itself and try again."
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # our own POSTs carry our Origin (no-referrer: "null")
    "Cache-Control": "no-store",
}
_FORM: web.RequestKey[dict[str, str]] = web.RequestKey("chazbot.form", dict)
_FILES: web.RequestKey[dict[str, bytes]] = web.RequestKey("chazbot.files", dict)
_LOCAL_PATH = re.compile(r"/ui/[A-Za-z0-9/._~%+=&?-]*")

Handler = Callable[[web.Request, "Who"], Awaitable[web.StreamResponse]]


class Rooms(Protocol):
    """What the chat transport tells the pages about its rooms (the service passes itself)."""

    def room_name(self, session: str) -> str | None:
        """A session's room as people call it ("#family"), or None."""
        ...

    async def room_audience(self, session: str) -> Audience | None:
        """Who reads ``session`` now; None when no transport has such a room."""
        ...


@dataclass(frozen=True)
class Who:
    """The signed-in person on this request: MXID (or ``operator``), whether they are an
    admin now, the token their forms carry, and their session's key (its digest)."""

    person: str
    admin: bool
    csrf: str
    session: str

    @property
    def operator(self) -> bool:
        return self.person == OPERATOR


class Pages:
    """What the pages of one peer share; the route modules add the pages themselves
    (``app.WebUI`` puts them together)."""

    def __init__(self, peer: Peer, rooms: Rooms | None = None) -> None:
        self.peer = peer
        self._rooms = rooms
        self.store = WebSignIns(peer.ledger)
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("chazbot.transports.web", "templates"),
            autoescape=True,  # every template, every value: memories are hostile input
            undefined=jinja2.StrictUndefined,
        )
        # a ranked search's note when it searched only the start of ``q`` (/memory search's words)
        self.env.globals["query_cut"] = lambda q: cut_note(bound_query(q))
        self._flash: OrderedDict[str, Flash] = OrderedDict()
        self._css = (
            resources.files("chazbot.transports.web").joinpath("static/style.css").read_bytes()
        )
        self.imports = Imports(peer)
        """The JSONL imports running in the background (the admin pages show them)."""

    @property
    def cfg(self) -> Config:
        return self.peer.config

    def room_name(self, session: str) -> str | None:
        """A session's room as people call it ("#family"), when a transport knows it."""
        if self._rooms is None:
            return None
        try:
            return self._rooms.room_name(session)
        except Exception:  # a transport stopping under us: no name, not a broken page
            return None

    async def read_alone(self, session: str, person: str) -> bool:
        """Whether ``person`` alone (and the bot) reads ``session`` now: where a sign-in
        link sent there may still be used. False when it cannot be told (fail closed)."""
        if self._rooms is None:
            return False
        try:
            audience = await self._rooms.room_audience(session)
        except Exception:  # the homeserver did not answer: the link waits, unused
            log.info("web: who reads %s could not be told", session, exc_info=True)
            return False
        return audience is not None and not audience.full and audience.only(person)

    # ---- the app ------------------------------------------------------------------------

    def base_app(self) -> web.Application:
        """The app with the pages every visitor needs (sign-in and out, the stylesheet); the
        route modules add theirs."""
        app = web.Application(middlewares=[self._headers])
        r = app.router
        r.add_get("/", self._index)
        r.add_get("/static/style.css", self._style)
        r.add_get("/login", self._login_page)
        r.add_post("/login", self._login)
        r.add_post("/logout", self.signed_in(self._logout))
        app.on_shutdown.append(self.imports.stop)
        return app

    @web.middleware
    async def _headers(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            response = self.message(None, exc.status, exc.reason, exc.reason)
        response.headers.update(HEADERS)
        return response

    # ---- rendering ----------------------------------------------------------------------

    def page(
        self, template: str, who: Who | None, status: int = 200, **values: Any
    ) -> web.Response:
        """A rendered page (the flash message for ``who``, if any, shown once)."""
        flash = self._flash.pop(who.session, None) if who is not None else None
        prefix = self.cfg.matrix.command_prefix if self.cfg.matrix is not None else None
        values.setdefault("words", ENGLISH)  # the person's pages hand their own (wording)
        html = self.env.get_template(template).render(
            who=who, flash=flash, command_prefix=prefix, **values
        )
        return web.Response(text=html, status=status, content_type="text/html")

    def message(
        self, who: Who | None, status: int, title: str, text: str, words: Words = ENGLISH
    ) -> web.Response:
        return self.page("message.html", who, status=status, title=title, text=text, words=words)

    def flash(self, who: Who, ok: bool, said: str | Meaning, text: str = "") -> None:
        """Keep a notice for ``who``'s next page: ``said`` is a ``Meaning`` the page words in
        its language (``Words.flash``; ``text`` shown for one it does not word), or text
        shown as it is (the admin pages')."""
        meaning = said if isinstance(said, Meaning) else Meaning("")
        self._flash[who.session] = Flash(ok, meaning, cut(said if isinstance(said, str) else text))
        self._flash.move_to_end(who.session)
        while len(self._flash) > FLASHES_KEPT:
            self._flash.popitem(last=False)

    async def _style(self, request: web.Request) -> web.Response:
        return web.Response(body=self._css, content_type="text/css")

    # ---- who is signed in ---------------------------------------------------------------

    @property
    def secure(self) -> bool:
        return self.cfg.web.public_url.startswith("https://")

    @property
    def cookie_name(self) -> str:
        return SECURE_COOKIE if self.secure else COOKIE

    def may_sign_in(self, person: str) -> bool:
        """Whether ``person`` may use the page now: the operator, or on the allow-list."""
        if person == OPERATOR:
            return True
        m = self.cfg.matrix
        return m is not None and (
            matches_any(person, m.allow_list)
            or self.is_admin(person)
            or matches_any(person, self.peer.people.globs)  # allowed from chat
        )

    def is_admin(self, person: str) -> bool:
        if person == OPERATOR:
            return True
        m = self.cfg.matrix
        return m is not None and matches_any(person, m.admins)

    def same_origin(self, request: web.Request) -> bool:
        """Whether a POST comes from our own pages, as the browser tells: ``Sec-Fetch-Site``
        (when sent) is ``same-origin`` (or ``none``: typed, not from a page), and ``Origin``
        (when sent) is this page's own (``web.public_url``, or the host the request was made
        to). A client that sends neither is no browser a site could steer: it is let in."""
        site = request.headers.get("Sec-Fetch-Site")
        if site is not None and site.strip().lower() not in ("same-origin", "none"):
            return False
        origin = request.headers.get("Origin")
        if origin is None:
            return True
        parsed = urlsplit(origin.strip())
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            return False  # "null": a sandboxed frame, a data: URL, a redirect from elsewhere
        own = {request.host.lower()}
        if self.cfg.web.public_url:
            own.add(urlsplit(self.cfg.web.public_url).netloc.lower())
        return parsed.netloc.lower() in own

    async def who(self, request: web.Request) -> Who | None:
        secret = request.cookies.get(self.cookie_name, "")
        if not secret or len(secret) > 128 or not secret.isascii():
            return None
        session = digest(secret)
        grant = await self.store.session(session, int(time.time()))
        if grant is None or not self.may_sign_in(grant.person):
            return None
        return Who(grant.person, self.is_admin(grant.person), grant.csrf, session)

    def signed_in(
        self, handler: Handler, admin: bool = False, max_bytes: int = FORM_MAX_BYTES
    ) -> Any:
        """A route that needs a session (and an admin, with ``admin``); a POST also needs the
        session's CSRF token in its form (of at most ``max_bytes``), checked before the
        handler runs. Nobody is read more than a small form before they are known."""

        async def route(request: web.Request) -> web.StreamResponse:
            who = await self.who(request)
            if who is None:
                return self.message(
                    None, 401, "Sign in", f"{NOT_SIGNED_IN} {ask_for_link(self.cfg)}"
                )
            if admin and not who.admin:
                return self.message(who, 403, "Admins only", "This page is for admins.")
            if request.method == "POST":
                if not self.same_origin(request):
                    log.warning("web: %s: a form posted from another site refused", who.person)
                    return self.message(who, 403, "Refused", CROSS_SITE)
                form = await self.form(request, max_bytes)
                if not same_secret(form.get("csrf", ""), who.csrf):
                    log.warning("web: %s: a form without its CSRF token refused", who.person)
                    return self.message(
                        who, 403, "Refused", "This form is not from this page (CSRF token)."
                    )
            return await handler(request, who)

        return route

    async def form(self, request: web.Request, max_bytes: int = FORM_MAX_BYTES) -> dict[str, str]:
        """The posted form, bounded (``max_bytes`` in all, ``FIELD_MAX_CHARS`` a text field);
        its files are kept for ``uploaded``."""
        cached = request.get(_FORM)
        if cached is not None:
            return dict(cached)
        bigger = request.clone(client_max_size=max_bytes)
        try:
            posted: MultiDictProxy[Any] = await bigger.post()
        except web.HTTPRequestEntityTooLarge:
            raise web.HTTPRequestEntityTooLarge(
                max_size=max_bytes, actual_size=request.content_length or 0
            ) from None
        except (ValueError, LookupError, AssertionError) as exc:
            # not UTF-8, a charset nobody knows, a multipart body without its boundary...
            # (UnicodeDecodeError is a ValueError; aiohttp asserts on some broken multiparts)
            log.debug("web: a form that could not be read refused: %s", type(exc).__name__)
            raise web.HTTPBadRequest(reason="This form could not be read.") from None
        form: dict[str, str] = {}
        files: dict[str, bytes] = {}
        for name, value in posted.items():
            if isinstance(value, str) and name not in form:
                if len(value) > FIELD_MAX_CHARS:
                    raise web.HTTPBadRequest(reason="A field of this form is too long.")
                if not _readable(value):
                    raise web.HTTPBadRequest(reason="A field of this form is not text.")
                form[name] = value
            elif isinstance(value, web.FileField) and name not in files:
                files[name] = value.file.read()
        request[_FORM] = form
        request[_FILES] = files
        return dict(form)

    def uploaded(self, request: web.Request, name: str) -> bytes | None:
        """A file the form posted (read by ``form``, within its bound), or None."""
        files: dict[str, bytes] = request.get(_FILES, {})
        return files.get(name)

    # ---- sign-in and out ----------------------------------------------------------------

    async def _index(self, request: web.Request) -> web.StreamResponse:
        who = await self.who(request)
        if who is None:
            return self.message(None, 401, "Sign in", ask_for_link(self.cfg))
        return see_other(f"{PREFIX}/admin" if who.operator else f"{PREFIX}/me")

    async def _login_page(self, request: web.Request) -> web.Response:
        # A GET never uses the link (a link preview would): the button posts it.
        token = request.query.get("t", "")
        if not token or len(token) > 128:
            return self.message(None, 400, "Sign in", "This sign-in link is incomplete.")
        words = Words(page_lang(request.headers.get("Accept-Language")))
        return self.page("login.html", None, title=words.title_login, token=token, words=words)

    async def _login(self, request: web.Request) -> web.StreamResponse:
        if not self.same_origin(request):
            log.debug("web: a sign-in posted from another site refused")
            return self.message(None, 403, "Refused", CROSS_SITE)
        form = await self.form(request)
        token = form.get("t", "")
        now = int(time.time())
        usable = 0 < len(token) <= 128 and token.isascii() and token.isprintable()
        grant = await self.store.take_link(digest(token), now) if usable else None
        if grant is None:
            log.info("web: a used, expired or unknown sign-in link refused")
            return self.message(
                None, 403, "Link not valid", f"{LINK_NOT_VALID} {ask_for_link(self.cfg)}"
            )
        if not self.may_sign_in(grant.person):
            return self.message(None, 403, "Not allowed", "You are not on this bot's allow-list.")
        if grant.room and not await self.read_alone(grant.room, grant.person):
            log.info("web: a sign-in link refused: the room it was sent in is read by others now")
            return self.message(
                None, 403, "Link not valid", f"{LINK_SHARED_ROOM} {ask_for_link(self.cfg)}"
            )
        secret = secrets.token_urlsafe(32)
        hours = self.cfg.web.session_hours
        session = WebGrant(
            grant.person, grant.admin, now + int(hours * 3600), secrets.token_urlsafe(32)
        )
        await self.store.add_session(digest(secret), session, now)
        log.info("web: %s signed in", grant.person)
        where = f"{PREFIX}/admin" if grant.person == OPERATOR else f"{PREFIX}/me"
        response = see_other(where)
        response.set_cookie(
            self.cookie_name,
            secret,
            max_age=int(hours * 3600),
            path="/",
            secure=self.secure,
            httponly=True,
            samesite="Strict",
        )
        return response

    async def _logout(self, request: web.Request, who: Who) -> web.StreamResponse:
        await self.store.end_session(who.session)
        self._flash.pop(who.session, None)
        log.info("web: %s signed out", who.person)
        words = Words(page_lang(request.headers.get("Accept-Language")))
        response = self.message(None, 200, words.signed_out, words.signed_out_text, words)
        response.del_cookie(self.cookie_name, path="/")
        return response

    # ---- the one way in -----------------------------------------------------------------

    def own_audience(self, who: Who) -> Audience:
        """The person's own view: a room where only they read (like a DM with the bot)."""
        return room_audience(WEB_SESSION, {who.person}, lambda _: who.admin)

    async def command(self, who: Who, call: Call, as_admin: bool = False) -> Reply:
        """Run one command as ``who`` through the command tree, its arguments as the form gave
        them (never quoted into a line and parsed again); logged under their name.

        ``as_admin``: an admin page's action, with the operator's full view (what ``chazbot
        cmd`` sees); otherwise the person's own view (``own_audience``)."""
        audience = None if as_admin else self.own_audience(who)
        sender = who.person if not who.operator else "local"
        reply = await self.peer.command(
            call, session=WEB_SESSION, sender=sender, is_admin=who.admin, audience=audience
        )
        log.info(
            "web: %s ran %s: %s",
            who.person,
            call.shown()[:200],
            "ok" if reply.ok else reply.text.splitlines()[0][:200],
        )
        return reply

    async def act(
        self, who: Who, call: Call, back: str, as_admin: bool = False
    ) -> web.StreamResponse:
        """Run a command, keep its reply for the next page, and go back there (303)."""
        reply = await self.command(who, call, as_admin)
        self.flash(who, reply.ok, reply.meaning or reply.text, reply.text)
        return see_other(local_path(back))

    async def act_done(self, back: str) -> web.StreamResponse:
        """Back to ``back`` without running anything (the flash says why)."""
        return see_other(local_path(back))


def same_secret(given: str, expected: str) -> bool:
    """``given == expected`` in constant time, for any ``given`` a client sends (non-ASCII
    text included: compared as UTF-8 bytes, so it is a plain mismatch, never an error)."""
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )


def _readable(value: str) -> bool:
    """Text that can be stored and shown: no lone surrogates (control characters pass: a
    row's key may hold them, and its Forget form must post it back)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def see_other(path: str) -> web.Response:
    """A 303 to one of our pages (what a form's POST answers: the next GET shows the result)."""
    return web.Response(status=303, headers={"Location": path})


def shown_when(row: MemoryRow) -> str:
    """When a row was written, as the pages show it (UTC, to the minute)."""
    return f"{to_datetime(row.ts):%Y-%m-%d %H:%M}"


def local_path(path: str, fallback: str = f"{PREFIX}/me") -> str:
    """``path`` if it is a page of ours, else ``fallback`` (never a redirect elsewhere)."""
    return path if _LOCAL_PATH.fullmatch(path) and "//" not in path else fallback


def query(path: str, **params: Any) -> str:
    """``path`` with the non-empty ``params`` as its query string."""
    kept = {k: v for k, v in params.items() if v not in (None, "", 0)}
    return f"{path}?{urlencode(kept)}" if kept else path


def page_number(request: web.Request, last: int) -> int:
    """The ``page`` query parameter, 0-based, clamped to ``[0, last]``."""
    raw = request.query.get("page", "0")
    number = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 7 else 0
    return max(0, min(number, last))


__all__ = [
    "PREFIX",
    "WEB_SESSION",
    "Pages",
    "Who",
    "local_path",
    "page_number",
    "query",
    "see_other",
]

"""``/web``: a one-time sign-in link to the memory page (SPEC §10), and how links are made.

Sign-in goes through Matrix, with no password of ours: the bot sends the link only in a DM
with the person who asked (a group room would show it to everyone there), and ``chazbot
web-link`` prints one for the operator. A link is a random secret, stored only as its sha256
(``web_signins.WebSignIns``, the memory page's own tables), taken once, valid
``LINK_TTL_S``; a person gets at most ``LINKS_PER_WINDOW`` links per ``LINK_WINDOW_S``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import secrets
import time

from chazbot.commands.context import Context
from chazbot.commands.tree import CommandTree, Reply
from chazbot.commands.web_signins import WebGrant, WebSignIns
from chazbot.config import Config
from chazbot.errors import InputError, PermissionDenied, Unavailable
from chazbot.ledger import Ledger
from chazbot.memory.audience import OPERATOR

LINK_TTL_S = 600
LINK_WINDOW_S = 600
LINKS_PER_WINDOW = 5
SECRET_BYTES = 32
LOGIN_PATH = "/ui/login"

COMMANDS = CommandTree()

NOT_SIGNED_IN = "You are not signed in (or your sign-in ended)."
LINK_NOT_VALID = "This sign-in link was used already, has expired or is unknown."
LINK_SHARED_ROOM = (
    "This sign-in link was sent in a room that someone else can read now, so it signs no one in."
)
"""What the memory page says to someone without a session or with a spent link, before
``ask_for_link``."""


def ask_for_link(cfg: Config) -> str:
    """How to get a sign-in link, as the memory page tells a visitor: this command with the
    Matrix command prefix configured, or the operator's ``chazbot web-link`` without Matrix."""
    if cfg.matrix is None:
        return "The operator gets a sign-in link with “chazbot web-link”."
    command = f"{cfg.matrix.command_prefix} web"
    return f"Send “{command}” to the bot in a direct message for a sign-in link."


def digest(secret: str) -> str:
    """How a link or session secret is stored and looked up: its sha256, hex."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def base_url(cfg: Config) -> str:
    """Where the memory page is reached: ``web.public_url``, else ``http_listen``'s address;
    an InputError saying what to set when neither is an address a browser can open."""
    if not cfg.web.enabled:
        raise InputError("the memory page is off: an admin turns it on with web.enabled: true")
    if not cfg.http_listen:
        raise InputError("the memory page needs http_listen (it is served there)")
    if cfg.web.public_url:
        return cfg.web.public_url
    host, _, port = cfg.http_listen.rpartition(":")
    bare = host.strip("[]")
    try:
        wildcard = ipaddress.ip_address(bare).is_unspecified
    except ValueError:
        wildcard = False
    if wildcard:
        raise InputError(
            f"http_listen {cfg.http_listen} binds every interface, which is no address to open:"
            " set web.public_url to the address people reach the page at"
        )
    return f"http://{host}:{port}"


async def issue_link(
    ledger: Ledger,
    cfg: Config,
    person: str,
    admin: bool,
    now: float | None = None,
    room: str = "",
) -> str:
    """A new one-time sign-in link for ``person`` (Unavailable when they asked too often);
    ``room``: the session it is sent in, which must still be read by ``person`` alone when
    the link is used ("" for the operator's)."""
    base = base_url(cfg)
    when = int(time.time() if now is None else now)
    secret = secrets.token_urlsafe(SECRET_BYTES)
    grant = WebGrant(person, admin, when + LINK_TTL_S, room=room)
    stored = await WebSignIns(ledger).add_link(
        digest(secret), grant, when, LINK_WINDOW_S, LINKS_PER_WINDOW
    )
    if not stored:
        raise Unavailable(
            f"{LINKS_PER_WINDOW} sign-in links in {LINK_WINDOW_S // 60} minutes is the most;"
            " use one of those or ask again later"
        )
    return f"{base}{LOGIN_PATH}?t={secret}"


def in_dm(ctx: Context) -> bool:
    """Whether only the sender reads the reply: a room with the sender (and the bot) alone.

    The room's audience says who is there, invited people included; an agent whose memory
    is agent-wide hears without one, and then the members recorded for its rows say it."""
    audience = ctx.hearing.audience
    if audience is not None:
        return not audience.full and audience.only(ctx.sender)
    origin = ctx.hearing.origin
    return origin is not None and origin.audience == (ctx.sender,)


@COMMANDS.command(
    "web", (), "a one-time link to your memory page (the bot sends it in a DM)", first=True
)
async def web(ctx: Context) -> Reply:
    cfg = ctx.agents.config
    base_url(cfg)  # off, or no address: say so before anything else
    operator = ctx.hearing.audience is None and ctx.hearing.origin is None
    if operator:  # the terminal, ``chazbot cmd`` and ``chazbot web-link``
        link = await issue_link(ctx.ledger, cfg, OPERATOR, True)
        return Reply(True, f"Your sign-in link (admin; one use, 10 minutes): {link}")
    if not in_dm(ctx):
        raise PermissionDenied(
            f"a sign-in link is sent only in a DM: message me {ctx.prefix}web in a direct"
            " chat with me"
        )
    link = await issue_link(ctx.ledger, cfg, ctx.sender, ctx.is_admin, room=ctx.session.name)
    return Reply(
        True,
        f"Your memory page (one use, valid 10 minutes; do not share it): {link}",
    )


__all__ = [
    "COMMANDS",
    "LINK_NOT_VALID",
    "LINK_SHARED_ROOM",
    "LINK_TTL_S",
    "NOT_SIGNED_IN",
    "ask_for_link",
    "base_url",
    "digest",
    "in_dm",
    "issue_link",
    "web",
]

"""The pure rules of the Matrix transport: who is answered, what a message asks for, and what
a reply looks like. Plain functions over plain data (event content dicts), no I/O, so they are
tested without a homeserver; the rest of ``chazbot.transports.matrix`` is the nio adapter
around them.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from collections import OrderedDict, deque
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote

from markdown_it import MarkdownIt

from chazbot.config import MATRIX_SESSION_PREFIX

SESSION_PREFIX = MATRIX_SESSION_PREFIX
"""A Matrix room's session is named ``matrix:<room id>`` (declared once, in config, whose room
rules read it too)."""
MAX_PART_CHARS = 8000
"""A reply longer than this is sent as several messages, cut at paragraph or line ends."""
MAX_CONTENT_BYTES = 40_000
"""Body plus HTML of one message; leaves room for Megolm's base64 under the 64 KiB event cap."""
ROOM_CHANGED_NOTICE = (
    "Someone joined this room (or it opened up) while I was answering, so I did not send "
    "the answer. Please ask again."
)
BOUNDED_JOIN_RULES = frozenset({"invite", "knock", "private"})
"""Join rules under which the people in a room are its readers (SPEC §5c); any other (public,
restricted) lets people in unasked, so the room sees only its own rows."""
UNDECRYPTABLE_NOTICE = (
    "I could not decrypt a message in this room (I have no key for it). "
    "If it was meant for me, please send it again."
)
NOT_ALLOWED_NOTICE = "I only answer people an admin has allowed; ask {admin}."
"""Told (once per room a day) to someone not allowed who addresses the bot."""


def not_allowed_notice(admins: Iterable[str]) -> str:
    """The notice for someone not allowed, naming an admin to ask (the first written out
    in full; a glob names nobody)."""
    named = next((a for a in admins if not any(c in a for c in "*?[")), None)
    return NOT_ALLOWED_NOTICE.format(admin=named or "whoever runs this bot")


@dataclass(frozen=True)
class NoticeLimits:
    """How often the not-allowed notice may be sent."""

    per_room_s: float = 86_400.0  # one notice per room in this long
    burst: int = 5  # notices at most in ``window_s`` over all rooms
    window_s: float = 60.0

    @property
    def rooms_kept(self) -> int:
        """Rooms remembered: every room noticed within ``per_room_s`` fits, so the per-room
        rule holds exactly while memory stays bounded."""
        return int(self.burst * (self.per_room_s / self.window_s + 1)) + 1


class NoticeGate:
    """Decides whether to tell a not-allowed sender so: once per room per ``per_room_s``
    and at most ``burst`` per ``window_s`` overall. Memory is bounded by
    ``limits.rooms_kept`` rooms and ``limits.burst`` times, whatever the traffic."""

    def __init__(self, limits: NoticeLimits | None = None) -> None:
        self.limits = limits or NoticeLimits()
        self._rooms: OrderedDict[str, float] = OrderedDict()  # room -> when told, oldest first
        self._recent: deque[float] = deque()
        self.ignored = 0  # messages from people not allowed that addressed the bot
        self.told = 0

    def __len__(self) -> int:
        return len(self._rooms)

    def allow(self, room_id: str, now: float) -> bool:
        """Whether to send the notice in ``room_id`` now (recorded when True)."""
        self.ignored += 1
        lim = self.limits
        while self._rooms:
            oldest, when = next(iter(self._rooms.items()))
            if now - when < lim.per_room_s and len(self._rooms) < lim.rooms_kept:
                break
            del self._rooms[oldest]
        last = self._rooms.get(room_id)
        if last is not None and now - last < lim.per_room_s:
            return False
        while self._recent and now - self._recent[0] >= lim.window_s:
            self._recent.popleft()
        if len(self._recent) >= lim.burst:
            return False
        self._recent.append(now)
        self._rooms[room_id] = now
        self._rooms.move_to_end(room_id)
        self.told += 1
        return True


@dataclass(frozen=True)
class Me:
    """The bot as a message may name it."""

    user_id: str
    display_names: tuple[str, ...] = ()

    @property
    def localpart(self) -> str:
        return self.user_id[1:].split(":", 1)[0]


@dataclass(frozen=True)
class Request:
    """What a message asks for: a command line (without the prefix) or an agent turn."""

    kind: Literal["command", "chat", "voice", "picture"]
    text: str


def session_name(room_id: str) -> str:
    """Each room is one session, kept across restarts."""
    return SESSION_PREFIX + room_id


def matches_any(user_id: str, globs: Sequence[str]) -> bool:
    """``fnmatch``-style MXID globs (``@*:example.org``), case-sensitive like MXIDs."""
    return any(fnmatch.fnmatchcase(user_id, glob) for glob in globs)


def _text(content: dict[str, Any], key: str) -> str:
    value = content.get(key)
    return value if isinstance(value, str) else ""


def _relates_to(content: dict[str, Any]) -> dict[str, Any]:
    rel = content.get("m.relates_to")
    return rel if isinstance(rel, dict) else {}


def is_edit(content: dict[str, Any]) -> bool:
    """An edit (``m.replace``) repeats a message that was already handled."""
    return _relates_to(content).get("rel_type") == "m.replace"


def strip_reply_fallback(body: str, content: dict[str, Any]) -> str:
    """Drop the ``> <@x> quoted`` lines older clients put before the text of a reply."""
    if not isinstance(_relates_to(content).get("m.in_reply_to"), dict):
        return body
    lines = body.split("\n")
    quoted = 0
    while quoted < len(lines) and lines[quoted].startswith(">"):
        quoted += 1
    if quoted and quoted < len(lines) and not lines[quoted].strip():
        return "\n".join(lines[quoted + 1 :])
    return body


def _name_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", re.IGNORECASE)


def _pill_targets(formatted_body: str) -> list[str]:
    targets = []
    for href in re.findall(r"""href\s*=\s*["']([^"']+)["']""", formatted_body, re.IGNORECASE):
        url = unquote(href)
        if url.startswith("https://matrix.to/#/"):
            targets.append(re.split(r"[?/]", url[len("https://matrix.to/#/") :], maxsplit=1)[0])
    return targets


def is_mentioned(content: dict[str, Any], me: Me) -> bool:
    """``m.mentions`` is authoritative when present; else MXID, localpart, name or a pill."""
    mentions = content.get("m.mentions")
    if isinstance(mentions, dict):
        ids = mentions.get("user_ids")
        return isinstance(ids, list) and me.user_id in ids
    body = _text(content, "body")
    if me.user_id.lower() in body.lower():
        return True
    for name in (me.localpart, *me.display_names):
        if name and _name_pattern(name).search(body):
            return True
    if _text(content, "format") == "org.matrix.custom.html":
        return me.user_id in _pill_targets(_text(content, "formatted_body"))
    return False


def strip_mention(body: str, me: Me) -> str:
    """The text without a leading mention of the bot (``chaz: hi`` → ``hi``)."""
    text = body.strip()
    names = sorted(
        {me.user_id, f"@{me.localpart}", me.localpart, *(n for n in me.display_names if n)},
        key=len,
        reverse=True,
    )
    for name in names:
        match = re.match(rf"{re.escape(name)}(?![\w-])\s*[:,]?\s*", text, re.IGNORECASE)
        if match:
            return text[match.end() :].strip()
    return text


def _after_prefix(text: str, prefix: str) -> str | None:
    """The rest of ``text`` after the command prefix, or None when it does not start with it."""
    if not prefix or text[: len(prefix)].casefold() != prefix.casefold():
        return None
    rest = text[len(prefix) :]
    if rest and not rest[0].isspace():
        return None
    return rest.strip()


def route(
    content: dict[str, Any],
    *,
    me: Me,
    prefix: str,
    is_dm: bool,
    command_words: Collection[str],
) -> Request | None:
    """What an ``m.text`` message from an allowed sender asks for, or None to stay silent.

    DMs are answered always; group rooms only for the prefix or a mention. ``<prefix>
    <known command word> …`` is a command, ``<prefix> <other text>`` and mentions are agent turns.
    """
    body = strip_reply_fallback(_text(content, "body"), content).strip()
    mentioned = not is_dm and is_mentioned(content, me)
    text = strip_mention(body, me) if (is_dm or mentioned) else body
    rest = _after_prefix(text, prefix)
    if rest is not None:
        if not rest:
            return Request("command", "help")
        first = rest.split(None, 1)[0].lower().lstrip("/")
        if first in command_words:
            return Request("command", rest)
        return Request("chat", rest)
    if is_dm or mentioned:
        return Request("chat", text or body) if (text or body) else None
    return None


MEDIA_KINDS: dict[str, Literal["voice", "picture"]] = {"m.audio": "voice", "m.image": "picture"}
"""Media the bot takes (#39): a voice message is heard, a picture seen (or said unseen)."""


def caption(content: dict[str, Any]) -> str:
    """A media message's caption: since Matrix 1.10 ``body`` is one when ``filename`` is set
    and differs from it; otherwise ``body`` is only the file's name."""
    body, filename = _text(content, "body").strip(), _text(content, "filename").strip()
    return body if filename and body and body != filename else ""


def media_route(content: dict[str, Any], *, me: Me, prefix: str, is_dm: bool) -> Request | None:
    """What a voice message or a picture from an allowed sender asks for: in a DM always; in
    a group room only when its caption mentions the bot or starts with the prefix (or
    ``m.mentions`` names it)."""
    kind = MEDIA_KINDS.get(_text(content, "msgtype"))
    if kind is None:
        return None
    text = caption(content)
    mentioned = not is_dm and is_mentioned(content, me)
    rest = _after_prefix(text, prefix)
    if rest is not None:
        text = rest
    elif is_dm or mentioned:
        text = strip_mention(text, me)
    else:
        return None
    return Request(kind, text)


# ---- replies --------------------------------------------------------------------------------


def relation(content: dict[str, Any], event_id: str) -> dict[str, Any]:
    """In the thread when the message was in one (with a reply fallback), else a reply to it."""
    rel = _relates_to(content)
    root = rel.get("event_id")
    if rel.get("rel_type") == "m.thread" and isinstance(root, str):
        return {
            "rel_type": "m.thread",
            "event_id": root,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": event_id},
        }
    return {"m.in_reply_to": {"event_id": event_id}}


_MARKDOWN = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)
"""The one renderer of replies: markdown-it-py (as Textual and Rich use), CommonMark with tables
and strikethrough, every line break kept (``breaks``), raw HTML off (shown as text, never passed
to clients), unsafe link schemes (``javascript:``…) left as text by its link check. It parses in
time linear in the text (no shape of 8,000 characters costs more than ~0.1 s of a thread,
``bench/render_markdown.py``); nesting deeper than its ``maxNesting`` (20) is cut there, so no
recursion limit decides the output; it keeps no state between texts, so one serves every
thread."""


def render_markdown(text: str) -> str:
    """Markdown → the HTML of ``formatted_body`` (raw HTML escaped)."""
    html: str = _MARKDOWN.render(text)
    return html


def _open_fence(text: str) -> str | None:
    """The opening line of a code fence left open at the end of ``text``, if any."""
    fence: str | None = None
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else stripped
    return fence


def split_message(text: str, limit: int = MAX_PART_CHARS) -> list[str]:
    """Cut a long text at paragraph ends, else line ends, else spaces; keep code fences whole.

    A fence left open at a cut is closed there and opened again in the next part.
    """
    rest = text.strip("\n")
    parts: list[str] = []
    budget = max(limit - 8, 16)  # room to close a fence
    while len(rest) > limit:
        window = rest[: budget + 1]
        cut = -1
        for sep in ("\n\n", "\n", " "):
            cut = window.rfind(sep, 0, budget)
            if cut >= budget // 2:
                break
        if cut < budget // 2:
            cut = budget
        head, rest = rest[:cut].rstrip(), rest[cut:].lstrip("\n ")
        fence = _open_fence(head)
        if fence is not None and len(fence) < budget // 4:
            head += "\n```"
            rest = f"{fence}\n{rest}"
        if head:
            parts.append(head)
    if rest.strip() or not parts:
        parts.append(rest)
    return parts


def _size(content: dict[str, Any]) -> int:
    return len(json.dumps(content, ensure_ascii=False).encode("utf-8"))


def _fit(text: str, build: Any, budget: int = MAX_PART_CHARS) -> list[dict[str, Any]]:
    """``build`` each part of ``text``; a part whose event would be too large is halved."""
    contents: list[dict[str, Any]] = []
    for part in split_message(text, budget):
        content = build(part)
        if _size(content) > MAX_CONTENT_BYTES and len(part) > 64:
            contents.extend(_fit(part, build, max(len(part) // 2, 32)))
        else:
            contents.append(content)
    return contents


def _reply_contents(
    text: str,
    reply_to: str,
    source: dict[str, Any],
    sender: str,
    *,
    html: bool,
    msgtype: str = "",
) -> list[dict[str, Any]]:
    """The parts of a reply, each related to the message it answers and mentioning its sender;
    ``m.text`` with an HTML body from Markdown, or a plain ``m.notice``."""

    def build(part: str) -> dict[str, Any]:
        kind = msgtype or ("m.text" if html else "m.notice")
        content: dict[str, Any] = {"msgtype": kind, "body": part}
        if html:
            content["format"] = "org.matrix.custom.html"
            content["formatted_body"] = render_markdown(part)
        content["m.relates_to"] = relation(source, reply_to)
        content["m.mentions"] = {"user_ids": [sender]}
        return content

    return _fit(text or "(empty)", build)


def notice_contents(
    text: str, reply_to: str, source: dict[str, Any], sender: str, *, markdown: bool = False
) -> list[dict[str, Any]]:
    """A command reply (or an error): ``m.notice`` parts, each related to the message; with
    ``markdown`` (``help``) an HTML body from the Markdown too."""
    return _reply_contents(text, reply_to, source, sender, html=markdown, msgtype="m.notice")


def text_contents(
    text: str, reply_to: str, source: dict[str, Any], sender: str
) -> list[dict[str, Any]]:
    """An agent reply: ``m.text`` parts with an HTML ``formatted_body`` from Markdown."""
    return _reply_contents(text, reply_to, source, sender, html=True)


def transaction_id(event_id: str, part: int) -> str:
    """Stable per answered event and part: a retried send is deduplicated by the homeserver."""
    digest = hashlib.sha256(f"{event_id}\x00{part}".encode()).hexdigest()[:32]
    return f"chazbot-{digest}-{part}"


__all__ = [
    "BOUNDED_JOIN_RULES",
    "MAX_CONTENT_BYTES",
    "MAX_PART_CHARS",
    "MEDIA_KINDS",
    "NOT_ALLOWED_NOTICE",
    "ROOM_CHANGED_NOTICE",
    "UNDECRYPTABLE_NOTICE",
    "Me",
    "NoticeGate",
    "NoticeLimits",
    "Request",
    "caption",
    "is_edit",
    "is_mentioned",
    "matches_any",
    "media_route",
    "not_allowed_notice",
    "notice_contents",
    "relation",
    "render_markdown",
    "route",
    "session_name",
    "split_message",
    "strip_mention",
    "strip_reply_fallback",
    "text_contents",
    "transaction_id",
]

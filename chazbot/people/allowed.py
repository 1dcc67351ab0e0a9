"""People an admin allowed from chat (``!chaz people allow|remove|list``).

Kept in a peer-local DB of kind ``people`` written by the peer key (signed entries like every
other change, registered in the peer-local ``registry`` table and never synced: only banks
and agents are served). Its ``people`` store
has one field per MXID glob: ``{"by": admin, "at": unix seconds}`` while allowed, ``null``
once removed. ``matrix.allow_list`` and ``matrix.admins`` in config.yaml stay the floor:
what the file allows, chat cannot remove.

The globs are cached in memory, so checking a sender is a synchronous set lookup and a
change is effective at once (the Matrix router and the web page read ``globs``).
"""

from __future__ import annotations

import asyncio
import fnmatch
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chazbot.errors import InputError
from chazbot.ledger.keys import KeyPair

if TYPE_CHECKING:
    from chazbot.ledger.ledger import Ledger

KIND = "people"
STORE = "people"
MAX_PEOPLE = 500
"""Chat-allowed entries at most (a bound on what a mistyped loop in chat can add)."""
MAX_GLOB_CHARS = 255

_GLOB = re.compile(r"@[^\s:]+:[^\s]+")


def matches_any(user_id: str, globs: Iterable[str]) -> bool:
    """``fnmatch``-style MXID globs (``@*:example.org``), case-sensitive like MXIDs."""
    return any(fnmatch.fnmatchcase(user_id, glob) for glob in globs)


def check_glob(glob: str) -> str:
    """An MXID or an MXID glob as config.yaml takes them (``@ana:example.org``,
    ``@*:example.org``); InputError otherwise."""
    text = glob.strip()
    if len(text) > MAX_GLOB_CHARS or not _GLOB.fullmatch(text):
        raise InputError(
            f"{glob[:80]!r} is not a Matrix ID: give one like @ana:example.org "
            "(or a glob like @*:example.org)"
        )
    if text.replace("*", "").replace("?", "") in ("@:", "@"):
        raise InputError("that glob matches everyone on every server; name a server at least")
    return text


UNRELATED_IDS = (
    "@q7zx:zq7x.org",
    "@0:a.co",
    "@m:zq7x.co.uk",
    "@k-p.l_9:unrelated-zq7x.example.net:8448",
    "@x:y",
    "@w:203.0.113.9",
    "@v:198.51.100.254:443",
    "@u:zq7x.xn--p1ai",
    "@t:a.b.c.d.e.f.g.h.zq7x.chat",
    "@s:example.zq7x",
    "@r:exbmple.org",
    "@p:example.org.zq7x.net",
    "@aa:ab.cd",
)
"""MXIDs on servers nobody means when allowing someone: a glob that matches one of them lets
in people the admin never named (``check_narrow_glob``)."""
_WILD = frozenset("*?")
_SERVER_GLOB = re.compile(r"[A-Za-z0-9.*?-]+(:[0-9*?]+)?")
"""A server name (a DNS name or IPv4 address, a port) with ``*`` and ``?`` in it; IPv6
literals (``[::1]``) are left to config.yaml: in a glob their brackets are a class."""


def check_narrow_glob(glob: str) -> str:
    """``check_glob``, and a glob that names whom it lets in (``people allow``): only ``*``
    and ``?`` are wildcards (no ``[…]`` classes), it matches none of ``UNRELATED_IDS``, and
    its server's domain is written out (``@*:example.org``, ``@*:*.example.org``): a
    wildcard in the last two labels (``@*:*.org``, ``@*:example.*``, ``@*:ex?mple.org``)
    is a server anyone can register. InputError (one line) otherwise."""
    text = check_glob(glob)
    shown = text[:80]
    if set("[]\\") & set(text) or not _SERVER_GLOB.fullmatch(text.split(":", 1)[1]):
        raise InputError(
            f"{shown} has more than * and ? as wildcards, or a server name Matrix does not "
            "allow; write the server out, like @*:example.org"
        )
    stranger = next((u for u in UNRELATED_IDS if fnmatch.fnmatchcase(u, text)), None)
    host = text.split(":", 1)[1].split(":", 1)[0]
    labels = host.split(".")
    named = labels[-2:] if len(labels) > 1 else labels
    if stranger is not None or any(_WILD & set(label) for label in named):
        who = f" (it lets in {stranger})" if stranger is not None else ""
        raise InputError(
            f"{shown} matches people on servers it does not name{who}; write the server's "
            "domain out, like @*:example.org or @*:*.example.org"
        )
    return text


@dataclass(frozen=True)
class Allowed:
    """One chat-allowed glob: who allowed it and when (unix seconds)."""

    glob: str
    by: str
    at: int


class People:
    """The chat-allowed globs of one peer; ``await load()`` once, then ``globs`` is current."""

    def __init__(self, ledger: Ledger, key: KeyPair) -> None:
        self._ledger = ledger
        self._key = key
        self._lock = asyncio.Lock()
        self._db: str | None = None
        self._entries: dict[str, Allowed] = {}

    @property
    def globs(self) -> tuple[str, ...]:
        """The chat-allowed globs now (sorted)."""
        return tuple(sorted(self._entries))

    def entries(self) -> list[Allowed]:
        return [self._entries[g] for g in sorted(self._entries)]

    async def load(self) -> None:
        hosted = await self._ledger.hosted.get(KIND, KIND)
        self._db = None if hosted is None else hosted.db
        self._entries = await self._read()

    async def _read(self) -> dict[str, Allowed]:
        if self._db is None:
            return {}
        found: dict[str, Allowed] = {}
        for glob, value in (await self._ledger.fields(self._db, STORE)).items():
            if isinstance(value, dict):
                found[glob] = Allowed(glob, str(value.get("by", "")), _int(value.get("at")))
        return found

    async def _database(self) -> str:
        if self._db is None:
            hosted = await self._ledger.hosted.get(KIND, KIND)
            if hosted is None:
                db = await self._ledger.create_db(self._key, {"kind": KIND, "name": KIND})
                await self._ledger.hosted.add(KIND, KIND, db)
                self._db = db
            else:
                self._db = hosted.db
        return self._db

    async def allow(self, glob: str, by: str) -> bool:
        """Allow ``glob`` (checked with ``check_glob`` first); False when it was already."""
        checked = check_glob(glob)
        async with self._lock:
            if checked in self._entries:
                return False
            if len(self._entries) >= MAX_PEOPLE:
                raise InputError(
                    f"{MAX_PEOPLE} people are allowed from chat already; remove some, or use "
                    "a glob (@*:example.org) or matrix.allow_list in config.yaml"
                )
            entry = Allowed(checked, by[:255], int(time.time()))
            await self._write(checked, {"by": entry.by, "at": entry.at})
            self._entries[checked] = entry
            return True

    async def remove(self, glob: str) -> bool:
        """Take ``glob`` off the chat-allowed list; False when it was not on it."""
        checked = check_glob(glob)
        async with self._lock:
            if checked not in self._entries:
                return False
            await self._write(checked, None)
            del self._entries[checked]
            return True

    async def _write(self, glob: str, value: Any) -> None:
        db = await self._database()
        await self._ledger.write(
            db, self._key, {STORE: [{"op": "set", "field": glob, "value": value}]}
        )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


__all__ = [
    "MAX_PEOPLE",
    "UNRELATED_IDS",
    "Allowed",
    "People",
    "check_glob",
    "check_narrow_glob",
    "matches_any",
]

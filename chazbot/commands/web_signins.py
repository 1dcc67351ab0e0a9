"""The memory page's sign-in state: its own peer-local tables (never synced) and their store.

A one-time link (``/web``, ``chazbot web-link``) and a browser session are each stored under
the sha256 of their secret (the secret itself is never stored) with the grant they carry
(``web_grants``); per person, the times links were issued (``web_issued``: the rate limit).
Every method is one transaction on the ledger's thread, so a link is taken once even by two
requests at once. Links are made here in the command layer (``web_cmds``) and taken by the
web transport (``transports/web``), so the store lives at the lower of the two.

The tables are declared as a ``LocalTable`` (``WEB_SIGNINS``) that the ledger brings up to
date. Up to schema version 4 this state lived in the ledger's ``local_kv`` (keys
``web-link/<sha256>``, ``web-session/<sha256>``, ``web-issued/<person>``): the last step
moves it here, so a signed-in browser stays signed in across the upgrade.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from chazbot.ledger.core import LedgerCore
from chazbot.ledger.ledger import Ledger
from chazbot.ledger.tables import LocalTable, prefix_range, transaction

LINK, SESSION = "link", "session"
_OLD_PREFIXES = {LINK: "web-link/", SESSION: "web-session/"}
_OLD_ISSUED = "web-issued/"


@dataclass(frozen=True)
class WebGrant:
    """Who a web sign-in link or session is for: ``person`` (an MXID, or ``operator``),
    whether it was issued as an admin's, when it ends (Unix seconds), and for a session the
    token its forms carry (CSRF)."""

    person: str
    admin: bool
    expires: int
    csrf: str = ""
    room: str = ""
    """For a link: the session it was sent in ("" for the operator's): it signs in only while
    that room is still read by its person alone."""

    def to_json(self) -> str:
        return json.dumps(
            {"person": self.person, "admin": self.admin, "expires": self.expires, "csrf": self.csrf}
        )

    @classmethod
    def from_json(cls, text: str) -> WebGrant | None:
        try:
            data = json.loads(text)
            return cls(
                str(data["person"]), bool(data["admin"]), int(data["expires"]), str(data["csrf"])
            )
        except (ValueError, KeyError, TypeError):
            return None


def _from_local_kv(conn: sqlite3.Connection) -> None:
    """Move sign-in state kept in ``local_kv`` (schema version 4 and older) into the tables;
    a value that does not read as a grant or a list of times was unusable already and goes."""
    for kind, prefix in _OLD_PREFIXES.items():
        lo, hi = prefix_range(prefix)
        rows = conn.execute(
            "SELECT key, value FROM local_kv WHERE key >= ? AND key < ?", (lo, hi)
        ).fetchall()
        for key, value in rows:
            grant = WebGrant.from_json(str(value))
            if grant is not None:
                conn.execute(
                    "INSERT OR REPLACE INTO web_grants (kind, digest, person, admin, expires,"
                    " csrf) VALUES (?, ?, ?, ?, ?, ?)",
                    (kind, str(key)[len(prefix) :], *_columns(grant)),
                )
        conn.execute("DELETE FROM local_kv WHERE key >= ? AND key < ?", (lo, hi))
    lo, hi = prefix_range(_OLD_ISSUED)
    for key, value in conn.execute(
        "SELECT key, value FROM local_kv WHERE key >= ? AND key < ?", (lo, hi)
    ).fetchall():
        try:
            times = [int(t) for t in json.loads(value)]
        except (ValueError, TypeError):
            continue
        person = str(key)[len(_OLD_ISSUED) :]
        conn.executemany(
            "INSERT INTO web_issued (person, at) VALUES (?, ?)", [(person, t) for t in times]
        )
    conn.execute("DELETE FROM local_kv WHERE key >= ? AND key < ?", (lo, hi))


WEB_SIGNINS = LocalTable(
    "web.signins",
    ("web_grants", "web_issued"),
    (
        """CREATE TABLE web_grants (
            kind TEXT NOT NULL, digest TEXT NOT NULL, person TEXT NOT NULL,
            admin INTEGER NOT NULL, expires INTEGER NOT NULL, csrf TEXT NOT NULL,
            PRIMARY KEY (kind, digest)
        ) WITHOUT ROWID""",
        "CREATE INDEX web_grants_expires ON web_grants (kind, expires)",
        "CREATE TABLE web_issued (person TEXT NOT NULL, at INTEGER NOT NULL)",
        "CREATE INDEX web_issued_person ON web_issued (person, at)",
        _from_local_kv,
        "ALTER TABLE web_grants ADD COLUMN room TEXT NOT NULL DEFAULT ''",
    ),
)


def _columns(grant: WebGrant) -> tuple[str, int, int, str]:
    return grant.person, int(grant.admin), grant.expires, grant.csrf


def _grant(row: tuple[Any, ...]) -> WebGrant:
    person, admin, expires, csrf, room = row
    return WebGrant(str(person), bool(admin), int(expires), str(csrf), str(room))


_INSERT = (
    "INSERT OR REPLACE INTO web_grants (kind, digest, person, admin, expires, csrf, room)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_FIELDS = "person, admin, expires, csrf, room"


class WebSignIns:
    """One-time links and sessions of the memory page, and the links' rate limit."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    async def add_link(
        self, digest: str, grant: WebGrant, now: int, window: int, per_window: int
    ) -> bool:
        """Store a link unless ``grant.person`` had ``per_window`` links issued in the last
        ``window`` seconds (then False, nothing stored). Expired links go meanwhile."""

        def write(core: LedgerCore) -> bool:
            conn = core.conn
            with transaction(conn):
                conn.execute("DELETE FROM web_grants WHERE kind = ? AND expires <= ?", (LINK, now))
                conn.execute("DELETE FROM web_issued WHERE at <= ?", (now - window,))
                (issued,) = conn.execute(
                    "SELECT count(*) FROM web_issued WHERE person = ?", (grant.person,)
                ).fetchone()
                if int(issued) >= per_window:
                    return False
                conn.execute(
                    "INSERT INTO web_issued (person, at) VALUES (?, ?)", (grant.person, now)
                )
                conn.execute(_INSERT, (LINK, digest, *_columns(grant), grant.room))
                return True

        return await self._ledger.run_in(WEB_SIGNINS, write)

    async def take_link(self, digest: str, now: int) -> WebGrant | None:
        """The link's grant, removing it (single use); None if unknown, used or expired."""

        def step(core: LedgerCore) -> WebGrant | None:
            row = core.conn.execute(
                f"DELETE FROM web_grants WHERE kind = ? AND digest = ? RETURNING {_FIELDS}",
                (LINK, digest),
            ).fetchone()
            grant = None if row is None else _grant(row)
            return grant if grant is not None and grant.expires > now else None

        return await self._ledger.run_in(WEB_SIGNINS, step)

    async def add_session(self, digest: str, grant: WebGrant, now: int) -> None:
        def write(core: LedgerCore) -> None:
            conn = core.conn
            with transaction(conn):
                conn.execute(
                    "DELETE FROM web_grants WHERE kind = ? AND expires <= ?", (SESSION, now)
                )
                conn.execute(_INSERT, (SESSION, digest, *_columns(grant), ""))

        await self._ledger.run_in(WEB_SIGNINS, write)

    async def session(self, digest: str, now: int) -> WebGrant | None:
        """The live session under ``digest`` (None when unknown or expired)."""

        def step(core: LedgerCore) -> WebGrant | None:
            row = core.conn.execute(
                f"SELECT {_FIELDS} FROM web_grants WHERE kind = ? AND digest = ?",
                (SESSION, digest),
            ).fetchone()
            if row is None:
                return None
            grant = _grant(row)
            if grant.expires <= now:
                core.conn.execute(
                    "DELETE FROM web_grants WHERE kind = ? AND digest = ?", (SESSION, digest)
                )
                return None
            return grant

        return await self._ledger.run_in(WEB_SIGNINS, step)

    async def end_session(self, digest: str) -> None:
        await self._ledger.run_in(
            WEB_SIGNINS,
            lambda core: core.conn.execute(
                "DELETE FROM web_grants WHERE kind = ? AND digest = ?", (SESSION, digest)
            ),
        )


__all__ = ["WEB_SIGNINS", "WebGrant", "WebSignIns"]

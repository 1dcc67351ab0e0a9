"""The Matrix transport's own peer-local table: secrets by name (never synced, never printed).

``credentials`` holds the bot's device id and access token of the last login and the key
its e2e store is encrypted with (``login.Credentials`` says which names). It is declared here
as a ``LocalTable`` (``CREDENTIALS``) that the ledger brings up to date on its connection and
thread; every method is one step there. State files made before features owned their tables
(schema version 4 and older) hold this table from the ledger's first migration: the step
below makes exactly that table, ``IF NOT EXISTS``, so such a file keeps it and every row.
"""

from __future__ import annotations

from chazbot.ledger.core import LedgerCore
from chazbot.ledger.ledger import Ledger
from chazbot.ledger.tables import LocalTable

CREDENTIALS = LocalTable(
    "matrix.credentials",
    ("credentials",),
    ("CREATE TABLE IF NOT EXISTS credentials (name TEXT PRIMARY KEY, value TEXT NOT NULL)",),
    legacy=1,
)


class Secrets:
    """``credentials``: secrets by name."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    async def get(self, name: str) -> str | None:
        def read(core: LedgerCore) -> str | None:
            cur = core.conn.execute("SELECT value FROM credentials WHERE name = ?", (name,))
            row = cur.fetchone()
            return None if row is None else str(row[0])

        return await self._ledger.run_in(CREDENTIALS, read)

    async def set(self, name: str, value: str) -> None:
        await self._ledger.run_in(
            CREDENTIALS,
            lambda core: core.conn.execute(
                "INSERT OR REPLACE INTO credentials (name, value) VALUES (?, ?)", (name, value)
            ),
        )

    async def delete(self, name: str) -> None:
        await self._ledger.run_in(
            CREDENTIALS,
            lambda core: core.conn.execute("DELETE FROM credentials WHERE name = ?", (name,)),
        )


__all__ = ["CREDENTIALS", "Secrets"]

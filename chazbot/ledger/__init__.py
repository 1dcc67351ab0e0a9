"""The ledger: keys, signed entries, AuthSettings, databases in SQLite, and their checks.

It knows nothing of memory, agents or Matrix.
"""

from __future__ import annotations

from chazbot.ledger.auth import AUTH_STORE, KeyGrant, Level, Permission
from chazbot.ledger.encoding import canonical, content_id
from chazbot.ledger.entry import Entry
from chazbot.ledger.keys import KeyPair
from chazbot.ledger.ledger import Ledger
from chazbot.ledger.records import Applied, IngestResult, Row

__all__ = [
    "AUTH_STORE",
    "Applied",
    "Entry",
    "IngestResult",
    "KeyGrant",
    "KeyPair",
    "Ledger",
    "Level",
    "Permission",
    "Row",
    "canonical",
    "content_id",
]

"""Every feature's own peer-local tables (``ledger/tables.py``), in one list.

The ledger knows no feature; each feature declares its tables where it lives. What judges or
prepares a whole state file needs them all: ``chazbot run`` brings every one up to date at
start (a fresh state file gets each feature's tables), and ``verify`` and ``restore`` accept
a feature's tables only when they are named here. A new feature with a table adds it here.
"""

from __future__ import annotations

from chazbot.commands.web_signins import WEB_SIGNINS
from chazbot.ledger.tables import LocalTable
from chazbot.memory.vector_tables import VECTORS
from chazbot.sync.tables import SYNC
from chazbot.transports.matrix.credentials import CREDENTIALS
from chazbot.transports.matrix.state_tables import MATRIX_STATE

FEATURE_TABLES: tuple[LocalTable, ...] = (SYNC, WEB_SIGNINS, CREDENTIALS, MATRIX_STATE, VECTORS)

__all__ = ["FEATURE_TABLES"]

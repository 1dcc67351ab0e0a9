"""Peer-to-peer sync of databases over HTTP, beside the ledger (which does no I/O).

- ``protocol``: request signing, the replay cache, limits.
- ``wire``: every request and answer body, declared once (pydantic models both sides use).
- ``tickets``: ``eidetica:?db=…&pr=…`` tickets and addresses.
- ``tables``: sync's own peer-local tables (shares, remotes and cursors, access requests).
- ``store``: the policy over them: what this peer shares, its remotes, access requests.
- ``server``: the aiohttp server other peers pull from and push to; ``admission``: how a
  request is admitted before its endpoint runs; ``guard`` (the connection caps), ``guarded``
  (one connection under them, the site) and ``quiet_logs`` (what strangers' bytes log).
- ``client``: the signed HTTP client for one remote.
- ``replicator``: keeps every (database, remote) pair in step; imports. ``exchange``: one
  pair's pull and push steps.
"""

from __future__ import annotations

from chazbot.sync.client import SyncClient
from chazbot.sync.exchange import HAVE_CHECK_OVER
from chazbot.sync.protocol import SyncCounters
from chazbot.sync.replicator import ImportResult, PairStatus, Replicator
from chazbot.sync.server import SyncServer
from chazbot.sync.store import AccessDecision, RemoteRow, Serving
from chazbot.sync.tables import AccessRequest
from chazbot.sync.tickets import Ticket, format_ticket, parse_ticket

__all__ = [
    "HAVE_CHECK_OVER",
    "AccessDecision",
    "AccessRequest",
    "ImportResult",
    "PairStatus",
    "RemoteRow",
    "Replicator",
    "Serving",
    "SyncClient",
    "SyncCounters",
    "SyncServer",
    "Ticket",
    "format_ticket",
    "parse_ticket",
]

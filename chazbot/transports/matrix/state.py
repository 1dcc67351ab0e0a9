"""What the bot remembers between runs, in the peer-local ``local_kv`` table.

Never twice, never old: after each sync, the sync token and the ids of the events it brought
to handle are committed in one transaction, before their jobs start (a crash loses at most the
jobs running at that moment and never repeats one). The newest ``HANDLED_KEEP`` handled ids
are kept (older ones are pruned now and then), and the rooms already told that a message could
not be decrypted.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

HANDLED_KEEP = 5000
PRUNE_EVERY = 1000
_HANDLED = "matrix:handled:"
_UNDECRYPTABLE = "matrix:undecryptable:"


class MatrixState:
    """The sync token, the handled event ids and the rooms noticed as undecryptable."""

    def __init__(self, ledger: Any, user_id: str) -> None:
        self._ledger = ledger
        self._token_key = f"matrix:{user_id}:next_batch"
        self.since: str | None = None
        self.handled: OrderedDict[str, None] = OrderedDict()
        self.undecryptable_noticed: set[str] = set()
        self._persisted_token: str | None = None
        self._writes_since_prune = 0

    async def load(self) -> None:
        kv = self._ledger.kv
        self.since = await kv.get(self._token_key)
        self._persisted_token = self.since
        for key, _ in reversed(await kv.with_prefix(_HANDLED, newest=HANDLED_KEEP)):
            self.handled[key[len(_HANDLED) :]] = None
        rows = await kv.with_prefix(_UNDECRYPTABLE)
        self.undecryptable_noticed = {key[len(_UNDECRYPTABLE) :] for key, _ in rows}

    async def commit(
        self, next_batch: str, event_ids: list[str], undecryptable_rooms: list[str]
    ) -> None:
        """One commit: the new sync token, the events to handle (before their jobs start) and
        the rooms told about an undecryptable message."""
        if not event_ids and next_batch == self._persisted_token:
            self.since = next_batch
            return
        base = time.time_ns()
        rows = [(_HANDLED + event_id, f"{base + i:020d}") for i, event_id in enumerate(event_ids)]
        rows += [(_UNDECRYPTABLE + room_id, "1") for room_id in undecryptable_rooms]
        rows.append((self._token_key, next_batch))  # last: after all it covers
        await self._ledger.kv.set_many(rows)
        self._persisted_token = self.since = next_batch
        for event_id in event_ids:
            self.handled[event_id] = None
        while len(self.handled) > HANDLED_KEEP:
            self.handled.popitem(last=False)
        self._writes_since_prune += len(event_ids)
        if self._writes_since_prune >= PRUNE_EVERY:
            self._writes_since_prune = 0
            await self._ledger.kv.delete_prefix(_HANDLED, keep_newest=HANDLED_KEEP)


__all__ = ["HANDLED_KEEP", "MatrixState"]

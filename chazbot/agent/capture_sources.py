"""Which message each captured row came from: a peer-local map, message id -> rows (SPEC §5c).

A transport that can take a message back (Matrix: a redaction, an edit) names the message by
its id (the Matrix event id) when it asks for a turn; capture then records, in the peer-local
``local_kv`` table, the rows it wrote from that message: the agent, its DB, the session, the
speaker, the message's number in the session history, and the row ids. Recorded even when
capture kept nothing (an edit may say something worth keeping). The map is never synced: it
only lets this peer find what to forget; the forget itself is a signed entry like any other.
The newest ``SOURCES_KEEP`` messages are kept (older ones pruned now and then).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

log = logging.getLogger(__name__)

SOURCES_KEEP = 100_000
PRUNE_EVERY = 1000
MAX_SOURCE_ID_CHARS = 255
_PREFIX = "capture:source:"


@dataclass
class Source:
    """What was captured from one message."""

    agent: str
    db: str
    session: str
    sender: str
    n: int  # the message's number in the session history
    rows: list[str] = field(default_factory=list)  # memory row ids


def _source_of(text: str) -> Source | None:
    try:
        data = json.loads(text.split(" ", 1)[1])
        source = Source(**data)
    except (ValueError, IndexError, TypeError):
        return None
    strings = (source.agent, source.db, source.session, source.sender)
    if not all(isinstance(s, str) for s in strings) or not isinstance(source.n, int):
        return None
    if not isinstance(source.rows, list) or not all(isinstance(r, str) for r in source.rows):
        return None
    return source


class CaptureSources:
    """The map of message id -> ``Source`` in ``local_kv`` (``kv``: ``ledger.kv``)."""

    def __init__(self, kv: Any) -> None:
        self._kv = kv
        self._writes = 0

    async def record(self, message_id: str, source: Source) -> None:
        if not message_id or len(message_id) > MAX_SOURCE_ID_CHARS:
            return
        await self._kv.set(
            _PREFIX + message_id, f"{time.time_ns():020d} {json.dumps(asdict(source))}"
        )
        self._writes += 1
        if self._writes >= PRUNE_EVERY:
            self._writes = 0
            await self._kv.delete_prefix(_PREFIX, keep_newest=SOURCES_KEEP)

    async def get(self, message_id: str) -> Source | None:
        if not message_id or len(message_id) > MAX_SOURCE_ID_CHARS:
            return None
        text = await self._kv.get(_PREFIX + message_id)
        if text is None:
            return None
        source = _source_of(text)
        if source is None:
            log.warning("capture: the source record of %s does not read; ignored", message_id)
        return source

    async def drop(self, message_id: str) -> None:
        await self._kv.delete(_PREFIX + message_id)


__all__ = ["SOURCES_KEEP", "CaptureSources", "Source"]

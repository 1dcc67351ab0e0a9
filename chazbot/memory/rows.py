"""Memory rows: their limits, their ledger operations, and the results recall returns.

A memory row lives in the ``memory`` store of any database (agent DB or bank) as an insert
``{"key", "value", "tags"}``; ``forget`` inserts a tombstone ``{"key", "forget": true}``.
A row written by a delegated agent (signed by its peer's key) also has ``"agent": <name>``.
A row written during a turn has ``"from": {room, speaker, audience}`` and, unless its agent
keeps one memory for all rooms, ``"scope": <room>`` (``audience.py``, SPEC §5c); a tombstone
carries the scope of the row it hides.
A vector lives in ``embeddings:<provider>/<model>`` as ``{"ref": <memory row id>, "vec":
<base64 little-endian float32>}``; ``"ref": "@memory/<i>"`` points at a row of the same entry.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from chazbot.errors import InputError
from chazbot.ledger.core import register_row_check
from chazbot.memory.audience import (
    ORIGIN_FIELD,
    SCOPE_FIELD,
    Provenance,
    check_origin,
    check_scope,
)

MEMORY_STORE = "memory"
EMBEDDINGS_PREFIX = "embeddings:"
MAX_KEY_CHARS = 256
MAX_VALUE_BYTES = 16 * 1024
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_LIMIT = 100
MAX_EXTRA_BYTES = 16 * 1024  # other fields of a row: the delegating agent, its provenance
MAX_VECTOR_CHARS = 64 * 1024  # base64 of 12,288 float32s


def embeddings_store(model_name: str) -> str:
    return EMBEDDINGS_PREFIX + model_name


def check_key(key: Any) -> str:
    if not isinstance(key, str):
        raise InputError("key must be a string")
    if not 1 <= len(key) <= MAX_KEY_CHARS or not key.strip():
        raise InputError(f"key must be 1-{MAX_KEY_CHARS} characters, got {len(key)}")
    if any(ch in key for ch in "\n\r\t\x00"):
        raise InputError("key must be one line (no newlines, tabs or NUL)")
    return key


def check_value(value: Any) -> str:
    if not isinstance(value, str):
        raise InputError("value must be a string")
    size = len(value.encode())
    if size > MAX_VALUE_BYTES:
        raise InputError(f"value is {size} bytes; the limit is {MAX_VALUE_BYTES} (16 KiB)")
    if "\x00" in value:
        raise InputError("value must not contain NUL characters")
    return value


def check_tags(tags: Any) -> list[str]:
    if tags is None:
        return []
    if not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags):
        raise InputError("tags must be a list of strings")
    if len(tags) > MAX_TAGS:
        raise InputError(f"at most {MAX_TAGS} tags, got {len(tags)}")
    for tag in tags:
        if not 1 <= len(tag) <= MAX_TAG_CHARS or not tag.strip():
            raise InputError(f"each tag must be 1-{MAX_TAG_CHARS} characters: {tag[:70]!r}")
    return list(dict.fromkeys(tags))


def check_limit(limit: Any, default: int = 10) -> int:
    if limit is None:
        return default
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise InputError(f"limit must be a whole number from 1 to {MAX_LIMIT}")
    return limit


def remember_ops(
    key: str,
    value: str,
    tags: list[str],
    vector: NDArray[np.float32] | None,
    model: str | None,
    agent: str | None = None,
    origin: Provenance | None = None,
    scope: str = "",
) -> dict[str, list[Any]]:
    """``agent`` names the agent behind a delegated write (signed by its peer's key);
    ``origin`` is where the row was learned and ``scope`` the rows it may supersede."""
    row: dict[str, Any] = {"key": key, "value": value, "tags": tags}
    _mark(row, agent, origin, scope)
    ops: dict[str, list[Any]] = {MEMORY_STORE: [{"op": "insert", "row": row}]}
    if vector is not None and model is not None:
        ops[embeddings_store(model)] = [
            {"op": "insert", "row": {"ref": f"@{MEMORY_STORE}/0", "vec": encode_vector(vector)}}
        ]
    return ops


def forget_ops(
    key: str, agent: str | None = None, origin: Provenance | None = None, scopes: Any = ("",)
) -> dict[str, list[Any]]:
    """Tombstones for ``key`` in each of ``scopes`` (one entry hides them all at once)."""
    ops = []
    for scope in scopes:
        row: dict[str, Any] = {"key": key, "forget": True}
        _mark(row, agent, origin, scope)
        ops.append({"op": "insert", "row": row})
    return {MEMORY_STORE: ops}


def _mark(row: dict[str, Any], agent: str | None, origin: Provenance | None, scope: str) -> None:
    if agent is not None:
        row["agent"] = agent
    if origin is not None:
        row[ORIGIN_FIELD] = origin.to_data()
    if scope:
        row[SCOPE_FIELD] = scope


def encode_vector(vector: NDArray[np.float32]) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(text: str) -> NDArray[np.float32]:
    raw = base64.b64decode(text, validate=True)
    if len(raw) % 4 or not raw:
        raise InputError("a vector must be a non-empty base64 float32 array")
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """One memory row as stored (a tombstone has ``forgotten`` set)."""

    doc: int  # the local row number; the index key
    row_id: str
    key: str
    value: str
    tags: tuple[str, ...]
    ts: int  # microseconds since the epoch, UTC
    order: tuple[int, str, int]  # (height, entry id, op index): ties of ts by entry order
    author: str
    forgotten: bool = False
    scope: str = ""  # the room whose rows of this key it supersedes ("" operator/agent-wide)
    origin: Provenance | None = None  # where it was learned (None: the operator's)

    @property
    def ident(self) -> tuple[str, str]:
        """What a newer row replaces: the same key in the same scope."""
        return (self.scope, self.key)

    def newer_than(self, other: MemoryRow) -> bool:
        """Causal order: a row supersedes every row it descends from (a higher height), and
        only between rows of one height does the timestamp decide, so a row stamped far in
        the future cannot pin a key against a later overwrite or ``forget``."""
        return (self.order[0], self.ts, self.order[1:]) > (
            other.order[0],
            other.ts,
            other.order[1:],
        )


@dataclass(frozen=True)
class Hit:
    """One recall result."""

    key: str
    value: str
    tags: tuple[str, ...]
    timestamp: datetime
    score: float
    bank: str | None = None
    origin: Provenance | None = None  # where it was learned (None: the operator's)
    scope: str = ""


def to_datetime(ts_us: int) -> datetime:
    return datetime.fromtimestamp(ts_us / 1_000_000, tz=UTC)


def parse_memory_row(
    doc: int, row_id: str, data: dict[str, Any], ts: int, order: tuple[int, str, int], author: str
) -> MemoryRow | None:
    """A stored row as a MemoryRow, or None when it is not a well-formed memory row."""
    key = data.get("key")
    if not isinstance(key, str) or not key:
        return None
    scope = data.get(SCOPE_FIELD, "")
    if not isinstance(scope, str):
        return None
    origin = Provenance.from_data(data.get(ORIGIN_FIELD))
    if data.get("forget") is True:
        return MemoryRow(doc, row_id, key, "", (), ts, order, author, True, scope, origin)
    value, tags = data.get("value"), data.get("tags", [])
    if not isinstance(value, str) or not isinstance(tags, list):
        return None
    clean = tuple(str(t) for t in tags)
    return MemoryRow(doc, row_id, key, value, clean, ts, order, author, False, scope, origin)


def check_memory_row(row: dict[str, Any]) -> None:
    """SPEC §3's limits on a stored memory row, local or synced (registered with the ledger)."""
    check_key(row.get("key"))
    extra = {k: v for k, v in row.items() if k not in ("key", "value", "tags", "forget")}
    if row.get("forget") is True:
        if "value" in row or "tags" in row:
            raise InputError("a forget row carries only its key")
    else:
        if "forget" in row:
            raise InputError("forget must be true when present")
        check_value(row.get("value"))
        tags = row.get("tags", [])
        check_tags(tags)
    if ORIGIN_FIELD in row:
        check_origin(row[ORIGIN_FIELD])
    if SCOPE_FIELD in row:
        check_scope(row[SCOPE_FIELD])
    if extra and len(json.dumps(extra, ensure_ascii=False).encode()) > MAX_EXTRA_BYTES:
        raise InputError(f"a memory row's other fields take at most {MAX_EXTRA_BYTES} bytes")


def check_vector_row(row: dict[str, Any]) -> None:
    """An ``embeddings:<model>`` row: a reference to its memory row and a bounded vector."""
    ref, vec = row.get("ref"), row.get("vec")
    if set(row) != {"ref", "vec"} or not isinstance(ref, str) or not isinstance(vec, str):
        raise InputError("an embedding row is exactly {ref, vec}")
    if not 0 < len(ref) <= MAX_KEY_CHARS * 2 or not 0 < len(vec) <= MAX_VECTOR_CHARS:
        raise InputError(f"an embedding's vector is at most {MAX_VECTOR_CHARS} characters")


_SAID_PREFIX = re.compile(r"\A[^()\n]{1,300} \(\d{4}-\d{2}-\d{2}[^()\n]{0,40}\): ")


def said_text(value: str) -> str:
    """A row's value without the "who (date): " that captured rows start with (what the
    person said, as the memory page and the "I don't know" check read it)."""
    return _SAID_PREFIX.sub("", value, count=1)


register_row_check(MEMORY_STORE, check_memory_row)
register_row_check(EMBEDDINGS_PREFIX, check_vector_row)


# ---- the text a row's vector is of ---------------------------------------------------------

EMBED_TEXT_VERSION = 3
"""Version of ``row_text``'s rule. A vector stored with an older version (or none: version 1,
``key value``; 2, an MXID's whole localpart and every lead up to 64 characters named twice) is
owed again and rewritten in the background (``vector_queue.py``)."""
_MONTH_WORDS = frozenset(
    (
        *("january", "february", "march", "april", "may", "june", "july", "august"),
        *("september", "october", "november", "december"),
        *("jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"),
    )
)
_KEY_SPLIT = re.compile(r"[\s/_|]+")
_STAMP = re.compile(r"[\d\W_]+|\w*\d\w*:[\w:.-]*|(?=\w*\d)[0-9a-f]{8,}", re.IGNORECASE)
"""A key's word that is a number, a date or time, an id like ``D1:3``, ``sha256:…`` or a
short hex id: left out of the text (``crash0`` or ``mp3`` stay)."""
_MXID = re.compile(r"@([^:\s]+):\S+")
_DATE_PAREN = r"\((?:\d{4}-\d{2}-\d{2}|\d{1,2} [A-Za-z]+,? \d{4})[^()\n]{0,40}\)"
_LEAD = r"\A(?:" + _DATE_PAREN + r" )?"
_SAID_HEAD = re.compile(_LEAD + r"([^()\n]{1,300}?) (?:" + _DATE_PAREN + r")?: ")
_NAMED_HEAD = re.compile(_LEAD + r"(@?[\w.'=-]+(?::\S+)?(?: [A-Z][\w'-]*)?): ")


MAX_LEAD_CHARS = 64
MAX_LEAD_WORDS = 2
"""A lead ("Caroline: …") of at most this many words and characters is named twice in the
text: a name, whose weight pays (LoCoMo dev, hybrid recall@10 0.632 once, 0.678 twice). A
longer one is named once: e5 costs ~1.3 ms of CPU a token (docs/measured.md, "Embeddings per
turn"), and a lead of many words doubled outweighs what the row says."""
_KEY_MXID = re.compile(r"(?<![\w@])@[^:\s/|]+:[^\s/|]+")
_LOCAL_SEPARATORS = re.compile(r"[-_.=+/]+")
_MACHINE_MADE = re.compile(r"\d{4,}|(?=[a-z]*\d)[0-9a-f]{8,}", re.IGNORECASE)
"""What a program puts in a localpart, never a person: a run of four digits or more (a time
stamp, a phone number, a numeric id) or a hex id."""


def person_name(name: str) -> str:
    """A speaker as a person's name: an MXID's localpart (``@alice:example.org`` → alice)."""
    name = " ".join(name.split())
    found = _MXID.fullmatch(name)
    return found.group(1) if found else name


def spoken_name(name: str) -> str:
    """A speaker as a row's text names them (``EMBED_TEXT_VERSION`` 3): an MXID as its
    localpart's words, without what a program made (``@loadhuman-memory-on-1733619123:localhost``
    → ``loadhuman memory on``, ``@telegram_4915112345678:t.org`` → ``telegram``,
    ``@alice.smith:x.org`` → ``alice smith``; a localpart of nothing else stays whole);
    another name as it is. Questions name people, never their digits, and each digit is a
    token e5 pays for (a 10-digit stamp: 7 tokens, ~9 ms a row)."""
    name = " ".join(name.split())
    found = _MXID.fullmatch(name)
    if not found:
        return name
    local = found.group(1)
    words = [w for w in _LOCAL_SEPARATORS.split(_MACHINE_MADE.sub(" ", local)) if w.strip()]
    return " ".join(" ".join(words).split()) or local


def _plain_key(key: str) -> str:
    """A key's words, without time stamps, dates, ids and separators (``Caroline 8 May, 2023
    D1:3`` → ``Caroline``; ``@bob:x.org/2023-05-08/ab12cd34`` → ``bob``)."""
    words = []
    key = _KEY_MXID.sub(lambda m: spoken_name(m.group(0)), key)
    for word in _KEY_SPLIT.split(key):
        word = word.strip(",.;:()[]")
        if not word or _STAMP.fullmatch(word) or word.lower().startswith("sha256:"):
            continue
        if word.lower() in _MONTH_WORDS:
            continue
        words.append(word)
    return " ".join(words)


def _plain_value(value: str) -> str:
    """A value with a leading "who (date): " or "(date) who: " as "who: "."""
    flat = " ".join(value.split())
    for pattern in (_SAID_HEAD, _NAMED_HEAD):
        found = pattern.match(flat)
        if found and (pattern is _NAMED_HEAD or "(" in found.group(0)):
            return f"{spoken_name(found.group(1))}: {flat[found.end() :]}"
    return flat


def row_text(key: str, value: str, speaker: str | None = None) -> str:
    """The human text of a memory row, what its vector is of (``EMBED_TEXT_VERSION`` 2): the
    same whether the speaker and date sit in the key, in the value or only in the row's
    provenance. Time stamps, dates and ids of the key are left out, a leading "who (date): "
    becomes "who: ", the key's remaining words lead ("<key words>: <value>") unless the value
    already starts with them, and ``speaker`` (who told it, from the row's provenance) leads
    unless the text or the value already starts with that name. The lead is then named twice
    (``Caroline Caroline: …``): e5 weighs who a row is about more that way, and questions name
    people (LoCoMo dev, hybrid recall@10: 0.632 with it once, 0.678 twice, speaker and date
    in the key; docs/memory.md, "Row shape")."""
    said = _plain_value(value)
    head = _plain_key(key)
    body = said
    if head and not said.lower().startswith(head.lower()):
        body = f"{head}: {said}" if said else head
    name = spoken_name(speaker).lower() if speaker else ""
    if name and not (body.lower().startswith(name) or said.lower().startswith(name)):
        body = f"{spoken_name(speaker or '')}: {body}"
    lead, sep, rest = body.partition(": ")
    if sep and len(lead) <= MAX_LEAD_CHARS and len(lead.split()) <= MAX_LEAD_WORDS:
        return f"{lead} {lead}: {rest}"  # who (or what) it is about, weighed twice
    return body or key

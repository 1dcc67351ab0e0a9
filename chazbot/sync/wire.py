"""The sync wire format, declared once: every request and answer body of ``eidetica-sync/1``.

Each body is a pydantic model. The server validates requests and builds its answers with
them, the client builds requests and validates answers with them, and the tests' stand-in
peers build their answers with them, so the format is written here and nowhere else.

The models are strict where the wire is: JSON types as sent (``1`` is no ``true``, ``1.0``
or ``"1"``), integers and lengths bounded, entry ids ``sha256:<64 hex>``; unknown fields are
ignored (a newer peer may send more). An entry travels as base64 of its canonical bytes;
here it is ``bytes``, decoded on the way in and encoded on the way out.

``parse`` reads a body into a model; whatever does not fit is one ``InputError`` line that
names the field and what it must be (each field's ``description``), never pydantic's own
report. The client says such an answer is a peer's bad answer (a ``BackendError``).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from chazbot.errors import InputError
from chazbot.ledger.encoding import is_content_id
from chazbot.sync.protocol import MAX_BATCH_ENTRIES, MAX_WAIT_S
from chazbot.sync.store import PERMISSIONS

MAX_SEQ = 2**62  # seqs and cursors; SQLite's rowids stay far below
MAX_REJECTS_SHOWN = 100  # refused entries a push answer names (it counts them all)
SHORT_TEXT = 200  # a log id, a permission as the server words it
ACCESS_STATUSES = ("granted", "pending", "rejected")
REJECTED_ID, REJECTED_REASON = 80, 300  # a refused entry's id and reason are cut to these


def encode_entry(data: bytes) -> str:
    """An entry's bytes as they travel: base64."""
    return base64.b64encode(data).decode("ascii")


def decode_entry(text: Any) -> bytes:
    """An entry from the wire: a base64 string (``ValueError`` with one line if not)."""
    if isinstance(text, bytes):  # built in Python (a request or an answer to send)
        return text
    if not isinstance(text, str):
        raise ValueError("an entry must be a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("an entry is not valid base64") from None


def _seq_entry(value: Any) -> tuple[int, bytes]:
    """``[seq, base64]`` from the wire (a tuple when built in Python) as ``(seq, bytes)``."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError("an entry is not [seq, base64]")
    seq, data = value
    if type(seq) is not int or not 0 <= seq <= MAX_SEQ:
        raise ValueError(f"an entry's seq is not an integer from 0 to {MAX_SEQ}")
    return seq, decode_entry(data)


def _seq_entry_out(value: tuple[int, bytes]) -> list[Any]:
    return [value[0], encode_entry(value[1])]


def _entry_id(text: str) -> str:
    if not is_content_id(text):
        raise ValueError("not sha256:<64 hex digits>")
    return text


def _entry_ids(limit: int | None) -> PlainValidator:
    """A list of entry ids (at most ``limit``), checked in one pass that stops at the first
    bad one: a hostile answer full of bad ids costs no error report per id."""

    def check(value: Any) -> list[str]:
        if not isinstance(value, list) or (limit is not None and len(value) > limit):
            raise ValueError("not a list of entry ids")
        if not all(map(is_content_id, value)):
            raise ValueError("not a list of entry ids")
        return value

    return PlainValidator(check)


def _one_of(options: tuple[str, ...]) -> AfterValidator:
    def check(text: str) -> str:
        if text not in options:
            raise ValueError(f"not one of {options}")
        return text

    return AfterValidator(check)


def at_most(n: int) -> BeforeValidator:
    """Refuse a list longer than ``n`` before its items are looked at: a hostile body of
    millions of tiny items then costs its JSON parse, not a validator call per item."""

    def check(value: Any) -> Any:
        if isinstance(value, list) and len(value) > n:
            raise ValueError(f"more than {n} items")
        return value

    return BeforeValidator(check)


def _rejected(value: Any) -> tuple[str, str]:
    """A refused entry from the wire, ``{"id": str, "reason": str}``, as ``(id, reason)``
    (the shape ``IngestResult.rejected`` has), each cut to its length."""
    if isinstance(value, tuple):  # built in Python from an ingest result
        eid, reason = value
    elif isinstance(value, dict):
        eid, reason = value.get("id"), value.get("reason")
    else:
        eid = reason = None
    if not (isinstance(eid, str) and isinstance(reason, str)):
        raise ValueError("a refused entry is not {id, reason} strings")
    return eid[:REJECTED_ID], reason[:REJECTED_REASON]


def _rejected_out(value: tuple[str, str]) -> dict[str, str]:
    return {"id": value[0], "reason": value[1]}


WireEntry = Annotated[
    bytes, PlainValidator(decode_entry), PlainSerializer(encode_entry, return_type=str)
]
"""One entry: base64 of its canonical bytes on the wire, ``bytes`` here."""
EntryId = Annotated[str, AfterValidator(_entry_id)]
EntryIds = Annotated[list[str], _entry_ids(None)]
BatchOfIds = Annotated[list[str], _entry_ids(MAX_BATCH_ENTRIES)]
Seq = Annotated[int, Field(ge=0, le=MAX_SEQ)]
Count = Annotated[int, Field(ge=0)]
ShortText = Annotated[str, Field(max_length=SHORT_TEXT)]
SeqEntry = Annotated[
    tuple[int, bytes], PlainValidator(_seq_entry), PlainSerializer(_seq_entry_out, return_type=list)
]
"""An entry with the server's seq for it: ``[seq, base64]`` on the wire."""
Rejected = Annotated[
    tuple[str, str], PlainValidator(_rejected), PlainSerializer(_rejected_out, return_type=dict)
]
"""One refused entry: ``{"id": …, "reason": …}`` on the wire, ``(id, reason)`` here."""


class WireModel(BaseModel):
    """A body on the wire: strict JSON types, unknown fields ignored, immutable."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


# ---- requests (client → server) -----------------------------------------------------------


class HeadsRequest(WireModel):
    """``heads``: no fields (``{}``)."""


class EntriesRequest(WireModel):
    """``entries``: the raw entries after a cursor; ``wait`` > 0 makes it a long poll."""

    after: Seq = Field(default=0, description=f"an integer from 0 to {MAX_SEQ}")
    limit: int = Field(
        default=MAX_BATCH_ENTRIES,
        ge=1,
        le=MAX_BATCH_ENTRIES,
        description=f"an integer from 1 to {MAX_BATCH_ENTRIES}",
    )
    wait: float = Field(
        default=0.0,
        ge=0,
        le=MAX_WAIT_S,
        allow_inf_nan=False,
        description=f"a number of seconds from 0 to {MAX_WAIT_S:g}",
    )


class HaveRequest(WireModel):
    """``have``: which of these ids does the server lack?"""

    ids: BatchOfIds = Field(description=f"a list of at most {MAX_BATCH_ENTRIES} entry ids")


class PushRequest(WireModel):
    """``push``: entries for the server to validate and store."""

    entries: Annotated[list[WireEntry], at_most(MAX_BATCH_ENTRIES)] = Field(
        description=f"a list of at most {MAX_BATCH_ENTRIES} base64 entries",
    )


class AccessRequest(WireModel):
    """``access``: ask for a permission on a shared database."""

    permission: Annotated[str, _one_of(PERMISSIONS)] = Field(
        description=f"one of: {', '.join(PERMISSIONS)}"
    )


# ---- answers (server → client) ------------------------------------------------------------


class HeadsAnswer(WireModel):
    """A database's tips and counts as one server holds them, and the asker's permission
    (validated with ``{"db": …}`` as context, the database asked for)."""

    db: EntryId = Field(description="a database id")
    tips: EntryIds = Field(description="a list of entry ids")
    count: Count = Field(description="a count")
    max_seq: Seq = Field(description=f"a seq from 0 to {MAX_SEQ}")
    log: ShortText = Field(description=f"a string of at most {SHORT_TEXT} characters")
    permission: ShortText = Field(description=f"a string of at most {SHORT_TEXT} characters")

    @model_validator(mode="after")
    def _asked(self, info: ValidationInfo) -> HeadsAnswer:
        asked = info.context if isinstance(info.context, dict) else {}
        if asked.get("db") not in (None, self.db):
            raise ValueError("heads are of another database than asked")
        return self


class EntriesAnswer(WireModel):
    """Entries ``(seq, bytes)`` in the server's seq order (parents first); ``next`` is the
    cursor after them, ``more`` whether more follow.

    Always checked: seqs increase, ``next`` is the last seq, ``more`` comes with entries.
    Validated with the request as context (``{"after": …, "limit": …}``, as the client
    does), also: at most ``limit`` entries, all past ``after``, and ``next`` is ``after``
    when there are none.
    """

    entries: Annotated[list[SeqEntry], at_most(MAX_BATCH_ENTRIES)] = Field(
        description=f"a list of at most {MAX_BATCH_ENTRIES} [seq, base64] pairs",
    )
    next: Seq = Field(description=f"a seq from 0 to {MAX_SEQ}")
    more: bool = Field(description="true or false")
    log: ShortText = Field(description=f"a string of at most {SHORT_TEXT} characters")

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> EntriesAnswer:
        asked = info.context if isinstance(info.context, dict) else {}
        after = asked.get("after")
        limit = asked.get("limit")
        if limit is not None and len(self.entries) > limit:
            raise ValueError("entries is not a list of at most the limit")
        last = after
        for seq, _ in self.entries:
            if last is not None and seq <= last:
                raise ValueError("entry seqs are not increasing past the cursor")
            last = seq
        if last is not None and self.next != last:
            raise ValueError("next/more do not match the entries")
        if self.more and not self.entries:
            raise ValueError("more entries announced but none sent")
        return self


class HaveAnswer(WireModel):
    """The ids of a ``have`` request the server does not hold."""

    missing: BatchOfIds = Field(description=f"a list of at most {MAX_BATCH_ENTRIES} entry ids")


class PushAnswer(WireModel):
    """What a push did: counts, the first refused entries (``(id, reason)``, the id ``?``
    when unreadable), and the server's heads after it."""

    accepted: Count = Field(description="a count")
    duplicates: Count = Field(description="a count")
    refused: Count = Field(description="a count")
    rejected: Annotated[list[Rejected], at_most(MAX_REJECTS_SHOWN)] = Field(
        description=f"a list of at most {MAX_REJECTS_SHOWN} {{id, reason}} objects",
    )
    tips: EntryIds = Field(description="a list of entry ids")
    max_seq: Seq = Field(description=f"a seq from 0 to {MAX_SEQ}")
    log: ShortText = Field(description=f"a string of at most {SHORT_TEXT} characters")


class AccessAnswer(WireModel):
    """``granted`` (the key holds it), ``pending`` (request id to wait on) or ``rejected``."""

    status: Annotated[str, _one_of(ACCESS_STATUSES)] = Field(
        description="granted, pending or rejected"
    )
    request: Count | None = Field(default=None, description="a request id or null")


class ErrorAnswer(WireModel):
    """Any refusal: one line, with the HTTP status saying which kind."""

    error: Annotated[str, AfterValidator(lambda text: " ".join(text.split())[:500])] = ""


# ---- reading a body ---------------------------------------------------------------------

M = TypeVar("M", bound=WireModel)


def parse(model: type[M], body: bytes, context: dict[str, Any] | None = None) -> M:
    """Read a JSON body (empty = ``{}``) into ``model``; InputError with one line if it
    does not fit (see the module doc).

    The JSON is read by the standard library, then validated: pydantic's own JSON path
    checks a list's length only after every item, so a body of tiny items would cost
    several times its parse; here ``at_most`` refuses a long list before its items.
    """
    try:
        value = json.loads(body) if body else {}
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise InputError("body is not valid JSON") from None
    if not isinstance(value, dict):
        raise InputError("body must be a JSON object")
    try:
        return model.model_validate(value, context=context)
    except ValidationError as exc:
        raise InputError(explain(model, exc)) from None


def build(model: type[M], **fields: Any) -> M:
    """``model`` from Python values (what a caller asks to send); InputError with one line
    if a value is out of the wire's bounds, as ``parse`` would say it."""
    try:
        return model(**fields)
    except ValidationError as exc:
        raise InputError(explain(model, exc)) from None


def explain(model: type[WireModel], exc: ValidationError) -> str:
    """One line for what was wrong: the first error, worded by the field's description."""
    error = exc.errors(include_url=False, include_input=False)[0]
    kind, loc = error["type"], error["loc"]
    if not loc:
        if kind == "value_error":  # a check across fields
            return str(error["ctx"]["error"])
        return "body must be a JSON object"
    if kind == "value_error" and len(loc) > 1:  # an item's own check (base64, id)
        return str(error["ctx"]["error"])
    name = str(loc[0])
    field = model.model_fields.get(name)
    what = field.description if field is not None and field.description else "valid"
    return f"{name} must be {what}"

"""The canonical byte form of entries, and content ids.

Canonical encoding: JSON with keys sorted, no whitespace (``separators=(",", ":")``), UTF-8,
non-ASCII kept as is (``ensure_ascii=False``). Only strings, integers, booleans, null, lists
and objects appear in entries: floats are refused, because two JSON libraries may print the
same float differently. Vectors travel as base64 of little-endian float32.

An id is ``sha256:`` followed by the lowercase hex SHA-256 of the canonical bytes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from chazbot.errors import InputError

ID_PREFIX = "sha256:"


_LEAVES = (str, int, type(None))  # bool is an int; float is not
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _check(value: Any, depth: int = 0) -> None:
    if depth > 32:
        raise InputError("entry is nested too deeply")
    if isinstance(value, _LEAVES):
        return
    if isinstance(value, float):
        raise InputError("floats are not allowed in entries (use integers or base64)")
    if isinstance(value, list):
        items: Any = value
    elif isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise InputError("object keys in entries must be strings")
        items = value.values()
    else:
        raise InputError(f"type {type(value).__name__} is not allowed in entries")
    for item in items:
        # leaves are checked inline (most values are leaves); the depth limit stays exact
        if depth >= 32 or not isinstance(item, _LEAVES):
            _check(item, depth + 1)


def canonical(value: Any) -> bytes:
    """The canonical bytes of a JSON-able value (see the module docstring)."""
    _check(value)
    return encode_checked(value)


def encode_checked(value: Any) -> bytes:
    """``canonical`` without the type walk, for a value whose parts were already checked."""
    try:
        return _ENCODER.encode(value).encode()
    except UnicodeEncodeError as exc:  # a lone surrogate, e.g. from JSON "\ud800"
        raise InputError("strings in entries must be valid Unicode (no lone surrogates)") from exc


def content_id(data: bytes) -> str:
    return ID_PREFIX + hashlib.sha256(data).hexdigest()


def is_content_id(text: object) -> bool:
    if not isinstance(text, str) or not text.startswith(ID_PREFIX) or len(text) != 71:
        return False
    return all(c in "0123456789abcdef" for c in text[7:])

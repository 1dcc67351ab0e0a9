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


def _check(value: Any, depth: int = 0) -> None:
    if depth > 32:
        raise InputError("entry is nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        raise InputError("floats are not allowed in entries (use integers or base64)")
    if isinstance(value, list):
        for item in value:
            _check(item, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InputError("object keys in entries must be strings")
            _check(item, depth + 1)
        return
    raise InputError(f"type {type(value).__name__} is not allowed in entries")


def canonical(value: Any) -> bytes:
    """The canonical bytes of a JSON-able value (see the module docstring)."""
    _check(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def content_id(data: bytes) -> str:
    return ID_PREFIX + hashlib.sha256(data).hexdigest()


def is_content_id(text: object) -> bool:
    if not isinstance(text, str) or not text.startswith(ID_PREFIX) or len(text) != 71:
        return False
    return all(c in "0123456789abcdef" for c in text[7:])

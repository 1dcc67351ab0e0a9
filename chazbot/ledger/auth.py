"""AuthSettings: who may write to a database, as plain functions over plain data.

Permissions form a lattice: ``read`` < ``write(p)`` < ``admin(p)``, and within a level a
lower ``p`` is stronger. A key is active or revoked; a revoked key grants nothing.

Auth changes are ``_auth`` operations ``{"op": "set_key", "key", "perm", "prio", "status"}``.
What an entry is checked against (the state at its parents) and the current state of a
database are both resolved by authority from the auth entries concerned (``authgraph``), not
folded by height, so that a chain of entries cannot out-height a revocation.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from chazbot.errors import InputError, PermissionDenied

AUTH_STORE = "_auth"
_WITH_PRIO = re.compile(r"([A-Za-z]+)\(([0-9]{1,10})\)")


class Level(enum.IntEnum):
    NONE = 0
    READ = 1
    WRITE = 2
    ADMIN = 3


@dataclass(frozen=True, order=False)
class Permission:
    """A permission level with its priority (lower priority number = stronger)."""

    level: Level
    prio: int = 0

    @classmethod
    def parse(cls, text: str, prio: int = 0) -> Permission:
        """Parse ``read``/``write``/``admin`` (with ``prio``) or the ``str()`` form ``write(3)``."""
        match = _WITH_PRIO.fullmatch(text.strip())
        if match is not None:
            text, prio = match.group(1), int(match.group(2))
        try:
            level = Level[text.strip().upper()]
        except KeyError:
            raise InputError(f"unknown permission {text!r}: use read, write or admin") from None
        if level is Level.NONE:
            raise InputError("permission must be read, write or admin")
        return cls(level, 0 if level is Level.READ else prio)

    def rank(self) -> tuple[int, int]:
        """Sort key: a larger rank is a stronger permission."""
        return (int(self.level), -self.prio if self.level > Level.READ else 0)

    def stronger_than(self, other: Permission) -> bool:
        return self.rank() > other.rank()

    def allows(self, needed: Level) -> bool:
        return self.level >= needed

    @property
    def name(self) -> str:
        return self.level.name.lower()

    def __str__(self) -> str:
        return self.name if self.level <= Level.READ else f"{self.name}({self.prio})"


NO_PERMISSION = Permission(Level.NONE)


@dataclass(frozen=True)
class KeyGrant:
    perm: Permission
    active: bool = True


AuthState = Mapping[str, KeyGrant]


def permission_of(state: AuthState, key: str) -> Permission:
    grant = state.get(key)
    if grant is None or not grant.active:
        return NO_PERMISSION
    return grant.perm


def parse_auth_op(op: Any) -> tuple[str, KeyGrant]:
    """Validate one ``_auth`` operation and return (key, grant)."""
    from chazbot.ledger.keys import parse_public_key

    if not isinstance(op, dict) or op.get("op") != "set_key":
        raise InputError("an _auth operation must be {op: set_key, key, perm, prio, status}")
    key, perm, prio, status = op.get("key"), op.get("perm"), op.get("prio", 0), op.get("status")
    parse_public_key(str(key))
    if perm not in ("read", "write", "admin") or type(prio) is not int:
        raise InputError("an _auth operation needs perm (read, write or admin) and prio (integer)")
    if prio < 0 or prio > 2**31:
        raise InputError("auth priority must be between 0 and 2^31")
    if status not in ("active", "revoked"):
        raise InputError("auth status must be active or revoked")
    return str(key), KeyGrant(Permission.parse(perm, prio), status == "active")


def auth_op(key: str, perm: Permission, active: bool = True) -> dict[str, Any]:
    return {
        "op": "set_key",
        "key": key,
        "perm": perm.name,
        "prio": perm.prio,
        "status": "active" if active else "revoked",
    }


def change_refusal(state: AuthState, author: str, key: str, new: KeyGrant) -> str | None:
    """Why ``author`` may not set ``key`` to ``new`` in ``state``, or None if it may.

    The author must be an active admin; it cannot grant a permission stronger than its own,
    nor change a key that is currently stronger than itself.
    """
    mine = permission_of(state, author)
    if mine.level is not Level.ADMIN:
        return f"key {author[:20]}… is not an admin of this database"
    if new.perm.stronger_than(mine):
        return f"an admin({mine.prio}) cannot grant {new.perm}"
    current = state.get(key)
    if current is not None and current.active and current.perm.stronger_than(mine):
        return f"an admin({mine.prio}) cannot change a key holding {current.perm}"
    return None


def check_auth_change(state: AuthState, author: str, key: str, new: KeyGrant) -> None:
    """Raise PermissionDenied unless ``author`` may set ``key`` to ``new`` in ``state``."""
    refusal = change_refusal(state, author, key, new)
    if refusal is not None:
        raise PermissionDenied(refusal)


def fold(ops: Iterable[tuple[str, KeyGrant]], base: AuthState | None = None) -> dict[str, KeyGrant]:
    """Apply auth operations in order (the caller sorts them by (height, id))."""
    state = dict(base or {})
    for key, grant in ops:
        state[key] = grant
    return state

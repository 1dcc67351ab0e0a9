"""Banks, bank refs and grants: which databases an agent may remember into or recall from.

The bank's AuthSettings are authoritative; the agent's ``memory_banks`` store holds a ref
``{db, permission}`` per bank name as a view cache. Grant writes auth first, then the ref,
and puts the auth back exactly as it was if the ref cannot be written. Revoke removes auth
first, then the ref, best-effort.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from chazbot.errors import ConflictError, InputError, NotFound, PermissionDenied
from chazbot.ledger import AUTH_STORE, KeyGrant, KeyPair, Ledger, Level, Permission
from chazbot.ledger.auth import auth_op, permission_of
from chazbot.ledger.encoding import is_content_id

log = logging.getLogger(__name__)

REFS_STORE = "memory_banks"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_name(name: str, what: str = "bank") -> str:
    if not NAME_RE.match(name):
        raise InputError(
            f"bad {what} name {name[:70]!r}: 1-64 letters, digits, '_', '.', '-', "
            "starting with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class BankRef:
    """An agent's cached view of a bank grant."""

    name: str
    db: str
    permission: str


@dataclass(frozen=True)
class Hosted:
    """A database this peer hosts: a bank or an agent DB."""

    kind: str  # "bank" or "agent"
    name: str
    db: str
    data: dict[str, Any]


class Registry:
    """The peer-local index of hosted agents and banks, and the private keys (never synced)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def get(self, kind: str, name: str) -> Hosted | None:
        rows = await self.ledger.local(
            "SELECT name, db, data FROM registry WHERE kind = ? AND name = ? COLLATE NOCASE",
            (kind, name),
        )
        return Hosted(kind, rows[0][0], rows[0][1], json.loads(rows[0][2])) if rows else None

    async def by_db(self, db: str) -> Hosted | None:
        rows = await self.ledger.local(
            "SELECT kind, name, data FROM registry WHERE db = ? AND kind IN ('bank', 'agent')",
            (db,),
        )
        return Hosted(rows[0][0], rows[0][1], db, json.loads(rows[0][2])) if rows else None

    async def all(self, kind: str) -> list[Hosted]:
        rows = await self.ledger.local(
            "SELECT name, db, data FROM registry WHERE kind = ? ORDER BY name", (kind,)
        )
        return [Hosted(kind, n, d, json.loads(x)) for n, d, x in rows]

    async def add(self, kind: str, name: str, db: str, data: dict[str, Any] | None = None) -> None:
        if await self.get(kind, name) is not None:
            raise ConflictError(f"a {kind} named {name!r} exists already on this peer")
        await self.ledger.local(
            "INSERT INTO registry (kind, name, db, data) VALUES (?, ?, ?, ?)",
            (kind, name, db, json.dumps(data or {})),
        )

    async def remove(self, kind: str, name: str) -> None:
        await self.ledger.local(
            "DELETE FROM registry WHERE kind = ? AND name = ? COLLATE NOCASE", (kind, name)
        )

    async def save_key(self, key: KeyPair, label: str) -> None:
        await self.ledger.local(
            "INSERT OR IGNORE INTO local_keys (pubkey, label, private) VALUES (?, ?, ?)",
            (key.public, label, key.private_bytes()),
        )

    async def key(self, label: str) -> KeyPair | None:
        rows = await self.ledger.local(
            "SELECT private FROM local_keys WHERE label = ? ORDER BY rowid LIMIT 1", (label,)
        )
        return KeyPair.from_private_bytes(bytes(rows[0][0])) if rows else None

    async def keys(self) -> list[KeyPair]:
        rows = await self.ledger.local("SELECT private FROM local_keys ORDER BY rowid")
        return [KeyPair.from_private_bytes(bytes(r[0])) for r in rows]


async def read_refs(ledger: Ledger, agent_db: str) -> dict[str, BankRef]:
    """The bank refs cached in an agent DB (name -> ref)."""
    refs: dict[str, BankRef] = {}
    for name, value in (await ledger.fields(agent_db, REFS_STORE)).items():
        if isinstance(value, dict) and isinstance(value.get("db"), str):
            refs[name] = BankRef(name, value["db"], str(value.get("permission", "read")))
    return refs


def ref_op(name: str, db: str | None, permission: str | None) -> dict[str, list[Any]]:
    value = None if db is None else {"db": db, "permission": permission}
    return {REFS_STORE: [{"op": "set", "field": name, "value": value}]}


async def admin_key_for(ledger: Ledger, registry: Registry, db: str) -> KeyPair:
    """A key this peer holds that is an admin of ``db`` (the strongest one)."""
    state = await ledger.auth_state(db)
    best: tuple[tuple[int, int], KeyPair] | None = None
    for key in await registry.keys():
        perm = permission_of(state, key.public)
        if perm.level is Level.ADMIN and (best is None or perm.rank() > best[0]):
            best = (perm.rank(), key)
    if best is None:
        raise PermissionDenied(
            "this peer holds no admin key on that bank; import it with admin "
            "(/memory import <ticket> admin) or ask its owner to grant"
        )
    return best[1]


async def writer_key_for(ledger: Ledger, registry: Registry, db: str) -> KeyPair:
    """A key this peer holds that may write to ``db`` (the strongest one)."""
    state = await ledger.auth_state(db)
    ranked = [
        (permission_of(state, k.public).rank(), k)
        for k in await registry.keys()
        if permission_of(state, k.public).allows(Level.WRITE)
    ]
    if not ranked:
        raise PermissionDenied("this peer holds no key that may write to that bank")
    return max(ranked, key=lambda item: item[0])[1]


async def grant(
    ledger: Ledger,
    registry: Registry,
    bank_name: str,
    bank_db: str,
    agent_key: KeyPair,
    agent_db: str,
    perm: Permission,
    fail_ref_write: bool = False,
) -> KeyGrant | None:
    """Authorise an agent on a bank: auth first, then the ref; roll auth back on failure.

    Returns the agent's previous grant (None if it had none). ``fail_ref_write`` exists for
    the test that proves the rollback.
    """
    if perm.level not in (Level.READ, Level.WRITE):
        raise InputError("grant takes read or write")
    admin = await admin_key_for(ledger, registry, bank_db)
    before = (await ledger.auth_state(bank_db)).get(agent_key.public)
    await ledger.write(bank_db, admin, {AUTH_STORE: [auth_op(agent_key.public, perm)]})
    try:
        if fail_ref_write:
            raise PermissionDenied("ref write failed (forced)")
        await ledger.write(agent_db, agent_key, ref_op(bank_name, bank_db, perm.name))
    except Exception as exc:
        if before is None:
            restore = auth_op(agent_key.public, Permission(Level.READ), active=False)
        else:
            restore = auth_op(agent_key.public, before.perm, before.active)
        await ledger.write(bank_db, admin, {AUTH_STORE: [restore]})
        raise ConflictError(
            f"could not write the bank ref ({exc}); the grant was rolled back"
        ) from exc
    return before


async def revoke(
    ledger: Ledger,
    registry: Registry,
    bank_name: str,
    bank_db: str,
    agent_key: KeyPair,
    agent_db: str,
) -> bool:
    """Revoke an agent's key on a bank, then remove its ref best-effort.

    Returns True when the ref was removed too, False when it was left behind.
    """
    admin = await admin_key_for(ledger, registry, bank_db)
    current = (await ledger.auth_state(bank_db)).get(agent_key.public)
    if current is None or not current.active:
        raise NotFound("that agent holds no grant on that bank")
    revoked = auth_op(agent_key.public, current.perm, active=False)
    await ledger.write(bank_db, admin, {AUTH_STORE: [revoked]})
    try:
        await ledger.write(agent_db, agent_key, ref_op(bank_name, None, None))
    except Exception as exc:  # best-effort: auth is what matters
        log.warning("revoke: could not remove the ref of %s: %s", bank_name, exc)
        return False
    return True


def looks_like_db_id(ref: str) -> bool:
    return is_content_id(ref)

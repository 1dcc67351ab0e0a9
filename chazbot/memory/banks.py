"""Banks, bank refs, grants and delegations: which databases an agent may use, and how.

The bank's AuthSettings are authoritative; the agent's ``memory_banks`` store holds a ref
``{db, permission}`` per bank name as a view cache. Grant writes the auth change and then
the ref in one transaction (``Ledger.write_each``), so either both are stored or neither:
nothing to put back, nothing half-done after a crash. Revoke removes auth first, then the
ref, best-effort.

Delegation (SPEC §4): on a bank where this peer holds write or read but no admin key (an
imported bank), a grant cannot change the bank's AuthSettings. It records instead, peer-local,
that the agent may use the level this peer's key holds (capped at what was granted), and
writes the ref. The agent's writes are then signed by that peer key and name the agent in the
row; the bank's owner sees the peer key, and revoking it stops every agent behind it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from chazbot.errors import ConflictError, InputError, NotFound, PermissionDenied
from chazbot.ledger import AUTH_STORE, KeyGrant, KeyPair, Ledger, Level, Permission
from chazbot.ledger.auth import AuthState, auth_op, permission_of
from chazbot.ledger.encoding import is_content_id
from chazbot.ledger.local import Hosted as Hosted  # re-exported: callers import it from here

log = logging.getLogger(__name__)

REFS_STORE = "memory_banks"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # fullmatch: "$" takes a trailing \n
KEY_PREFIX = "ed25519:"
AGENT_KEY_LABEL = "agent:"
DELEGATION_KV = "delegation:"
# What one non-admin may make every user of this peer carry (issue 22, item 9; SPEC §6): each
# bank is a database, a key and a registry row, and a name in some lists. Admins (the
# operator, the config's admins) are not bounded. A person's count is the banks registered
# with them as ``created_by`` now: deleting one (admins) gives its creator room again.
BANKS_PER_PERSON = 10
"""Banks a non-admin may have created on this peer."""
CREATED_BY = "created_by"
"""The registry entry's field naming who created a bank (the sender: an MXID, ``local``)."""


@dataclass(frozen=True)
class BankLimits:
    """What non-admins may create on this peer, passed in (``Registry(limits=)``,
    ``PeerTuning.banks``); tests build their own, never flip a module global."""

    per_person: int = BANKS_PER_PERSON
    """Banks a non-admin may have created on this peer."""
    total: int = 200
    """Banks this peer may host before a non-admin may create no more (admins still may)."""


DEFAULT_BANK_LIMITS = BankLimits()


class NeedsOwnerGrant(PermissionDenied):
    """This peer's key needs ``permission`` on ``bank`` from the bank's owner first; the
    command layer words the way out (the grant to run on the owner's peer)."""

    def __init__(self, message: str, *, key: str, permission: str, bank: str) -> None:
        super().__init__(message)
        self.key, self.permission, self.bank = key, permission, bank


def check_name(name: str, what: str = "bank") -> str:
    if not NAME_RE.fullmatch(name):
        raise InputError(
            f"bad {what} name {name[:70]!r}: 1-64 letters, digits, '_', '.', '-', "
            "starting with a letter or digit"
        )
    return name


def check_bank_room(
    hosted: list[Hosted], person: str, limits: BankLimits = DEFAULT_BANK_LIMITS
) -> None:
    """PermissionDenied (one line) when ``person``, a non-admin, may create no more banks:
    they created ``limits.per_person`` of the banks in ``hosted``, or it holds
    ``limits.total``."""
    mine = sum(1 for h in hosted if h.data.get(CREATED_BY) == person)
    if mine >= limits.per_person:
        raise PermissionDenied(
            f"you created {mine} banks on this peer, the most a non-admin may "
            f"({limits.per_person} banks); ask an admin to delete one or to create it"
        )
    if len(hosted) >= limits.total:
        raise PermissionDenied(
            f"this peer hosts {len(hosted)} banks, the most non-admins may create "
            f"({limits.total} banks); ask an admin"
        )


def looks_like_key(ref: str) -> bool:
    """A public key as ``/pubkey`` prints it (``ed25519:<64 hex>``)."""
    return ref.startswith(KEY_PREFIX)


@dataclass(frozen=True)
class BankRef:
    """An agent's cached view of a bank grant."""

    name: str
    db: str
    permission: str


@dataclass(frozen=True)
class Delegation:
    """A peer-local record: ``agent`` may use bank ``db`` through this peer's key."""

    db: str
    agent: str
    permission: str  # read | write: the most the agent may do


class Registry:
    """The peer-local index of hosted agents and banks, and the private keys (never synced)."""

    def __init__(
        self,
        ledger: Ledger,
        withdrawn: Callable[[str], str | None] = lambda db: None,
        limits: BankLimits = DEFAULT_BANK_LIMITS,
    ) -> None:
        self.ledger = ledger
        self.limits = limits  # what a non-admin may create (``check_bank_room``)
        # One creation at a time in this process (a state dir has one process), so a name
        # is checked and claimed in one step and a lost race creates nothing.
        self._lock = asyncio.Lock()
        self._keys: list[tuple[str, KeyPair]] | None = None
        self._delegations: dict[str, dict[str, Delegation]] = {}
        # Why this peer must not write to a database any more (its remote refuses this peer's
        # key), or None: the peer's sync service says. Delegated writes check it (MemoryScope).
        self.withdrawn = withdrawn

    async def get(self, kind: str, name: str) -> Hosted | None:
        return await self.ledger.hosted.get(kind, name)

    async def by_db(self, db: str) -> Hosted | None:
        return await self.ledger.hosted.by_db(db, ("bank", "agent"))

    async def all(self, kind: str) -> list[Hosted]:
        return await self.ledger.hosted.all(kind)

    async def add(self, kind: str, name: str, db: str, data: dict[str, Any] | None = None) -> None:
        async with self._lock:
            await self._claim(kind, name)
            await self._insert(kind, name, db, data)

    async def create(
        self,
        kind: str,
        name: str,
        make: Callable[[], Awaitable[str]],
        data: dict[str, Any] | None = None,
        bound_for: str | None = None,
    ) -> str:
        """Check ``name`` is free, run ``make()`` (which creates the DB), register it.

        Atomic in this process: of two concurrent creations of one name, the second gets a
        ConflictError and ``make`` is never run for it (no orphan database). ``bound_for``:
        a non-admin creating a bank, held to ``check_bank_room`` in the same step, so a burst
        of creations cannot pass the bound between the count and the insert.
        """
        async with self._lock:
            await self._claim(kind, name)
            if bound_for is not None:
                check_bank_room(await self.all(kind), bound_for, self.limits)
            db = await make()
            await self._insert(kind, name, db, data)
            return db

    async def _claim(self, kind: str, name: str) -> None:
        if await self.get(kind, name) is not None:
            raise ConflictError(f"a {kind} named {name!r} exists already on this peer")

    async def _insert(self, kind: str, name: str, db: str, data: dict[str, Any] | None) -> None:
        await self.ledger.hosted.add(kind, name, db, data)  # ConflictError if taken

    async def remove(self, kind: str, name: str) -> None:
        await self.ledger.hosted.remove(kind, name)

    async def save_key(self, key: KeyPair, label: str) -> None:
        await self.ledger.keys.add(key, label)
        self._keys = None

    async def key(self, label: str) -> KeyPair | None:
        return await self.ledger.keys.first(label)

    async def keys(self) -> list[KeyPair]:
        return [k for _, k in await self.labelled_keys()]

    async def labelled_keys(self) -> list[tuple[str, KeyPair]]:
        """Every private key this peer holds with its label (``peer``, ``agent:x``,
        ``bank:x``), oldest first; cached (keys change only through ``save_key``)."""
        if self._keys is None:
            self._keys = await self.ledger.keys.all()
        return list(self._keys)

    # ---- delegations (peer-local) ------------------------------------------------------

    async def delegations(self, db: str) -> dict[str, Delegation]:
        """The agents this peer delegated ``db`` to (lowercased agent name -> record)."""
        cached = self._delegations.get(db)
        if cached is None:
            rows = await self.ledger.kv.with_prefix(f"{DELEGATION_KV}{db}:")
            cached = {}
            for _, raw in rows:
                value = json.loads(raw)
                found = Delegation(db, str(value["agent"]), str(value["permission"]))
                cached[found.agent.lower()] = found
            self._delegations[db] = cached
        return dict(cached)

    async def delegation(self, db: str, agent: str) -> Delegation | None:
        return (await self.delegations(db)).get(agent.lower())

    async def set_delegation(self, db: str, agent: str, permission: str | None) -> None:
        """Record (or with None remove) that ``agent`` may use ``db`` through this peer."""
        key = f"{DELEGATION_KV}{db}:{agent.lower()}"
        self._delegations.pop(db, None)
        if permission is None:
            await self.ledger.kv.delete(key)
        else:
            await self.ledger.kv.set(key, json.dumps({"agent": agent, "permission": permission}))
        self._delegations.pop(db, None)

    async def drop_delegations(self, db: str) -> None:
        self._delegations.pop(db, None)
        await self.ledger.kv.delete_prefix(f"{DELEGATION_KV}{db}:")
        self._delegations.pop(db, None)


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


# ---- which key this peer acts with -------------------------------------------------------


async def holder_keys(registry: Registry, state: AuthState) -> list[tuple[Permission, KeyPair]]:
    """This peer's own keys (not its agents') that hold something in ``state``,
    strongest first: the keys a delegated agent acts through."""
    found = [
        (permission_of(state, key.public), key)
        for label, key in await registry.labelled_keys()
        if not label.startswith(AGENT_KEY_LABEL)
    ]
    held = [(perm, key) for perm, key in found if perm.level is not Level.NONE]
    return sorted(held, key=lambda item: item[0].rank(), reverse=True)


async def admin_key(ledger: Ledger, registry: Registry, db: str) -> KeyPair | None:
    """A key this peer holds that is an admin of ``db`` (the strongest one), or None."""
    state = await ledger.auth_state(db)
    best: tuple[tuple[int, int], KeyPair] | None = None
    for key in await registry.keys():
        perm = permission_of(state, key.public)
        if perm.level is Level.ADMIN and (best is None or perm.rank() > best[0]):
            best = (perm.rank(), key)
    return None if best is None else best[1]


async def admin_key_for(ledger: Ledger, registry: Registry, db: str) -> KeyPair:
    """A key this peer holds that is an admin of ``db``; PermissionDenied naming what this
    peer holds otherwise (and no way out that would be refused)."""
    found = await admin_key(ledger, registry, db)
    if found is None:
        held = await holder_keys(registry, await ledger.auth_state(db))
        level = held[0][0].name if held else "nothing"
        raise PermissionDenied(
            f"this peer holds {level} on that bank, not admin: only its owner can change who "
            "holds keys on it"
        )
    return found


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


# ---- grant and revoke -------------------------------------------------------------------


@dataclass(frozen=True)
class Granted:
    """What a grant did: the agent's previous direct grant, or the peer key it was
    delegated through (when this peer holds no admin key on the bank)."""

    previous: KeyGrant | None = None
    delegated_via: str | None = None


async def grant(
    ledger: Ledger,
    registry: Registry,
    bank_name: str,
    bank_db: str,
    agent_key: KeyPair,
    agent_db: str,
    perm: Permission,
    agent_name: str | None = None,
    owner_ref: str | None = None,
) -> Granted:
    """Authorise an agent on a bank: the auth change, then the ref, in one transaction.

    Without an admin key on the bank, and with ``agent_name`` given, the grant is a
    delegation through this peer's key (see the module doc). ``owner_ref`` is how the
    bank's owner names it (for the way out when even that is not possible).
    """
    if perm.level not in (Level.READ, Level.WRITE):
        raise InputError("grant takes read or write")
    admin = await admin_key(ledger, registry, bank_db)
    if admin is None:
        if agent_name is None:
            await admin_key_for(ledger, registry, bank_db)  # raises, saying what is held
        assert agent_name is not None
        return await _delegate(
            ledger,
            registry,
            bank_name,
            bank_db,
            agent_name,
            agent_key,
            agent_db,
            perm,
            owner_ref,
        )
    before = (await ledger.auth_state(bank_db)).get(agent_key.public)
    await ledger.write_each(
        [
            (bank_db, admin, {AUTH_STORE: [auth_op(agent_key.public, perm)]}),  # grant first
            (agent_db, agent_key, ref_op(bank_name, bank_db, perm.name)),
        ]
    )
    if agent_name is not None and await registry.delegation(bank_db, agent_name) is not None:
        await registry.set_delegation(bank_db, agent_name, None)  # a direct grant supersedes
    return Granted(previous=before)


async def _delegate(
    ledger: Ledger,
    registry: Registry,
    bank_name: str,
    bank_db: str,
    agent_name: str,
    agent_key: KeyPair,
    agent_db: str,
    perm: Permission,
    owner_ref: str | None,
) -> Granted:
    held = await holder_keys(registry, await ledger.auth_state(bank_db))
    if not held or not held[0][0].allows(perm.level):
        level = held[0][0].name if held else "nothing"
        peer = await registry.key("peer")
        who = peer.public if peer is not None else "this peer's key"
        raise NeedsOwnerGrant(
            f"this peer holds {level} on {bank_name}, so it cannot give {agent_name} "
            f"{perm.name}; ask the bank's owner to grant {who} {perm.name} on "
            f"{owner_ref or bank_name} on their peer, then grant again",
            key=who,
            permission=perm.name,
            bank=owner_ref or bank_name,
        )
    before = await registry.delegation(bank_db, agent_name)
    await registry.set_delegation(bank_db, agent_name, perm.name)
    try:
        await ledger.write(agent_db, agent_key, ref_op(bank_name, bank_db, perm.name))
    except Exception as exc:  # the record is peer-local, not an entry: put it back
        await registry.set_delegation(
            bank_db, agent_name, before.permission if before is not None else None
        )
        raise ConflictError(
            f"could not write the bank ref ({exc}); the grant was rolled back"
        ) from exc
    return Granted(delegated_via=held[0][1].public)


async def revoke(
    ledger: Ledger,
    registry: Registry,
    bank_name: str,
    bank_db: str,
    agent_key: KeyPair,
    agent_db: str,
    agent_name: str | None = None,
) -> bool:
    """Revoke an agent's key (and any delegation) on a bank, then remove its ref best-effort.

    Returns True when the ref was removed too, False when it was left behind.
    """
    current = (await ledger.auth_state(bank_db)).get(agent_key.public)
    direct = current is not None and current.active
    delegated = await registry.delegation(bank_db, agent_name) if agent_name is not None else None
    if not direct and delegated is None:
        raise NotFound("that agent holds no grant on that bank")
    if direct:
        assert current is not None
        admin = await admin_key_for(ledger, registry, bank_db)
        revoked = auth_op(agent_key.public, current.perm, active=False)
        await ledger.write(bank_db, admin, {AUTH_STORE: [revoked]})
    if delegated is not None:
        await registry.set_delegation(bank_db, delegated.agent, None)
    try:
        await ledger.write(agent_db, agent_key, ref_op(bank_name, None, None))
    except Exception as exc:  # best-effort: auth is what matters
        log.warning("revoke: could not remove the ref of %s: %s", bank_name, exc)
        return False
    return True


async def set_key(
    ledger: Ledger, registry: Registry, bank_db: str, key: str, perm: Permission | None
) -> KeyGrant | None:
    """Grant ``key`` ``perm`` on a bank, or revoke it (``None``); needs an admin key here.

    Returns the key's grant before. Refuses to touch this peer's own keys (that would lock
    this peer out of its own bank) and to revoke a key that holds nothing.
    """
    from chazbot.ledger.keys import parse_public_key

    parse_public_key(key)
    if perm is not None and perm.level not in (Level.READ, Level.WRITE):
        raise InputError("grant takes read or write")
    own = {
        k.public
        for label, k in await registry.labelled_keys()
        if not label.startswith(AGENT_KEY_LABEL)
    }
    if key in own:
        raise InputError("that is one of this peer's own keys; revoke other peers' keys")
    admin = await admin_key_for(ledger, registry, bank_db)
    before = (await ledger.auth_state(bank_db)).get(key)
    if perm is None:
        if before is None or not before.active:
            raise NotFound("that key holds no grant on that bank")
        await ledger.write(bank_db, admin, {AUTH_STORE: [auth_op(key, before.perm, False)]})
    else:
        await ledger.write(bank_db, admin, {AUTH_STORE: [auth_op(key, perm)]})
    return before


def looks_like_db_id(ref: str) -> bool:
    return is_content_id(ref)

"""The auth entries of one database as a small DAG, answering "what did key k hold here?".

The auth state at a point of history is the fold, in (height, entry id, op index) order, of
every auth operation in its ancestry (see ``auth``). Instead of materialising that state for
every point (which grows as auth changes x members), each auth entry gets a bit index and
the set of its auth ancestors as a Python int bitset; a point of history is named by its
*heads* (the antichain of auth entries at the top of its ancestry, usually one). The grant
of key k at a point is then the last operation on k whose entry is in the heads' ancestry:
a walk over k's own operations, newest first. Memory grows with auth entries squared over
8 bits (250 KB for 2,000 changes); nothing else grows with members.

Pure: no I/O. ``LedgerCore`` feeds it entries and persists the heads.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from chazbot.ledger.auth import KeyGrant

Order = tuple[int, str, int]  # (height, entry id, op index)


@dataclass
class AuthGraph:
    """Auth entries of one database, their ancestry bitsets, and each key's operations."""

    index: dict[str, int] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)
    bits: list[int] = field(default_factory=list)
    ops: dict[str, list[tuple[Order, int, KeyGrant]]] = field(default_factory=dict)
    keys_of: list[list[str]] = field(default_factory=list)  # per entry: the keys it sets

    def __contains__(self, eid: str) -> bool:
        return eid in self.index

    def closure(self, heads: Iterable[str]) -> int:
        """The bitset of every auth entry at or below ``heads``."""
        found = 0
        for head in heads:
            found |= self.bits[self.index[head]]
        return found

    def heads_of(self, members: Iterable[str]) -> tuple[str, ...]:
        """The antichain of ``members``: drop each one that is below another."""
        unique = sorted(set(members))
        if len(unique) <= 1:
            return tuple(unique)
        out = []
        for eid in unique:
            bit = 1 << self.index[eid]
            if not any(other != eid and self.bits[self.index[other]] & bit for other in unique):
                out.append(eid)
        return tuple(out)

    def add(
        self,
        eid: str,
        height: int,
        below: Iterable[str],
        grants: list[tuple[str, KeyGrant]],
    ) -> None:
        """Add an auth entry whose parents' auth heads are ``below``."""
        if eid in self.index:
            return
        n = len(self.ids)
        self.index[eid] = n
        self.ids.append(eid)
        self.bits.append(self.closure(below) | (1 << n))
        self.keys_of.append([key for key, _ in grants])
        for i, (key, grant) in enumerate(grants):
            bisect.insort(self.ops.setdefault(key, []), ((height, eid, i), n, grant))

    def remove_last(self, eid: str) -> None:
        """Undo ``add`` of the most recently added entry (a refused ingest)."""
        n = self.index.get(eid)
        if n is None or n != len(self.ids) - 1:
            return
        del self.index[eid]
        self.ids.pop()
        self.bits.pop()
        for key in set(self.keys_of.pop()):
            kept = [op for op in self.ops.get(key, ()) if op[1] != n]
            if kept:
                self.ops[key] = kept
            else:
                del self.ops[key]

    def grant_at(self, closure: int, key: str) -> KeyGrant | None:
        """Key's grant in the state whose ancestry bitset is ``closure`` (None: never set)."""
        for _, n, grant in reversed(self.ops.get(key, ())):
            if closure >> n & 1:
                return grant
        return None

    def current(self, key: str) -> tuple[KeyGrant, str] | None:
        """Key's grant in the state of every auth entry held, and the entry that set it."""
        ops = self.ops.get(key)
        if not ops:
            return None
        order, _, grant = ops[-1]
        return grant, order[1]

    def current_state(self) -> dict[str, KeyGrant]:
        return {key: ops[-1][2] for key, ops in self.ops.items() if ops}

    def state_at(self, closure: int) -> dict[str, KeyGrant]:
        """The whole state at ``closure`` (for display and checks; O(operations))."""
        state: dict[str, KeyGrant] = {}
        for key in self.ops:
            grant = self.grant_at(closure, key)
            if grant is not None:
                state[key] = grant
        return state

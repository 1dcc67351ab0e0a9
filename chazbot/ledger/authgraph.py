"""The auth entries of one database as a small DAG, and the auth state resolved by authority.

Each auth entry gets a bit index and the set of its auth ancestors as a Python int bitset; a
point of history is named by its *heads* (the antichain of auth entries at the top of its
ancestry, usually one). Memory grows with auth entries squared over 8 bits (250 KB for 2,000
changes); nothing else grows with members. ``grant_at`` is the plain (height, entry id, op
index) fold of a point's ancestry (kept for display); what entries are checked against is
the state *resolved* from the auth entries of their ancestry (``resolved_at``), and the
current state is the one resolved from every auth entry held.

**Resolved** (``resolution``, ``resolved_at``): by authority, never by height (SPEC §2; the
model is Matrix state resolution v2). The auth entries are put in one order: parents before
children, and among entries whose parents are all placed, the one whose author held the
strongest permission at its parents first, then lower height, then lower id (Matrix's reverse
topological power ordering). They are then applied one by one, each checked against the
state resolved so far (Matrix's iterative auth checks): an entry whose author does not hold
the authority for every one of its changes there is *soft-failed*, never applied. When an
applied entry lowers a key (a revocation or a demotion), the key's own entries that were
applied before it, are not its ancestors (its author had not seen them) and needed more than
the key now holds are soft-failed as well, and the pass starts again without them: a key
cannot keep what it did concurrently with its own revocation, and whatever it granted so
gains nothing. Soft-failed entries stay in the DAG (ids resolve; they order the rest), so
peers holding the same entries resolve the same state whatever order they got them in.

Pure: no I/O. ``LedgerCore`` feeds it entries and persists the heads and the resolution.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

from chazbot.ledger.auth import KeyGrant, Level, Permission, change_refusal

Order = tuple[int, str, int]  # (height, entry id, op index)
MAX_POINTS_CACHED = 64  # resolved states of points of history other than the current one


@dataclass(frozen=True)
class Resolution:
    """The current auth state of one database, resolved by authority.

    ``order``: every auth entry's index, in resolution order; ``grants``/``decider``: each
    key's grant and the index of the entry that set it; ``failed``: soft-failed entries
    (index -> why); ``excluded``: those soft-failed for acting concurrently with their own
    author's lowering (kept so that a later entry extends the resolution in one step).
    """

    order: tuple[int, ...] = ()
    grants: dict[str, KeyGrant] = field(default_factory=dict)
    decider: dict[str, int] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    excluded: frozenset[int] = frozenset()


@dataclass
class AuthGraph:
    """Auth entries of one database, their ancestry bitsets, and each key's operations."""

    index: dict[str, int] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)
    bits: list[int] = field(default_factory=list)
    ops: dict[str, list[tuple[Order, int, KeyGrant]]] = field(default_factory=dict)
    keys_of: list[list[str]] = field(default_factory=list)  # per entry: the keys it sets
    heights: list[int] = field(default_factory=list)
    authors: list[str] = field(default_factory=list)
    changes: list[list[tuple[str, KeyGrant]]] = field(default_factory=list)
    below: list[tuple[int, ...]] = field(default_factory=list)  # per entry: its auth heads
    power: list[tuple[int, int]] = field(default_factory=list)  # author's rank at parents
    settled: Resolution | None = None  # the resolution the file holds (LedgerCore's)
    _resolved: Resolution | None = None
    _at: dict[int, Resolution] = field(default_factory=dict)  # resolved, per point

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
        author: str = "",
    ) -> None:
        """Add an auth entry by ``author`` whose parents' auth heads are ``below``."""
        if eid in self.index:
            return
        heads = tuple(self.index[b] for b in below)
        closure = self.closure(below)
        held = self.resolved_at(closure).get(author) if below else None
        rank = held.perm.rank() if held is not None and held.active else (0, 0)
        n = len(self.ids)
        self.index[eid] = n
        self.ids.append(eid)
        self.bits.append(closure | (1 << n))
        self.keys_of.append([key for key, _ in grants])
        self.heights.append(height)
        self.authors.append(author)
        self.changes.append(list(grants))
        self.below.append(heads)
        self.power.append(rank)
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
        self.heights.pop()
        self.authors.pop()
        self.changes.pop()
        self.below.pop()
        self.power.pop()
        for key in set(self.keys_of.pop()):
            kept = [op for op in self.ops.get(key, ()) if op[1] != n]
            if kept:
                self.ops[key] = kept
            else:
                del self.ops[key]
        if self._resolved is not None and n in self._resolved.order:
            self._resolved = None
        if self._at:  # its index may be given to another entry
            self._at = {c: found for c, found in self._at.items() if not c >> n & 1}

    def grant_at(self, closure: int, key: str) -> KeyGrant | None:
        """Key's grant in the state whose ancestry bitset is ``closure`` (None: never set)."""
        for _, n, grant in reversed(self.ops.get(key, ())):
            if closure >> n & 1:
                return grant
        return None

    def state_at(self, closure: int) -> dict[str, KeyGrant]:
        """The whole state at ``closure`` (for display and checks; O(operations))."""
        state: dict[str, KeyGrant] = {}
        for key in self.ops:
            grant = self.grant_at(closure, key)
            if grant is not None:
                state[key] = grant
        return state

    # ---- the current state, resolved by authority -----------------------------------------

    def restore(self, found: Resolution | None) -> None:
        """Undo a settling: the file holds ``found`` again."""
        self.settled = self._resolved = found

    def current(self, key: str) -> tuple[KeyGrant, str] | None:
        """Key's grant in the resolved current state, and the entry that set it."""
        found = self.resolution()
        grant = found.grants.get(key)
        if grant is None:
            return None
        return grant, self.ids[found.decider[key]]

    def current_state(self) -> dict[str, KeyGrant]:
        return dict(self.resolution().grants)

    def soft_failed(self) -> dict[str, str]:
        """Soft-failed auth entries: id -> why."""
        return {self.ids[n]: why for n, why in self.resolution().failed.items()}

    def resolution(self) -> Resolution:
        """The current state resolved by authority (cached; extended in one step when the
        newest entries each build on every other, as a local write does)."""
        done = self._resolved
        total = len(self.ids)
        if done is not None and len(done.order) == total:
            return done
        if done is not None and all(
            self.bits[n] == (1 << (n + 1)) - 1 for n in range(len(done.order), total)
        ):
            found = done
            for n in range(len(done.order), total):
                found = self._extend(found, n)
        else:
            quick = (
                self._failing(done, total - 1) if done and len(done.order) == total - 1 else None
            )
            found = quick if quick is not None else self._resolve()
        self._resolved = found
        return found

    def resolved_at(self, closure: int) -> dict[str, KeyGrant]:
        """The state resolved by authority from the auth entries in ``closure`` only: what an
        entry whose ancestry that is is checked against (do not change the dict)."""
        total = len(self.ids)
        if closure == (1 << total) - 1:
            return self.resolution().grants
        found = self._at.get(closure)
        if found is None:
            found = self._point(closure)
            if len(self._at) >= MAX_POINTS_CACHED:
                del self._at[next(iter(self._at))]
            self._at[closure] = found
        return found.grants

    def _point(self, closure: int) -> Resolution:
        """Resolve a point of history: in one step from the point below its one head when
        that is known (a branch growing entry by entry), else from its entries."""
        top = closure.bit_length() - 1  # a single head is the newest entry of its ancestry
        if top >= 0 and self.bits[top] == closure:
            base = closure & ~(1 << top)
            below = self._at.get(base)
            done = self._resolved
            if below is None and done is not None and base == (1 << len(done.order)) - 1:
                below = done
            if below is not None:
                return self._extend(below, top)
        return self._resolve([n for n in range(len(self.ids)) if closure >> n & 1])

    def _order(self, members: list[int] | None = None) -> list[int]:
        """Parents first; among entries ready, the strongest author (at its parents) first,
        then lower height, then lower id. ``members`` (closed under ancestry): only those."""
        chosen = list(range(len(self.ids))) if members is None else members
        children: dict[int, list[int]] = {n: [] for n in chosen}
        waiting = {n: len(set(self.below[n])) for n in chosen}
        for n in chosen:
            for parent in set(self.below[n]):
                children[parent].append(n)
        ready = [self._priority(n) for n, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        out: list[int] = []
        while ready:
            *_, n = heapq.heappop(ready)
            out.append(n)
            for child in children[n]:
                waiting[child] -= 1
                if waiting[child] == 0:
                    heapq.heappush(ready, self._priority(child))
        return out

    def _priority(self, n: int) -> tuple[int, int, int, str, int]:
        level, prio = self.power[n]
        return (-level, -prio, self.heights[n], self.ids[n], n)

    def _resolve(self, members: list[int] | None = None) -> Resolution:
        order = tuple(self._order(members))
        excluded: frozenset[int] = frozenset()
        while True:  # each round soft-fails at least one more entry, so this ends
            found, victims = self._pass(order, excluded)
            if not victims:
                return found
            excluded = excluded | victims

    def _failing(self, done: Resolution, n: int) -> Resolution | None:
        """``done`` and entry ``n`` when ``n`` surely fails, without a new pass (a revoked
        key's concurrent entries, one by one, each cost O(entries), not a resolution): its
        author is no admin in ``done``, ``done`` needed no restart, and ``n`` comes after the
        entry that decided its author. Then every step before ``n`` is as it was, its author
        holds there what it holds in the end, so ``n`` fails and changes nothing. Else None."""
        author = self.authors[n]
        held = done.grants.get(author)
        if done.excluded or not self.below[n] or (held is not None and _holds(held, None)):
            return None
        place = {m: i for i, m in enumerate(done.order)}
        ready = max(place[b] for b in self.below[n]) + 1
        mine = self._priority(n)
        at = next(
            (i for i in range(ready, len(done.order)) if mine < self._priority(done.order[i])),
            len(done.order),
        )
        decider = done.decider.get(author)
        if decider is not None and at <= place[decider]:
            return None
        why = self._apply(n, dict(done.grants), dict(done.decider))
        if why is None:
            return None
        order = (*done.order[:at], n, *done.order[at:])
        return Resolution(order, done.grants, done.decider, {**done.failed, n: why}, done.excluded)

    def _extend(self, done: Resolution, n: int) -> Resolution:
        """``done`` and entry ``n``, which builds on every entry ``done`` holds."""
        grants, decider, failed = dict(done.grants), dict(done.decider), dict(done.failed)
        why = self._apply(n, grants, decider)
        if why is not None:
            failed[n] = why
        return Resolution((*done.order, n), grants, decider, failed, done.excluded)

    def _apply(self, n: int, grants: dict[str, KeyGrant], decider: dict[str, int]) -> str | None:
        """Apply entry ``n`` to the state if its author may make each of its changes there;
        otherwise return why not (and change nothing)."""
        if not self.below[n]:  # the root: validated on its own (its author is admin(0))
            for key, grant in self.changes[n]:
                grants[key], decider[key] = grant, n
            return None
        author = self.authors[n]
        progressive = {k: grants[k] for k in {author, *self.keys_of[n]} if k in grants}
        for key, grant in self.changes[n]:
            refusal = change_refusal(progressive, author, key, grant)
            if refusal is not None:
                return f"soft-failed in the resolved auth state: {refusal}"
            progressive[key] = grant
        for key, grant in self.changes[n]:
            grants[key], decider[key] = grant, n
        return None

    def _pass(
        self, order: tuple[int, ...], excluded: frozenset[int]
    ) -> tuple[Resolution, frozenset[int]]:
        grants: dict[str, KeyGrant] = {}
        decider: dict[str, int] = {}
        failed: dict[int, str] = {}
        applied: dict[str, list[tuple[int, Permission]]] = {}  # author -> (entry, needed)
        for n in order:
            if n in excluded:
                failed[n] = (
                    "soft-failed in the resolved auth state: its author's authority was "
                    "lowered by an entry that had not seen this one"
                )
                continue
            needed = self._needed(n, grants)
            why = self._apply(n, grants, decider)
            if why is not None:
                failed[n] = why
                continue
            applied.setdefault(self.authors[n], []).append((n, needed))
            victims = frozenset(
                m
                for key in set(self.keys_of[n])
                for m, need in applied.get(key, ())
                if m != n and not self.bits[n] >> m & 1 and not _holds(grants[key], need)
            )
            if victims:
                return Resolution(), victims
        return Resolution(order, grants, decider, failed, excluded), frozenset()

    def _needed(self, n: int, grants: dict[str, KeyGrant]) -> Permission:
        """The weakest permission that could make entry ``n``'s changes in ``grants``."""
        needed = Permission(Level.ADMIN, 2**31)
        for key, grant in self.changes[n]:
            current = grants.get(key)
            for perm in (grant.perm, current.perm if current and current.active else None):
                if perm is not None and perm.level is Level.ADMIN and perm.stronger_than(needed):
                    needed = perm
        return needed


def _holds(grant: KeyGrant, needed: Permission | None) -> bool:
    """Whether ``grant`` is an active admin at least as strong as ``needed`` (any admin)."""
    if not grant.active or grant.perm.level is not Level.ADMIN:
        return False
    return needed is None or not needed.stronger_than(grant.perm)

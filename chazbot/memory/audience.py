"""Who may be told what (SPEC §5c): a row's provenance, a session's audience, and the rule.

Nothing the bot learned in one room is told to anyone who was not there. Every row written
during a turn records, in its signed entry, where it was learned: the room (the session's
name), the speaker's MXID, and the audience, the room's joined members then (the bot aside;
with ``invited`` history, the people invited then too). Rows with no provenance (the
terminal, ``chazbot cmd``/``tool``, the Python API, and every row written before provenance
existed) are the **operator's** (in a bank: the bank's, told to whoever may read the bank).

A row from room R is visible in session S when

- S is R and every person in S now could read the original message under R's
  ``history_visibility`` as Matrix defines it (``shared``/``world_readable``: anyone who is
  a member now; ``joined``/``invited``: those who were there when it was said, the row's
  audience; the visibility in force when it was said, recorded in the row), or
- S's readers are bounded and every person now in S is in the row's audience (a row an
  agent with ``memory_audience: agent`` wrote has that agent's whole audience: any bounded
  session of an agent that may read the DB).

**Fail closed**: a session whose readers cannot be bounded (nobody but the bot, membership
unknown, a public join rule, ``world_readable`` history) sees only rows learned in that same
room. Operator rows are visible in the terminal and where everyone present is an admin. The
full view (``Audience.FULL``) is the operator's own: terminal, ``chazbot cmd``, export and
verify. The rule is the row's, whatever agent, bank or command reads it.

Above ``MAX_AUDIENCE`` members (or the smaller bound the operator set, ``Audience.most``) a
row records no list. Said under an open history, its audience is "the members of that room",
looked up when it is read (``Audience.members_of``: who has joined it now may read all it said);
when they cannot be looked up the row is not shown. Said under a closed history (``joined``,
``invited``) only those there then could read it, and without the list nobody can tell who
they were (someone may have joined since): such a row is told only in its own room, to those
who could read it there, and with no list that is nobody the rule can name (#47).

A row also has a **scope**: the room it was written in (``""`` for operator rows and for an
agent whose ``memory_audience`` is ``agent``). A row supersedes, and a ``forget`` hides, only
rows of its own scope and key, so a write in one room never replaces a row another room
cannot see: one key in two audiences is two rows.

Pure: plain data and functions, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from chazbot.errors import InputError

MAX_AUDIENCE = 50
"""Members recorded in a row; a bigger room's rows are checked against its members at read
time. 50 MXIDs of 255 bytes fit the row's 16 KiB of other fields."""
MAX_MXID_CHARS = 255
MAX_ROOM_CHARS = 255
OPERATOR = "operator"
"""How the operator's rows name their speaker."""
ORIGIN_FIELD = "from"
SCOPE_FIELD = "scope"
CLOSED_HISTORY = frozenset({"joined", "invited"})
"""``history_visibility`` values under which only those there when a message was sent read it
(recorded in a row's provenance: a row said so stays so when the room opens later)."""


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a row was learned: the session (room), who said it, who heard it.

    ``audience`` is the sorted joined members then (the bot aside), or None when the room had
    more than ``MAX_AUDIENCE`` (then it is the room's members at read time). ``history`` is
    the room's ``history_visibility`` then when it was a closed one (``joined``/``invited``):
    Matrix decides who reads a message by the visibility in force when it was sent, so a
    room that opens its history later does not open what was said before (None: open, or
    written before this was kept).
    """

    room: str
    speaker: str
    audience: tuple[str, ...] | None
    history: str | None = None

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"room": self.room, "speaker": self.speaker}
        if self.audience is not None:
            data["audience"] = list(self.audience)
        if self.history is not None:
            data["history"] = self.history
        return data

    @classmethod
    def of(
        cls,
        room: str,
        speaker: str,
        members: Iterable[str],
        history: str | None = None,
        most: int = MAX_AUDIENCE,
    ) -> Provenance:
        """The provenance of a row said by ``speaker`` in ``room`` with ``members`` present,
        under ``history`` (kept when closed); no list past ``most`` people."""
        people = sorted(set(members) | {speaker})
        closed = history if history in CLOSED_HISTORY else None
        return cls(room, speaker, tuple(people) if len(people) <= most else None, closed)

    @classmethod
    def from_data(cls, data: Any) -> Provenance | None:
        """Parse a stored ``from`` field; None when absent or malformed (an operator row).

        Equal provenances are one object (most rows of a room share theirs), so a view of
        100k rows from a room of 50 holds one audience tuple, not 100k."""
        if not isinstance(data, dict):
            return None
        room, speaker, audience = data.get("room"), data.get("speaker"), data.get("audience")
        if not isinstance(room, str) or not room or not isinstance(speaker, str):
            return None
        history = data.get("history")
        closed = history if history in CLOSED_HISTORY else None
        if history is not None and closed is None:
            return None
        if audience is None:
            found = cls(room, speaker, None, closed)
        elif not isinstance(audience, list) or not all(isinstance(m, str) for m in audience):
            return None
        else:
            found = cls(room, speaker, tuple(audience), closed)
        return _intern(found)

    @classmethod
    def from_json(cls, text: str) -> Provenance | None:
        return cls.from_data(json.loads(text))


_INTERNED: dict[Provenance, Provenance] = {}
_MAX_INTERNED = 10_000


def _intern(prov: Provenance) -> Provenance:
    found = _INTERNED.get(prov)
    if found is None:
        if len(_INTERNED) >= _MAX_INTERNED:
            _INTERNED.clear()
        _INTERNED[prov] = found = prov
    return found


def check_origin(data: Any) -> None:
    """The bounds of a stored ``from`` field (registered with the ledger through rows.py)."""
    if not isinstance(data, dict) or not set(data) <= {"room", "speaker", "audience", "history"}:
        raise InputError("a row's 'from' is {room, speaker, audience, history}")
    if "history" in data and data["history"] not in CLOSED_HISTORY:
        raise InputError(f"a row's from.history is one of {', '.join(sorted(CLOSED_HISTORY))}")
    room, speaker, audience = data.get("room"), data.get("speaker"), data.get("audience")
    if not isinstance(room, str) or not 1 <= len(room) <= MAX_ROOM_CHARS:
        raise InputError(f"a row's from.room is 1-{MAX_ROOM_CHARS} characters")
    if not isinstance(speaker, str) or not 1 <= len(speaker) <= MAX_MXID_CHARS:
        raise InputError(f"a row's from.speaker is 1-{MAX_MXID_CHARS} characters")
    if audience is not None:
        if not isinstance(audience, list) or len(audience) > MAX_AUDIENCE:
            raise InputError(f"a row's from.audience is a list of at most {MAX_AUDIENCE}")
        for member in audience:
            if not isinstance(member, str) or not 1 <= len(member) <= MAX_MXID_CHARS:
                raise InputError(f"each of from.audience is 1-{MAX_MXID_CHARS} characters")


def check_scope(scope: Any) -> None:
    if not isinstance(scope, str) or len(scope) > MAX_ROOM_CHARS:
        raise InputError(f"a row's scope is at most {MAX_ROOM_CHARS} characters")


GroupKey = tuple[str, tuple[str, ...] | None, bool, bool]
"""Rows that share a room, a recorded audience, a width and a closed history are visible
together: ``("", (), False, False)`` is the operator's group; a True width marks rows an
agent-wide agent wrote (scope ``""`` with a provenance); a True last field rows said under a
closed history (told in their own room only to their audience, whatever the room says now)."""
OPERATOR_GROUP: GroupKey = ("", (), False, False)
HISTORY_VISIBILITY = frozenset({"shared", "world_readable", "joined", "invited"})
"""Matrix's ``history_visibility`` values; an unknown one is treated as ``joined``."""
OPEN_HISTORY = frozenset({"shared", "world_readable"})
"""Under these, anyone who is a member now may read all that was said in the room."""


def group_of(prov: Provenance | None, scope: str | None = None) -> GroupKey:
    """The group of a row with provenance ``prov`` and ``scope`` (None: a room-scoped row)."""
    if prov is None:
        return OPERATOR_GROUP
    return (prov.room, prov.audience, scope == "", prov.history is not None)


@dataclass(frozen=True)
class Audience:
    """Who hears what the bot says in one session now.

    ``room`` is the session's name (None: the operator's full view); ``present`` the people
    in it now, the bot aside; ``admins_only`` whether every one of them is an admin (then
    operator rows may be shown); ``members_of`` looks up who has joined another room now (for rows
    of rooms bigger than ``MAX_AUDIENCE``), None when they are unknown. ``bounded`` is False
    when the readers cannot be bounded (nobody but the bot, membership unknown, a public
    join rule, ``world_readable`` history): then only the room's own rows are told.
    ``history`` is the room's ``history_visibility``; ``bank`` marks a read of a bank, whose
    rows without provenance are the bank's (its grants are their audience).
    """

    room: str | None
    present: frozenset[str] = frozenset()
    admins_only: bool = False
    members_of: Callable[[str], frozenset[str] | None] | None = field(
        default=None, compare=False, hash=False
    )
    joined: frozenset[str] | None = None
    """Who has joined (what a row written here records); None: ``present``. ``present`` may
    hold more (people invited, who may read what is said once they join)."""
    bounded: bool = True
    history: str = "shared"
    bank: bool = False
    late: frozenset[str] = frozenset()
    """People in the room now who came after the message being answered was sent: they
    read the reply, but are not among those who heard that message (its rows' audience)."""
    since: int | None = None
    """Under a closed history, the time (µs) from which everyone now here could read the room
    (the newest join or invite among them): what was said there before is not theirs to be
    told, neither in the conversation the model is shown nor quoted in a captured row. None:
    no such bound (an open history, or the operator's view)."""
    most: int = MAX_AUDIENCE
    """The most people a row said here lists as its audience (a setting, at most
    ``MAX_AUDIENCE``, the bound every peer checks); a bigger room's rows list none."""

    def reads_from(self, ts: int) -> bool:
        """Whether everyone here could read what was said in this room at ``ts`` (µs)."""
        return self.since is None or ts >= self.since

    def origin(self, speaker: str) -> Provenance | None:
        """The provenance of a row ``speaker`` says here (None in the operator's view): the
        joined members, and under ``invited`` history the invited ones too (Matrix lets them
        read what is said from their invite on)."""
        if self.room is None:
            return None
        heard = self.joined if self.joined is not None else self.present
        if self.history == "invited":
            heard = heard | self.present
        return Provenance.of(self.room, speaker, heard - self.late, self.history, self.most)

    def heard_then(self, people: Iterable[str]) -> Audience:
        """This audience answering a message that only ``people`` were in the room for (the
        transport's reckoning when it was sent): whoever else is here now came later."""
        was = frozenset(people)
        now = self.present | (self.joined or frozenset())
        return replace(self, late=now - was)

    @property
    def full(self) -> bool:
        return self.room is None

    def only(self, person: str) -> bool:
        """Whether ``person`` alone reads this session (a DM with the bot), for good."""
        return self.room is not None and self.bounded and self.present == {person}

    def in_bank(self) -> Audience:
        """This audience reading a bank: rows without provenance are the bank's."""
        return self if self.bank or self.room is None else replace(self, bank=True)

    def sees_group(self, group: GroupKey) -> bool:
        """Whether rows of ``group`` (see ``group_of``) may be told in this session."""
        if self.room is None:
            return True
        room, audience, wide, closed = group
        if not room:
            return self.bank or (self.admins_only and self.bounded)
        if room == self.room:
            if self.history in OPEN_HISTORY and not closed:
                return True
            return audience is not None and self.present <= frozenset(audience)
        if not self.bounded:
            return False
        if wide:
            return True
        if audience is None and closed:  # who heard it is not known: its own room only
            return False
        if audience is None:
            members = self.members_of(room) if self.members_of is not None else None
            return members is not None and self.present <= members
        return self.present <= frozenset(audience)

    def sees(self, prov: Provenance | None, scope: str | None = None) -> bool:
        return self.sees_group(group_of(prov, scope))

    def covers(self, later: Audience) -> bool:
        """Whether a reply prepared for this audience may go to ``later`` (who is in the room
        when it is sent): nobody new, and no looser room (SPEC §5c: readers are decided when
        the reply is sent)."""
        if self.room is None:
            return True
        return (
            later.room == self.room
            and later.present <= self.present
            and (later.bounded or not self.bounded)
            and (later.history == self.history or later.history not in OPEN_HISTORY)
        )

    def label(self, prov: Provenance | None) -> str:
        """Where a row was learned, as the block shows it: this room, another room, operator."""
        if prov is None:
            return OPERATOR
        return "this room" if prov.room == self.room else "another room"


FULL = Audience(None)
"""The operator's full view: the terminal, ``chazbot cmd``/``tool``, export, verify."""


def room_audience(
    room: str,
    present: Iterable[str],
    admins: Callable[[str], bool],
    members_of: Callable[[str], frozenset[str] | None] | None = None,
    joined: Iterable[str] | None = None,
    *,
    public: bool = False,
    history: str = "shared",
    most: int = MAX_AUDIENCE,
) -> Audience:
    """The audience of a room with ``present`` in it (the bot aside; invited people count:
    they read the room once they join) of whom ``joined`` have joined. ``public``: anyone may
    join (a public or restricted join rule); ``history``: its ``history_visibility``;
    ``most``: the most people a row said here lists (``Audience.most``)."""
    if not 1 <= most <= MAX_AUDIENCE:
        raise ValueError(f"a row lists 1-{MAX_AUDIENCE} people as its audience, not {most}")
    people = frozenset(present)
    heard = frozenset(joined) if joined is not None else None
    seen = history if history in HISTORY_VISIBILITY else "joined"
    bounded = bool(people) and not public and seen != "world_readable"
    admins_only = bounded and all(map(admins, people))
    return Audience(room, people, admins_only, members_of, heard, bounded, seen, most=most)


def unknown_room(room: str) -> Audience:
    """A room whose members cannot be told: only its own rows (fail closed)."""
    return Audience(room, frozenset(), bounded=False, history="joined")


def visible_groups(
    groups: Mapping[GroupKey, Any], audience: Audience
) -> tuple[list[GroupKey], bool]:
    """The groups ``audience`` may see, and whether that is every one of them."""
    seen = [g for g in groups if audience.sees_group(g)]
    return seen, len(seen) == len(groups)


__all__ = [
    "CLOSED_HISTORY",
    "FULL",
    "MAX_AUDIENCE",
    "OPERATOR",
    "OPERATOR_GROUP",
    "Audience",
    "GroupKey",
    "Provenance",
    "check_origin",
    "check_scope",
    "group_of",
    "room_audience",
    "unknown_room",
    "visible_groups",
]

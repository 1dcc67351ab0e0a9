"""Who may take back someone else's message in a room (``revisions.may_redact``): the pure
rule over the room's state; the end to end cases are ``test_matrix_redaction``."""

from __future__ import annotations

from typing import Any

from chazbot.transports.matrix.revisions import may_redact

ALICE, BOB, CAROL = "@alice:x", "@bob:x", "@carol:x"


def state(version: str, levels: dict[str, Any], **create: Any) -> list[dict[str, Any]]:
    return [
        {
            "type": "m.room.create",
            "state_key": "",
            "sender": ALICE,
            "content": {"room_version": version, **create},
        },
        {"type": "m.room.power_levels", "state_key": "", "sender": ALICE, "content": levels},
        {"type": "m.room.member", "state_key": BOB, "sender": BOB, "content": {"redact": 0}},
    ]


def test_power_levels_decide_in_older_room_versions() -> None:
    room = state("10", {"users": {ALICE: 100, BOB: 50, CAROL: 49}})
    assert may_redact(room, ALICE) and may_redact(room, BOB)
    assert not may_redact(room, CAROL) and not may_redact(room, "@mallory:x")
    assert may_redact(state("10", {"users_default": 50}), CAROL)  # everyone may
    assert not may_redact(state("10", {"redact": 101, "users": {ALICE: 100}}), ALICE)
    assert not may_redact(state("10", {"users": {CAROL: True}, "redact": 1}), CAROL)  # no bools
    assert not may_redact(state("11", {"users": "nope"}), ALICE)  # malformed: the defaults


def test_creators_outrank_every_level_from_room_version_12() -> None:
    room = state("12", {"users": {BOB: 0}}, additional_creators=[BOB])
    assert may_redact(room, ALICE) and may_redact(room, BOB)
    assert not may_redact(room, CAROL)
    assert not may_redact(state("12", {}, additional_creators="@carol:x"), CAROL)
    assert not may_redact([], ALICE)  # state unknown: nobody

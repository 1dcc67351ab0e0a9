"""Messages taken back in Matrix (SPEC §5c): a redaction (``m.room.redaction``) and an edit
(``m.replace``) become jobs of their own, queued in their room behind the message they name.

Neither is answered. A redaction forgets the rows captured from the message it names, when its
sender is the message's sender or may redact others in the room (the power levels); an edit by
the message's sender replaces them by what its new words give, read as the message was (its
mention or prefix stripped; new words no longer addressed to the bot only forget). Whatever
sent them, they touch only rows captured from a message of the same room (``capture_tasks``).
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from nio import RedactionEvent, RoomMessageText

from chazbot.transports.matrix.routing import Job, Router
from chazbot.transports.matrix.rules import is_edit, route

MAX_EVENT_ID_CHARS = 255


def _event_id(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= MAX_EVENT_ID_CHARS else None


def revision_job(router: Router, room: Any, event: Any, handled: Container[str]) -> Job | None:
    """The job of a redaction or an edit, or None for any other event."""
    sender, event_id = getattr(event, "sender", None), _event_id(getattr(event, "event_id", None))
    if not isinstance(sender, str) or event_id is None or event_id in handled:
        return None
    if sender == router.cfg.user_id:
        return None
    if isinstance(event, RedactionEvent):
        target = _event_id(event.redacts)
        if target is None:
            return None
        return Job(room.room_id, event_id, sender, "redaction", content={"redacts": target})
    if not isinstance(event, RoomMessageText):
        return None
    content = event.source.get("content", {})
    if not isinstance(content, dict) or not is_edit(content) or not router.allowed(sender):
        return None
    target = _event_id(content["m.relates_to"].get("event_id"))
    new = content.get("m.new_content")
    if target is None or not isinstance(new, dict):
        return None
    request = route(
        new,
        me=router.me(room),
        prefix=router.cfg.command_prefix,
        is_dm=room.member_count == 2,
        command_words=router.command_words,
    )
    text = request.text if request is not None and request.kind == "chat" else ""
    return Job(room.room_id, event_id, sender, "edit", text, {"replaces": target})


LEGACY_ROOM_VERSIONS = frozenset(str(v) for v in range(1, 12))
"""Room versions whose creators hold only the power their power levels give them (from 12
on, the creators of ``m.room.create`` outrank every level)."""


def _state_event(state: list[Any], kind: str) -> tuple[Any, dict[str, Any]]:
    """(sender, content) of the room's ``kind`` state event (state key ""), or (None, {})."""
    for event in state:
        if not isinstance(event, dict) or event.get("type") != kind:
            continue
        content = event.get("content")
        if event.get("state_key") == "" and isinstance(content, dict):
            return event.get("sender"), content
    return None, {}


def _number(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def may_redact(state: list[Any], user_id: str) -> bool:
    """Whether a room's current ``state`` (its state events, as ``/state`` returns them) lets
    ``user_id`` redact others' events: a creator in room versions from 12 on, else a power
    level of at least ``redact`` (the spec's defaults: ``users_default`` 0, ``redact`` 50)."""
    creator, created = _state_event(state, "m.room.create")
    if str(created.get("room_version", "1")) not in LEGACY_ROOM_VERSIONS:
        others = created.get("additional_creators")
        if user_id == creator or (isinstance(others, list) and user_id in others):
            return True
    _, levels = _state_event(state, "m.room.power_levels")
    users = levels.get("users")
    level = users.get(user_id) if isinstance(users, dict) else None
    mine = _number(level, _number(levels.get("users_default"), 0))
    return mine >= _number(levels.get("redact"), 50)


__all__ = ["LEGACY_ROOM_VERSIONS", "may_redact", "revision_job"]

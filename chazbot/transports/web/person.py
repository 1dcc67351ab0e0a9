"""A person's page: what the bot keeps that they said (SPEC §5c), with search, forget one,
forget all and a JSON download; and the reminders they set (#37), each cancellable.

It reads exactly what ``/memory mine`` reads in a DM (every agent the page's session may
use, the person's own view), and forgets through ``/memory forget-mine``: one rule for the
chat and the page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from aiohttp import web

from chazbot.errors import NotFound
from chazbot.memory.rows import MemoryRow, said_text, to_datetime
from chazbot.reminders.store import Reminder, Reminders
from chazbot.reminders.when import WEEKDAY_NAMES, describe_rule
from chazbot.transports.web.app import (
    PREFIX,
    WEB_SESSION,
    WebUI,
    Who,
    page_number,
    query,
)

if TYPE_CHECKING:
    from aiohttp.web_urldispatcher import UrlDispatcher

PAGE_ROWS = 50
QUERY_MAX_CHARS = 200


@dataclass(frozen=True)
class Said:
    """One row the person said, with the agent that keeps it, shown as a person reads it
    (#36): what they said without the machine's "who (date): " prefix, where as a room's
    name, when in their zone."""

    agent: str
    row: MemoryRow
    zone: str = "UTC"
    room_name: str | None = None
    """The room's name as the Matrix transport knows it (None: unknown)."""

    @property
    def when(self) -> str:
        return to_datetime(self.row.ts).astimezone(ZoneInfo(self.zone)).strftime("%d %b %Y, %H:%M")

    @property
    def said(self) -> str:
        return said_text(self.row.value)

    @property
    def room(self) -> str:
        origin = self.row.origin
        if origin is None:
            return "the terminal (operator)"
        if origin.audience is not None and len(origin.audience) == 1:
            return f"your DM with {self.agent}"
        if self.room_name:
            return self.room_name
        if origin.room == WEB_SESSION:
            return "this page"
        people = "" if origin.audience is None else f" of {len(origin.audience)} people"
        return f"a group room{people}"

    def as_json(self) -> dict[str, object]:
        origin = self.row.origin
        return {
            "agent": self.agent,
            "key": self.row.key,
            "value": self.row.value,
            "tags": list(self.row.tags),
            "when": to_datetime(self.row.ts).isoformat(),
            "room": origin.room if origin else None,
            "audience": list(origin.audience) if origin and origin.audience else None,
        }


_DAYS = {name[:2].upper(): name.capitalize() for name in WEEKDAY_NAMES}
_NTH = {"1": "1st", "2": "2nd", "3": "3rd", "4": "4th", "-1": "last"}


def repeat_text(rule: str | None) -> str:
    """A recurrence as a person says it: once, every day, every Monday, 1st Monday monthly."""
    plain = describe_rule(rule)
    kind, _, every = plain.partition(" (every ")
    also = f" (every {every}" if every else ""
    if kind == "none":
        return "once"
    if kind == "daily":
        return "every day" + also
    if kind.startswith("weekly:"):
        return f"every {_DAYS.get(kind[7:], kind[7:])}" + also
    if kind.startswith("monthly:"):
        day = kind[8:]
        nth, name = day[:-2], day[-2:]
        return f"{_NTH.get(nth, nth)} {_DAYS.get(name, name)} of the month" + also
    return plain


@dataclass(frozen=True)
class Upcoming:
    """One active reminder the person set (#37), as their page shows it: what, when next in
    their zone, where (as ``Said.room`` names rooms), how often."""

    agent: str
    reminder: Reminder
    zone: str = "UTC"
    room_name: str | None = None

    @property
    def when(self) -> str:
        due = self.reminder.next_due() or self.reminder.first
        return due.astimezone(ZoneInfo(self.zone)).strftime("%a %d %b %Y, %H:%M")

    @property
    def repeat(self) -> str:
        return repeat_text(self.reminder.rule)

    @property
    def room(self) -> str:
        origin = self.reminder.origin
        if origin is not None and origin.audience == (self.reminder.by,):
            return f"your DM with {self.agent}"
        if self.room_name:
            return self.room_name
        if self.reminder.room == WEB_SESSION:
            return "this page"
        if origin is None or origin.audience is None:
            return "a room"
        return f"a group room of {len(origin.audience)} people"


async def zone_of(ui: WebUI, who: Who) -> str:
    """The person's zone (``tz``), as the page shows times."""
    peer = ui.peer
    zone = peer.config.timezone
    for agent in peer.allowed_agents(WEB_SESSION):
        zone = await Reminders(peer.ledger, agent.db, agent.key).zone_of(who.person, zone)
    return zone


async def reminders_of(ui: WebUI, who: Who) -> list[Upcoming]:
    """Every active reminder ``who`` set, with any agent of this peer, soonest first."""
    peer = ui.peer
    zone = await zone_of(ui, who)
    found: list[Upcoming] = []
    for agent in peer.agents.values():
        for r in await Reminders(peer.ledger, agent.db, agent.key).of_person(who.person):
            found.append(Upcoming(agent.name, r, zone, ui.room_name(r.room)))
    found.sort(key=lambda u: (u.reminder.next_due() or u.reminder.first, u.reminder.id))
    return found


async def said_by(ui: WebUI, who: Who) -> list[Said]:
    """Every row ``who`` said, newest first, as ``/memory mine`` finds them in a DM."""
    peer = ui.peer
    audience = ui.own_audience(who)
    found: list[Said] = []
    zone = await zone_of(ui, who)
    for agent in peer.allowed_agents(WEB_SESSION):
        memory = agent.memory.within(peer.hearing(agent, who.person, audience))
        for row in await memory.said_by(who.person, True):
            name = ui.room_name(row.origin.room) if row.origin is not None else None
            found.append(Said(agent.name, row, zone, name))
    found.sort(key=lambda s: (s.row.ts, s.row.order), reverse=True)
    return found


def matching(rows: list[Said], text: str) -> list[Said]:
    """Rows whose key, value or agent holds ``text`` (case-insensitive)."""
    needle = text.casefold()
    if not needle:
        return rows
    return [
        s
        for s in rows
        if needle in s.row.key.casefold()
        or needle in s.row.value.casefold()
        or needle in s.agent.casefold()
    ]


def routes(ui: WebUI, r: UrlDispatcher) -> None:
    async def me(request: web.Request, who: Who) -> web.StreamResponse:
        text = request.query.get("q", "")[:QUERY_MAX_CHARS]
        rows = matching(await said_by(ui, who), text.strip())
        last = max(0, (len(rows) - 1) // PAGE_ROWS)
        page = page_number(request, last)
        shown = rows[page * PAGE_ROWS : (page + 1) * PAGE_ROWS]
        path = f"{PREFIX}/me"
        return ui.page(
            "me.html",
            who,
            title="What the bot keeps that you said",
            rows=shown,
            total=len(rows),
            q=text,
            page=page,
            pages=last + 1,
            prev=query(path, q=text, page=page - 1) if page > 0 else None,
            next=query(path, q=text, page=page + 1) if page < last else None,
            back=query(path, q=text, page=page),
            reminders=await reminders_of(ui, who),
        )

    async def cancel_reminder(request: web.Request, who: Who) -> web.StreamResponse:
        """Cancel one of the person's own reminders (the CSRF check first, as every POST);
        anyone else's, or one that does not exist, is the same "no such reminder"."""
        form = await ui.form(request)
        name, rid = form.get("agent", ""), form.get("id", "")
        agent = ui.peer.agents.get(name)
        try:
            if agent is None:
                raise NotFound("no such reminder of yours (already cancelled or delivered?)")
            store = Reminders(ui.peer.ledger, agent.db, agent.key)
            gone = await store.cancel_mine(who.person, rid)
        except NotFound as exc:
            ui.flash(who, False, str(exc))
        else:
            ui.flash(who, True, f"Cancelled the reminder: {gone.what}")
        return await ui.act_done(f"{PREFIX}/me")

    async def forget(request: web.Request, who: Who) -> web.StreamResponse:
        form = await ui.form(request)
        key = form.get("key", "")
        back = form.get("back", f"{PREFIX}/me")
        if not key.strip():
            ui.flash(who, False, "Say which row to forget.")
        elif key.strip().lower() == "all":
            # ``forget-mine all`` means every row: a key named "all" is not one row there
            ui.flash(who, False, "A row whose key is “all” is forgotten with “Forget all”.")
        else:
            return await ui.act(who, ["memory", "forget-mine", key], back)
        return await ui.act_done(back)

    async def forget_all(request: web.Request, who: Who) -> web.StreamResponse:
        form = await ui.form(request)
        if form.get("confirm") != "yes":
            ui.flash(who, False, "Tick the box to confirm forgetting everything you said.")
            return await ui.act_done(f"{PREFIX}/me")
        return await ui.act(who, ["memory", "forget-mine", "all"], f"{PREFIX}/me")

    async def undo(request: web.Request, who: Who) -> web.StreamResponse:
        await ui.form(request)  # the CSRF check, as every POST
        return await ui.act(who, ["memory", "undo"], f"{PREFIX}/me")

    async def export(request: web.Request, who: Who) -> web.StreamResponse:
        rows = [s.as_json() for s in await said_by(ui, who)]
        body = json.dumps({"person": who.person, "rows": rows}, ensure_ascii=False, indent=1)
        return web.Response(
            text=body,
            content_type="application/json",
            headers={"Content-Disposition": 'attachment; filename="my-memory.json"'},
        )

    r.add_get("/me", ui.signed_in(me))
    r.add_post("/me/forget", ui.signed_in(forget))
    r.add_post("/me/forget-all", ui.signed_in(forget_all))
    r.add_post("/me/undo", ui.signed_in(undo))
    r.add_post("/me/cancel-reminder", ui.signed_in(cancel_reminder))
    r.add_get("/me/export.json", ui.signed_in(export))


__all__ = [
    "PAGE_ROWS",
    "Said",
    "Upcoming",
    "matching",
    "reminders_of",
    "repeat_text",
    "routes",
    "said_by",
]

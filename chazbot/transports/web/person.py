"""A person's page: what the bot keeps that they said (SPEC §5c), with search, forget one,
forget all and a JSON download; and the reminders they set, each cancellable (``reminders``).

It reads exactly what ``/memory mine`` reads in a DM (every agent the page's session may
use, the person's own view), and forgets through ``/memory forget-mine``: one rule for the
chat and the page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from chazbot.commands import Call, Meaning
from chazbot.memory.rows import MemoryRow, said_text, to_datetime
from chazbot.transports.web.pages import (
    PREFIX,
    WEB_SESSION,
    Pages,
    Who,
    page_number,
    query,
)
from chazbot.transports.web.reminders import cancel_own, reminders_of
from chazbot.transports.web.wording import ENGLISH, Words, dated, page_lang

if TYPE_CHECKING:
    from aiohttp.web_urldispatcher import UrlDispatcher

PAGE_ROWS = 50
QUERY_MAX_CHARS = 200
FORGET_MINE = ("memory", "forget-mine")


@dataclass(frozen=True)
class SaidRow:
    """One row the person said, with the agent that keeps it, shown as a person reads it
    (#36): what they said without the machine's "who (date): " prefix, where as a room's
    name, when in their zone."""

    agent: str
    row: MemoryRow
    zone: str = "UTC"
    room_name: str | None = None
    """The room's name as the Matrix transport knows it (None: unknown)."""
    words: Words = ENGLISH
    """The page's language (``wording.page_lang``)."""

    @property
    def when(self) -> str:
        return dated(to_datetime(self.row.ts), self.zone, self.words.lang)

    @property
    def said(self) -> str:
        return said_text(self.row.value)

    @property
    def room(self) -> str:
        origin = self.row.origin
        words = self.words
        if origin is None:
            return words.terminal
        if origin.audience is not None and len(origin.audience) == 1:
            return words.dm_with.format(agent=self.agent)
        if self.room_name:
            return self.room_name
        if origin.room == WEB_SESSION:
            return words.this_page
        if origin.audience is None:
            return words.group_room
        return words.group_room_of.format(n=len(origin.audience))

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


async def said_by(ui: Pages, who: Who, words: Words = ENGLISH) -> list[SaidRow]:
    """Every row ``who`` said, newest first, as ``/memory mine`` finds them in a DM."""
    peer = ui.peer
    audience = ui.own_audience(who)
    found: list[SaidRow] = []
    zone = peer.config.timezone
    for agent in peer.hosting.allowed_agents(WEB_SESSION):
        zone = await peer.reminders.of(agent.db, agent.key).zone_of(who.person, zone)
    for agent in peer.hosting.allowed_agents(WEB_SESSION):
        memory = agent.memory.within(peer.hearing(agent, who.person, audience))
        for row in await memory.said_by(who.person, True):
            name = ui.room_name(row.origin.room) if row.origin is not None else None
            found.append(SaidRow(agent.name, row, zone, name, words))
    found.sort(key=lambda s: (s.row.ts, s.row.order), reverse=True)
    return found


def matching(rows: list[SaidRow], text: str) -> list[SaidRow]:
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


def routes(ui: Pages, r: UrlDispatcher) -> None:
    async def me(request: web.Request, who: Who) -> web.StreamResponse:
        text = request.query.get("q", "")[:QUERY_MAX_CHARS]
        words = Words(page_lang(request.headers.get("Accept-Language")))
        rows = matching(await said_by(ui, who, words), text.strip())
        last = max(0, (len(rows) - 1) // PAGE_ROWS)
        page = page_number(request, last)
        shown = rows[page * PAGE_ROWS : (page + 1) * PAGE_ROWS]
        path = f"{PREFIX}/me"
        return ui.page(
            "me.html",
            who,
            title=words.title_me,
            words=words,
            rows=shown,
            total=len(rows),
            q=text,
            page=page,
            pages=last + 1,
            prev=query(path, q=text, page=page - 1) if page > 0 else None,
            next=query(path, q=text, page=page + 1) if page < last else None,
            back=query(path, q=text, page=page),
            reminders=await reminders_of(ui.peer, who.person, ui.room_name, words),
        )

    async def cancel_reminder(request: web.Request, who: Who) -> web.StreamResponse:
        """Cancel one of the person's own reminders (the CSRF check first, as every POST)."""
        form = await ui.form(request)
        ok, said = await cancel_own(ui.peer, who.person, form.get("agent", ""), form.get("id", ""))
        ui.flash(who, ok, said)
        return await ui.act_done(f"{PREFIX}/me")

    async def forget(request: web.Request, who: Who) -> web.StreamResponse:
        form = await ui.form(request)
        key = form.get("key", "")
        back = form.get("back", f"{PREFIX}/me")
        if not key.strip():
            ui.flash(who, False, Meaning("say_which_row"))
            return await ui.act_done(back)
        # by its key, always: a key of digits ("5") or "all" is never read as a list number
        # or as every row
        return await ui.act(who, Call(FORGET_MINE, {"key": "key", "named": key}), back)

    async def forget_all(request: web.Request, who: Who) -> web.StreamResponse:
        form = await ui.form(request)
        if form.get("confirm") != "yes":
            ui.flash(who, False, Meaning("tick_to_confirm"))
            return await ui.act_done(f"{PREFIX}/me")
        return await ui.act(who, Call(FORGET_MINE, {"key": "all"}), f"{PREFIX}/me")

    async def undo(request: web.Request, who: Who) -> web.StreamResponse:
        await ui.form(request)  # the CSRF check, as every POST
        return await ui.act(who, Call(("memory", "undo")), f"{PREFIX}/me")

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


__all__ = ["PAGE_ROWS", "SaidRow", "matching", "routes", "said_by"]

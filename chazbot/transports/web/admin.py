"""Admin pages: agents, banks (rows ranked as recall ranks them, keys holding access, grants,
revokes, sharing, import, export), sharing requests, peers, and charts. A JSONL file's import
is ``uploads.py``.

Pages read; every change is one command of the tree (``ACTIONS``), called with the form's
fields as its arguments by name (a ``Call``: nothing quoted and parsed again), run as the signed-in
admin with the operator's full view, as ``chazbot cmd`` runs it.
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from chazbot import metrics
from chazbot.commands import Call
from chazbot.commands.memory_browse_cmds import KeyHolder, key_holders
from chazbot.memory.rows import MAX_LIMIT, MemoryRow
from chazbot.memory.transfer import export_lines
from chazbot.sync.outcomes import ago
from chazbot.transports.web import charts
from chazbot.transports.web.pages import PREFIX, Pages, Who, page_number, query, shown_when

if TYPE_CHECKING:
    from aiohttp.web_urldispatcher import UrlDispatcher

    from chazbot.peer import Peer

PAGE_ROWS = 50
QUERY_MAX_CHARS = 200
REQUESTS_SHOWN = 100

ACTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    # action: (command path, required fields, optional fields); a field is the argument of
    # that name
    "new": (("memory", "new"), ("name",), ("description",)),
    "grant": (("memory", "grant"), ("bank", "agent", "permission"), ()),
    "revoke": (("memory", "revoke"), ("bank", "agent"), ()),
    "share": (("memory", "share"), ("bank",), ()),
    "unshare": (("memory", "unshare"), ("bank",), ()),
    "import": (("memory", "import"), ("ticket", "permission"), ("name",)),
    "approve": (("sharing", "approve"), ("id",), ()),
    "reject": (("sharing", "reject"), ("id",), ()),
}


@dataclass(frozen=True)
class Shown:
    """One row of a bank page, with its rank and scores."""

    rank: int
    row: MemoryRow
    score: float | None
    bm25: float | None

    @property
    def when(self) -> str:
        return shown_when(self.row)

    @property
    def origin(self) -> str:
        o = self.row.origin
        return "operator" if o is None else f"{o.speaker} in {o.room.removeprefix('matrix:')}"


async def holders(ui: Pages, db: str) -> list[KeyHolder]:
    """Who holds access to ``db``, worded as ``memory stats`` words it (``key_holders``)."""
    peer = ui.peer
    found, _ = await key_holders(peer.ledger, peer.hosting, peer.hosting, peer.sharing, db)
    return found


class AdminPages:
    """The admin pages' handlers over one peer's pages (each route is signed in as an admin)."""

    def __init__(self, ui: Pages) -> None:
        self.ui = ui
        self.peer = peer = ui.peer
        self.hosting, self.sharing, self.models = peer.hosting, peer.sharing, peer.models

    async def overview(self, request: web.Request, who: Who) -> web.StreamResponse:
        banks = await self.hosting.registry.all("bank")
        pending = (await self.sharing.pending_requests(shown=0)).total
        return self.ui.page(
            "admin.html",
            who,
            title="Admin",
            agents=len(self.hosting.agents),
            banks=len(banks),
            pending=pending,
            latency=_latency_chart(),
            people=_people(self.peer),
        )

    async def agents(self, request: web.Request, who: Who) -> web.StreamResponse:
        shown = []
        for agent in self.hosting.agents.values():
            view = await self.peer.memory.view(agent.db)
            held = await self.hosting.agent_memory(agent)
            settings, refs = held.recall, held.refs
            shown.append(
                {
                    "name": agent.name,
                    "db": agent.db,
                    "rows": len(view.visible),
                    "size": held.size,
                    "capture": await self.models.capture_mode(agent),
                    "audience": agent.config.memory_audience,
                    "default_banks": ", ".join(agent.config.default_memory_banks) or "none",
                    "banks": ", ".join(f"{n} ({r.permission})" for n, r in sorted(refs.items()))
                    or "none",
                    "recall": (
                        f"{'on' if settings.enabled else 'off'}, up to {settings.max_entries} "
                        "rows, from "
                        + (
                            "every attached bank"
                            if settings.banks is None
                            else ", ".join(settings.banks) or "own memory only"
                        )
                    ),
                }
            )
        servers = [  # MCP servers (#46): their state, as !chaz tools shows it
            {
                "name": link.name,
                "via": link.config.url or link.config.command,
                "state": f"{link.state}: {link.error}" if link.error else link.state,
                "tools": ", ".join(sorted(link.tools)) or "none",
                "owner": link.config.owner or "anyone allowed",
            }
            for link in self.peer.tools.servers.links.values()
        ]
        return self.ui.page("agents.html", who, title="Agents", agents=shown, servers=servers)

    async def banks(self, request: web.Request, who: Who) -> web.StreamResponse:
        listed = []
        shared = await self.sharing.shared()
        for bank in await self.hosting.registry.all("bank"):
            view = await self.peer.memory.view(bank.db)
            listed.append(
                {
                    "name": bank.name,
                    "db": bank.db,
                    "rows": len(view.visible),
                    "imported": bool(bank.data.get("imported")),
                    "shared": bank.db in shared,
                }
            )
        return self.ui.page(
            "banks.html", who, title="Banks", banks=listed, agents=sorted(self.hosting.agents)
        )

    async def bank(self, request: web.Request, who: Who) -> web.StreamResponse:
        hosted = await self.hosting.registry.get("bank", request.match_info["name"])
        if hosted is None:
            return self.ui.message(who, 404, "No such bank", "There is no bank of that name here.")
        text = request.query.get("q", "")[:QUERY_MAX_CHARS]
        view = await self.peer.memory.view(hosted.db)
        if text.strip():
            ranked = await self.peer.memory.recall(hosted.db, text, None, MAX_LIMIT, None)
            total = len(ranked)
        else:
            total = len(view.visible)
            ranked = []
        last = max(0, (total - 1) // PAGE_ROWS)
        page = page_number(request, last)
        if not text.strip():
            ranked = view.recent((page + 1) * PAGE_ROWS)
        window = ranked[page * PAGE_ROWS : (page + 1) * PAGE_ROWS]
        rows = [
            Shown(
                page * PAGE_ROWS + i + 1,
                r.row,
                r.score if text.strip() else None,
                r.bm25 if text.strip() else None,
            )
            for i, r in enumerate(window)
        ]
        path = f"{PREFIX}/admin/banks/{hosted.name}"
        stamps = [r.ts for r in view.visible.values()]
        return self.ui.page(
            "bank.html",
            who,
            title=f"Bank {hosted.name}",
            bank=hosted,
            rows=rows,
            total=total,
            q=text,
            page=page,
            pages=last + 1,
            prev=query(path, q=text, page=page - 1) if page > 0 else None,
            next=query(path, q=text, page=page + 1) if page < last else None,
            back=query(path, q=text, page=page),
            holders=await holders(self.ui, hosted.db),
            agents=sorted(a.name for a in self.hosting.agents.values()),
            shared=hosted.db in await self.sharing.shared(),
            chart=charts.rows_over_time(stamps, f"{hosted.name} rows"),
            ranked=bool(text.strip()),
            importing=self.ui.imports.of(hosted.name),
            owed=self.peer.memory.vectors_owed(hosted.db),
        )

    async def export(self, request: web.Request, who: Who) -> web.StreamResponse:
        hosted = await self.hosting.registry.get("bank", request.match_info["name"])
        if hosted is None:
            return self.ui.message(who, 404, "No such bank", "There is no bank of that name here.")
        lines = await export_lines(self.peer.memory, hosted.db)
        return web.Response(
            text="".join(line + "\n" for line in lines),
            content_type="application/x-ndjson",
            headers={
                "Content-Disposition": f'attachment; filename="{file_name(hosted.name)}.jsonl"'
            },
        )

    async def requests(self, request: web.Request, who: Who) -> web.StreamResponse:
        pending = await self.sharing.pending_requests(shown=REQUESTS_SHOWN)
        return self.ui.page(
            "requests.html",
            who,
            title="Sharing requests",
            requests=pending.newest,
            names=pending.labels,
            total=pending.total,
        )

    async def peers(self, request: web.Request, who: Who) -> web.StreamResponse:
        now = time.time()
        pairs = [
            {
                **dataclasses.asdict(p),
                "state": "sync off" if p.state == "off" else p.state,
                "last_pull": ago(p.last_pull, now),
                "last_push": ago(p.last_push, now),
            }
            for p in await self.sharing.sync_pairs()
        ]
        shared = [await self.sharing.label(db) for db in await self.sharing.shared()]
        return self.ui.page(
            "peers.html",
            who,
            title="Peers",
            pairs=pairs,
            shared=shared,
            counters=self.peer.sync.counters(),
            key=self.peer.key.public,
        )

    async def act(self, request: web.Request, who: Who) -> web.StreamResponse:
        form = await self.ui.form(request)
        back = form.get("back", f"{PREFIX}/admin")
        found = ACTIONS.get(form.get("action", ""))
        if found is None:
            self.ui.flash(who, False, "Unknown action.")
            return await self.ui.act_done(back)
        words, required, optional = found
        missing = [f for f in required if not form.get(f, "").strip()]
        if missing:
            self.ui.flash(who, False, f"Fill in: {', '.join(missing)}.")
            return await self.ui.act_done(back)
        given = {f: form.get(f, "").strip() for f in (*required, *optional)}
        call = Call(words, {f: v for f, v in given.items() if v})
        return await self.ui.act(who, call, back, as_admin=True)


def routes(ui: Pages, r: UrlDispatcher) -> None:
    pages = AdminPages(ui)
    admin = True
    r.add_get("/admin", ui.signed_in(pages.overview, admin))
    r.add_get("/admin/agents", ui.signed_in(pages.agents, admin))
    r.add_get("/admin/banks", ui.signed_in(pages.banks, admin))
    r.add_get("/admin/banks/{name}", ui.signed_in(pages.bank, admin))
    r.add_get("/admin/banks/{name}/export.jsonl", ui.signed_in(pages.export, admin))
    r.add_get("/admin/requests", ui.signed_in(pages.requests, admin))
    r.add_get("/admin/peers", ui.signed_in(pages.peers, admin))
    r.add_post("/admin/act", ui.signed_in(pages.act, admin))


def file_name(name: str) -> str:
    """``name`` made safe for a header's file name (a bank registered before names were
    checked whole may hold a line ending or a quote)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64] or "bank"


def _people(peer: Peer) -> list[tuple[str, str]]:
    """Who the bot answers: config.yaml's admins and allow-list, then those allowed from chat
    (``!chaz people allow``), each with where it comes from (read-only here)."""
    m = peer.config.matrix
    admins = m.admins if m is not None else []
    found = [(g, "admin, config.yaml") for g in admins]
    found += [(g, "config.yaml") for g in (m.allow_list if m else []) if g not in admins]
    found += [(e.glob, f"allowed from chat by {e.by}") for e in peer.people.entries()]
    return found


def _latency_chart() -> Any:
    """The recall latency histogram of this process (``chazbot_recall_seconds``)."""
    bounds: list[float] = []
    cumulative: list[float] = []
    for family in metrics.RECALL_SECONDS.collect():
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                le = sample.labels["le"]
                bounds.append(float("inf") if le == "+Inf" else float(le))
                cumulative.append(sample.value)
    counts = [int(c - (cumulative[i - 1] if i else 0)) for i, c in enumerate(cumulative)]
    return charts.histogram(bounds, counts, "Recall latency")


__all__ = ["ACTIONS", "AdminPages", "holders", "routes"]

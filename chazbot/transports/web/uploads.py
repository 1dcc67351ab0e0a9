"""Importing a JSONL file into a bank from its admin page: the upload's route; the import
itself (checked whole, then written in the background) is ``import_jobs``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from chazbot.errors import ChazError
from chazbot.transports.web.import_jobs import Imports
from chazbot.transports.web.pages import PREFIX, Pages, Who

if TYPE_CHECKING:
    from aiohttp.web_urldispatcher import UrlDispatcher

UPLOAD_MAX_BYTES = 16 * 1024 * 1024
"""The largest file the page takes (``chazbot import-file`` has no bound)."""


def routes(ui: Pages, imports: Imports, r: UrlDispatcher) -> None:
    peer = ui.peer

    async def upload(request: web.Request, who: Who) -> web.StreamResponse:
        name = request.match_info["name"]
        hosted = await peer.registry.get("bank", name)
        if hosted is None:
            return ui.message(who, 404, "No such bank", "There is no bank of that name here.")
        back = f"{PREFIX}/admin/banks/{hosted.name}"
        data = ui.uploaded(request, "file")
        if not data:
            ui.flash(who, False, "Choose a JSONL file to import.")
            return await ui.act_done(back)
        try:
            ok, text = await imports.start(who.person, hosted, data)
        except ChazError as exc:  # no key here writes the bank, say
            ok, text = False, str(exc)
        ui.flash(who, ok, text)
        return await ui.act_done(back)

    r.add_post(
        "/admin/banks/{name}/import",
        ui.signed_in(upload, admin=True, max_bytes=UPLOAD_MAX_BYTES),
    )

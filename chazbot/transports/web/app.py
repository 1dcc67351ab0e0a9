"""The memory page's web app (SPEC §10): the shared ``Pages`` with every route module's pages.

Mounted under ``/ui/`` on the http listener (``transports/http.py``) when ``web.enabled``.
The route modules (``person``, ``admin``, ``uploads``) import ``pages``, never this module,
so the pages and the app that puts them together import each other in no circle.
"""

from __future__ import annotations

from aiohttp import web

from chazbot.transports.web import admin, person, uploads
from chazbot.transports.web.pages import PREFIX, Pages


class WebUI(Pages):
    """The pages of one peer; ``mount`` adds them to the http listener's app."""

    def mount(self, parent: web.Application) -> None:
        parent.add_subapp(PREFIX, self.app())

    def app(self) -> web.Application:
        app = self.base_app()
        person.routes(self, app.router)
        admin.routes(self, app.router)
        uploads.routes(self, self.imports, app.router)
        return app


__all__ = ["WebUI"]

"""The memory page (SPEC §10): server-rendered pages under ``/ui/`` on the http listener.

``app`` (sign-in, sessions, CSRF, headers, the command path), ``person`` (a person's own
rows), ``admin`` (agents, banks, requests, peers), ``charts`` (SVG); templates and the
stylesheet ship beside them.
"""

from __future__ import annotations

from chazbot.transports.web.app import WebUI

__all__ = ["WebUI"]

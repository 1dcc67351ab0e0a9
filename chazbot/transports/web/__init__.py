"""The memory page (SPEC §10): server-rendered pages under ``/ui/`` on the http listener.

``pages`` (sign-in, sessions, CSRF, headers, the command path: what every page shares),
``person`` (a person's own rows), ``admin`` (agents, banks, requests, peers), ``uploads`` and
``import_jobs`` (a bank's JSONL import), ``charts`` (SVG), and ``app`` (``WebUI``: all of them
put together); templates and the stylesheet ship beside them.
"""

from __future__ import annotations

from chazbot.transports.web.app import WebUI

__all__ = ["WebUI"]

"""The host's time zone: the default of ``timezone``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def is_zone(name: str) -> bool:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True


def _zone_in_path(path: str) -> str | None:
    """``Europe/Berlin`` of ``/usr/share/zoneinfo/Europe/Berlin`` (or of a ``posix/`` copy)."""
    _, found, name = path.partition("zoneinfo/")
    name = name.removeprefix("posix/").removeprefix("right/")
    return name if found and is_zone(name) else None


def host_zone(
    environ: Mapping[str, str] | None = None,
    localtime: Path = Path("/etc/localtime"),
    timezone_file: Path = Path("/etc/timezone"),
) -> str:
    """The host's time zone as an IANA name, the default of ``timezone``: ``TZ`` when it names
    a zone (``Europe/Berlin``, ``:Europe/Berlin`` or a path into zoneinfo), else the zone
    ``/etc/localtime`` links to, else ``/etc/timezone`` (Debian's), else UTC."""
    env = os.environ if environ is None else environ
    given = env.get("TZ", "").strip().removeprefix(":")
    if given:
        if is_zone(given):
            return given
        if found := _zone_in_path(given):
            return found
    try:
        if found := _zone_in_path(os.path.realpath(localtime)):
            return found
    except OSError:
        pass
    try:
        written = timezone_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        written = ""
    return written if written and is_zone(written) else "UTC"

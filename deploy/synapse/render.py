"""Entrypoint of the ``synapse`` service in docker-compose.yml (runs in the Synapse image).

Renders ``homeserver.yaml`` (the template next to this file) into
``$SYNAPSE_DATA_DIR/homeserver.yaml`` (default ``/data``, written owner-only), replacing
``${VAR}`` and ``${VAR:-default}`` with values from the environment (comment lines are left
as they are); a ``${VAR}`` that is not set, or set empty, is an error naming it. Every
placeholder stands inside double quotes in the template, so values are escaped as JSON
strings are (a valid YAML double-quoted scalar).

Then, as root, it hands the data directory to the user Synapse runs as (``$UID:$GID``,
default 991:991, as the image's ``/start.py`` does) and starts Synapse through ``/start.py``.
``--render-only`` stops after rendering (used by the tests).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "homeserver.yaml"
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def render(template: str, env: Mapping[str, str]) -> str:
    """The template with every ``${VAR}`` replaced; SystemExit naming what is missing."""
    missing: list[str] = []

    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = env.get(name) or default
        if value is None:
            missing.append(name)
            return ""
        return json.dumps(value)[1:-1]

    lines = template.splitlines(keepends=True)
    text = "".join(line if line.lstrip().startswith("#") else _REF.sub(sub, line) for line in lines)
    if missing:
        names = ", ".join(sorted(set(missing)))
        raise SystemExit(f"render.py: set {names} (in .env for docker compose)")
    return text


def main(argv: list[str]) -> int:
    env = dict(os.environ)
    data = Path(env.setdefault("SYNAPSE_DATA_DIR", "/data"))
    env.setdefault("SYNAPSE_TEMPLATE_DIR", str(HERE))
    target = data / "homeserver.yaml"
    data.mkdir(parents=True, exist_ok=True)
    text = render(TEMPLATE.read_text(encoding="utf-8"), env)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(target, 0o600)
    print(f"render.py: wrote {target}", flush=True)
    if "--render-only" in argv:
        return 0
    if os.getuid() == 0:
        uid, gid = int(env.get("UID", "991")), int(env.get("GID", "991"))
        for root, dirs, files in os.walk(data):
            for name in [*dirs, *files]:
                os.lchown(os.path.join(root, name), uid, gid)
        os.chown(data, uid, gid)
    os.execv("/start.py", ["/start.py", "run", "--config-path", str(target)])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

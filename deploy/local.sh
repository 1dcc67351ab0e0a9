#!/usr/bin/env bash
# Set up a .venv with chazbot and its embedded offline model, then run it on embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[local]"
exec .venv/bin/chazbot run "$@"

#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine (a .venv with chazbot[dev], which
# brings Synapse, the e2e crypto and the embedded models), then lint, type-check and test.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]"
echo "== ruff"; .venv/bin/ruff check . && .venv/bin/ruff format --check .
echo "== mypy"; .venv/bin/mypy
echo "== Dockerfile and compose"; bash deploy/check.sh
echo "== pytest"; .venv/bin/python -m pytest -q -p no:cacheprovider "$@"

#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine (a .venv with chazbot[dev], which
# brings Synapse, the e2e crypto and the embedded models, all wheels: nothing is compiled),
# then lint, type-check and test. Arguments go to pytest (e.g. -m 'not slow').
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install.sh dev
# One command per line: under set -e, a failing command inside an and-list does not stop it.
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"; .venv/bin/mypy
echo "== Dockerfile and compose"; bash deploy/check.sh
echo "== pytest"; .venv/bin/python -m pytest -q -p no:cacheprovider "$@"

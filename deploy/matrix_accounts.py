"""Matrix accounts by shared secret: what runs inside the ``matrixdotorg/synapse`` image.

Standard library only, and no sibling imports, so compose can mount this one file into the
Synapse image and run it. ``deploy/local_homeserver.py`` uses the same client calls.

``python deploy/matrix_accounts.py --url URL --user NAME`` (or ``homeserver.py register``)
    Registers one account with the shared secret from ``$SYNAPSE_REGISTRATION_SHARED_SECRET``
    and the password from ``$CHAZBOT_MATRIX_PASSWORD`` (both names can be changed). If the
    account exists already, it checks that the password logs in. Used by docker-compose.yml.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, TextIO

SERVER_NAME = "localhost"


class SetupError(Exception):
    """Something the user should read, printed as one line (no traceback)."""


def say(text: str = "", out: TextIO | None = None) -> None:
    print(text, file=out or sys.stdout, flush=True)


# ---- the Matrix client-server and admin APIs (urllib) ---------------------------------


class MatrixHTTPError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.errcode = str(body.get("errcode", ""))
        self.error = str(body.get("error", ""))
        super().__init__(f"HTTP {status} {self.errcode}: {self.error}")


def call(
    base: str,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    token: str | None = None,
    timeout: float = 30.0,
) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base.rstrip("/") + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read() or b"{}")
        except ValueError:
            detail = {}
        raise MatrixHTTPError(exc.code, detail if isinstance(detail, dict) else {}) from None
    return answer if isinstance(answer, dict) else {}


def reachable(base: str) -> bool:
    try:
        call(base, "GET", "/_matrix/client/versions", timeout=2)
    except (urllib.error.URLError, OSError, ValueError, MatrixHTTPError):
        return False
    return True


def wait_reachable(base: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not reachable(base):
        if time.monotonic() > deadline:
            raise SetupError(f"the homeserver at {base} did not answer within {timeout:.0f} s")
        time.sleep(0.2)


def register(
    base: str, secret: str, localpart: str, password: str, admin: bool = False
) -> dict[str, Any]:
    """Shared-secret registration (``/_synapse/admin/v1/register``); returns the answer."""
    path = "/_synapse/admin/v1/register"
    nonce = str(call(base, "GET", path)["nonce"])
    mac = hmac.new(secret.encode(), digestmod=hashlib.sha1)
    kind = b"admin" if admin else b"notadmin"
    mac.update(b"\x00".join([nonce.encode(), localpart.encode(), password.encode(), kind]))
    body = {
        "nonce": nonce,
        "username": localpart,
        "password": password,
        "admin": admin,
        "mac": mac.hexdigest(),
    }
    return call(base, "POST", path, body)


def login(base: str, user_id: str, password: str, device_name: str) -> dict[str, Any]:
    body = {
        "type": "m.login.password",
        "identifier": {"type": "m.id.user", "user": user_id},
        "password": password,
        "initial_device_display_name": device_name,
    }
    return call(base, "POST", "/_matrix/client/v3/login", body)


def logout(base: str, token: str) -> None:
    with contextlib.suppress(MatrixHTTPError, urllib.error.URLError, OSError):
        call(base, "POST", "/_matrix/client/v3/logout", {}, token=token)


def q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


# ---- registering one account ----------------------------------------------------------


def add_register_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True, help="the homeserver's client API base URL")
    parser.add_argument("--user", required=True, help="the localpart, e.g. chazbot")
    parser.add_argument("--server-name", help="for the user id (default: the URL's host name)")
    parser.add_argument("--admin", action="store_true")
    parser.add_argument("--secret-env", default="SYNAPSE_REGISTRATION_SHARED_SECRET")
    parser.add_argument("--password-env", default="CHAZBOT_MATRIX_PASSWORD")
    parser.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the server")


def cmd_register(args: argparse.Namespace) -> int:
    secret = os.environ.get(args.secret_env, "")
    password = os.environ.get(args.password_env, "")
    if not secret or not password:
        raise SetupError(f"set {args.secret_env} and {args.password_env}")
    wait_reachable(args.url, args.wait)
    try:
        answer = register(args.url, secret, args.user, password, admin=args.admin)
    except MatrixHTTPError as exc:
        if exc.errcode != "M_USER_IN_USE":
            raise SetupError(f"registering {args.user} failed: {exc}") from None
        server = args.server_name or urllib.parse.urlsplit(args.url).hostname or SERVER_NAME
        user_id = f"@{args.user}:{server}"
        try:
            token = str(
                login(args.url, user_id, password, "chazbot register check")["access_token"]
            )
        except MatrixHTTPError as login_exc:
            raise SetupError(
                f"{user_id} exists but {args.password_env} does not log in: {login_exc}"
            ) from None
        logout(args.url, token)
        say(f"{user_id} exists already and its password works")
        return 0
    logout(args.url, str(answer.get("access_token", "")))
    say(f"registered {answer['user_id']}")
    return 0


def run_cli(command: Any, args: argparse.Namespace) -> int:
    """Run ``command(args)``; a SetupError or a homeserver error is one line and exit 1."""
    try:
        return int(command(args))
    except SetupError as exc:
        say(f"error: {exc}", sys.stderr)
        return 1
    except MatrixHTTPError as exc:
        say(f"error: the homeserver said {exc}", sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="matrix_accounts.py", description="register one account with the shared secret"
    )
    add_register_arguments(parser)
    return run_cli(cmd_register, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

"""A throwaway local Synapse and chazbot beside it: what ``deploy/local.sh`` runs.

``python deploy/homeserver.py local [--state-dir DIR] [--config FILE]``
    With a config whose ``matrix:`` names a ``homeserver_url``, it just runs ``chazbot run``
    with it. Otherwise (no ``matrix:``, or one with only ``allow_list``, ``admins`` and the
    like, which are added to the local run's) it
    starts Synapse on loopback with a handwritten config under ``<state_dir>/homeserver/``,
    registers a bot account and an account for you by shared secret (generated passwords,
    kept owner-only in ``accounts.json``), opens a DM between you and the bot on the first run,
    writes a chazbot config (``<state_dir>/local-config.yaml``: your config.yaml, if any, plus
    ``matrix:`` pointing at the homeserver), starts ``chazbot run``, waits until it is healthy
    and prints how to log in. Ctrl-C (or SIGTERM) stops chazbot, then Synapse. A second run
    reuses the same state, port and accounts.

Standard library only (PyYAML is used when it is there). The Matrix calls are
``matrix_accounts``' (beside this file).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import getpass
import importlib.util
import json
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # matrix_accounts sits beside us
from matrix_accounts import (
    SERVER_NAME,
    MatrixHTTPError,
    SetupError,
    call,
    login,
    logout,
    q,
    reachable,
    register,
    say,
)

BOT_LOCALPART = "chazbot"
DEFAULT_HS_PORT = 8008
DEFAULT_SYNC_PORT = 8765
DEFAULT_HTTP_PORT = 8766
START_TIMEOUT_S = 90.0
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
RELAXED = {"per_second": 100, "burst_count": 1000}
"""Rate limits for a homeserver on loopback with one person and one bot on it."""


class Stop(Exception):
    """SIGINT or SIGTERM arrived."""


# ---- small helpers --------------------------------------------------------------------


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Nobody listens on it (connections of a previous run in TIME_WAIT do not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pick_port(saved: int | None, preferred: int) -> int:
    """The saved port if it is still free, else the preferred one, else any free one."""
    for port in (saved, preferred):
        if port and port_free(port):
            return port
    return free_port()


def write_private(path: Path, text: str) -> None:
    """Write a file readable by its owner only (created 0600, then renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def die_with_parent() -> None:
    """In the child, between fork and exec: get SIGTERM when the supervisor dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


# ---- the homeserver -------------------------------------------------------------------


def synapse_config(workdir: Path, port: int, secrets_: dict[str, str]) -> dict[str, Any]:
    """A handwritten Synapse config: loopback only, no federation, SQLite, no phoning home."""
    limits: dict[str, Any] = {
        "rc_message": RELAXED,
        "rc_login": {"address": RELAXED, "account": RELAXED, "failed_attempts": RELAXED},
        "rc_joins": {"local": RELAXED, "remote": RELAXED},
        "rc_invites": {"per_room": RELAXED, "per_user": RELAXED, "per_issuer": RELAXED},
        "rc_room_creation": RELAXED,
    }
    return {
        "server_name": SERVER_NAME,
        "public_baseurl": f"http://127.0.0.1:{port}/",
        "pid_file": str(workdir / "homeserver.pid"),
        "listeners": [
            {
                "port": port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "database": {"name": "sqlite3", "args": {"database": str(workdir / "homeserver.db")}},
        "media_store_path": str(workdir / "media_store"),
        "signing_key_path": str(workdir / f"{SERVER_NAME}.signing.key"),
        "log_config": str(workdir / "log.yaml"),
        "registration_shared_secret": secrets_["registration_shared_secret"],
        "macaroon_secret_key": secrets_["macaroon_secret_key"],
        "form_secret": secrets_["form_secret"],
        "enable_registration": False,
        "report_stats": False,
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "federation_domain_whitelist": [],
        "presence": {"enabled": False},
        "url_preview_enabled": False,
        "enable_metrics": False,
        "background_updates": {"sleep_enabled": False},
        "caches": {"sync_response_cache_duration": 0},
        **limits,
    }


def log_config(workdir: Path) -> dict[str, Any]:
    return {
        "version": 1,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
        "handlers": {
            "file": {
                "class": "logging.FileHandler",
                "formatter": "plain",
                "filename": str(workdir / "homeserver.log"),
            }
        },
        "root": {"level": "WARNING", "handlers": ["file"]},
        "disable_existing_loggers": False,
    }


class Homeserver:
    """One Synapse child process with its state in ``workdir``."""

    def __init__(self, workdir: Path, port: int, secrets_: dict[str, str]) -> None:
        self.workdir = workdir
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.config_path = workdir / "hs.yaml"
        self.proc: subprocess.Popen[bytes] | None = None
        write_private(
            self.config_path, json.dumps(synapse_config(workdir, port, secrets_), indent=1)
        )
        write_private(workdir / "log.yaml", json.dumps(log_config(workdir), indent=1))

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        if importlib.util.find_spec("synapse") is None:
            raise SetupError(
                "Synapse is not installed in this venv: pip install 'chazbot[homeserver]'"
            )
        out = open(self.workdir / "stdout.log", "wb")  # noqa: SIM115 (the child owns it)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "synapse.app.homeserver", "-c", str(self.config_path)],
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the supervisor only; it stops us in order
            preexec_fn=die_with_parent,
        )
        out.close()
        deadline = time.monotonic() + timeout
        while not reachable(self.url):
            if self.proc.poll() is not None:
                raise SetupError(f"Synapse exited with {self.proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise SetupError(f"Synapse did not start in {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.1)

    def log_tail(self, lines: int = 30) -> str:
        text = ""
        for name in ("stdout.log", "homeserver.log"):
            path = self.workdir / name
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                text += f"--- {path}\n" + "\n".join(tail) + "\n"
        return text


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM, wait, SIGKILL if it takes too long (or if the user presses Ctrl-C again)."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except (subprocess.TimeoutExpired, Stop, KeyboardInterrupt):
        proc.kill()
        proc.wait(10)


# ---- the local run ---------------------------------------------------------------------


def load_yaml(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    try:
        import yaml
    except ImportError:
        data = json.loads(text)
    else:
        data = yaml.safe_load(text)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SetupError(f"{path}: the top level must be a mapping of keys")
    return data


def dump_yaml(data: dict[str, Any]) -> str:
    try:
        import yaml
    except ImportError:
        return json.dumps(data, indent=2) + "\n"
    return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def default_localpart() -> str:
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = ""
    name = re.sub(r"[^a-z0-9._=-]", "", name.lower())
    return name if name and name != BOT_LOCALPART else "me"


ACCOUNT_KEYS = ("homeserver_url", "user_id", "password", "access_token", "device_name")
"""What the local run sets in ``matrix:`` itself (the bot's account on its homeserver)."""


def runs_own_matrix(user_data: dict[str, Any]) -> bool:
    """Whether config.yaml names a homeserver of its own (then no local one is started): a
    ``matrix:`` with only ``allow_list``, ``admins`` or other settings keeps the local one."""
    matrix = user_data.get("matrix")
    return isinstance(matrix, dict) and bool(matrix.get("homeserver_url"))


def local_matrix(
    given: Any, url: str, bot: dict[str, str], user: dict[str, str], e2e: bool
) -> dict[str, Any]:
    """``matrix:`` for the local homeserver: the bot's account, you as an admin, and the
    rest of config.yaml's ``matrix:`` (its ``allow_list`` and ``admins`` added to yours)."""
    mine = given if isinstance(given, dict) else {}
    matrix: dict[str, Any] = {k: v for k, v in mine.items() if k not in ACCOUNT_KEYS}
    for key in ("allow_list", "admins"):
        extra = mine.get(key) or []
        if not isinstance(extra, list):
            raise SetupError(f"config.yaml: matrix.{key} must be a list of Matrix IDs")
        matrix[key] = [user["user_id"], *(str(x) for x in extra if x != user["user_id"])]
    matrix.setdefault("encryption", bool(e2e))
    return {
        "homeserver_url": url,
        "user_id": bot["user_id"],
        "password": bot["password"],
        "device_name": "chazbot (local)",
        **matrix,
    }


def listen_port(listen: Any) -> int | None:
    if not isinstance(listen, str) or ":" not in listen:
        return None
    tail = listen.rpartition(":")[2]
    return int(tail) if tail.isdigit() else None


class LocalRun:
    """The whole ``deploy/local.sh`` run: homeserver, accounts, config, chazbot, Ctrl-C."""

    def __init__(self, state_dir: Path, user_config: Path | None, user_data: dict[str, Any]):
        self.state_dir = state_dir.resolve()
        self.user_config = user_config
        self.user_data = user_data
        self.hs_dir = self.state_dir / "homeserver"
        self.accounts_path = self.hs_dir / "accounts.json"
        self.config_path = self.state_dir / "local-config.yaml"
        self.accounts: dict[str, Any] = {}
        self.homeserver: Homeserver | None = None
        self.chazbot: subprocess.Popen[bytes] | None = None

    # -- state ----------------------------------------------------------------------------

    def load_accounts(self) -> None:
        if self.accounts_path.exists():
            self.accounts = json.loads(self.accounts_path.read_text(encoding="utf-8"))
        elif (self.hs_dir / "homeserver.db").exists():
            raise SetupError(
                f"{self.hs_dir} has a homeserver database but no accounts.json;"
                f" delete {self.hs_dir} to start the local homeserver over"
            )
        for name in ("registration_shared_secret", "macaroon_secret_key", "form_secret"):
            self.accounts.setdefault(name, secrets.token_urlsafe(32))
        self.save_accounts()

    def save_accounts(self) -> None:
        write_private(self.accounts_path, json.dumps(self.accounts, indent=1) + "\n")

    # -- steps ----------------------------------------------------------------------------

    def start_homeserver(self) -> Homeserver:
        port = pick_port(self.accounts.get("port"), DEFAULT_HS_PORT)
        if self.accounts.get("port") not in (None, port):
            say(f"note: port {self.accounts['port']} is taken; the homeserver moves to {port}")
        self.accounts["port"] = port
        self.save_accounts()
        keys = ("registration_shared_secret", "macaroon_secret_key", "form_secret")
        hs = Homeserver(self.hs_dir, port, {k: str(self.accounts[k]) for k in keys})
        self.homeserver = hs
        hs.start()
        return hs

    def ensure_account(self, role: str, localpart: str) -> tuple[dict[str, str], str | None]:
        """The saved account for ``role``, or a new one; a fresh access token if just made."""
        saved = self.accounts.get(role)
        if isinstance(saved, dict):
            return saved, None
        assert self.homeserver is not None
        password = secrets.token_urlsafe(18)
        secret = str(self.accounts["registration_shared_secret"])
        try:
            answer = register(self.homeserver.url, secret, localpart, password)
        except MatrixHTTPError as exc:
            if exc.errcode == "M_USER_IN_USE":
                raise SetupError(
                    f"@{localpart}:{SERVER_NAME} exists but its password is not in"
                    f" {self.accounts_path}; delete {self.hs_dir} to start over"
                ) from None
            raise
        account = {"user_id": str(answer["user_id"]), "password": password}
        self.accounts[role] = account
        self.save_accounts()
        token = answer.get("access_token")
        return account, str(token) if token else None

    def open_dm(self, user: dict[str, str], bot: dict[str, str], token: str) -> str:
        """As the user: a direct chat with the bot invited (it joins when it starts).

        Encrypted when the e2e extra is installed, as Element and most clients make DMs.
        """
        assert self.homeserver is not None
        base = self.homeserver.url
        create: dict[str, Any] = {
            "preset": "trusted_private_chat",
            "is_direct": True,
            "invite": [bot["user_id"]],
            "name": "chazbot",
            "topic": "A direct chat with chazbot",
        }
        if importlib.util.find_spec("vodozemac") is not None:  # the e2e extra
            create["initial_state"] = [
                {
                    "type": "m.room.encryption",
                    "state_key": "",
                    "content": {"algorithm": "m.megolm.v1.aes-sha2"},
                }
            ]
        room = call(base, "POST", "/_matrix/client/v3/createRoom", create, token=token)
        room_id = str(room["room_id"])
        call(
            base,
            "PUT",
            f"/_matrix/client/v3/user/{q(user['user_id'])}/account_data/m.direct",
            {bot["user_id"]: [room_id]},
            token=token,
        )
        self.accounts["dm_room"] = room_id
        self.save_accounts()
        return room_id

    def write_config(self, hs: Homeserver, bot: dict[str, str], user: dict[str, str]) -> int:
        """Write the chazbot config; returns the port of its /healthz."""
        data = dict(self.user_data)
        data["state_dir"] = str(self.state_dir)
        ports = self.accounts.setdefault("ports", {})
        for key, preferred in (
            ("sync_listen", DEFAULT_SYNC_PORT),
            ("http_listen", DEFAULT_HTTP_PORT),
        ):
            if key == "sync_listen" and key in self.user_data:
                continue  # the user's choice, even empty (no sync server)
            if key == "http_listen" and listen_port(self.user_data.get(key)):
                continue  # we need /healthz to know when chazbot is ready
            ports[key] = pick_port(ports.get(key), preferred)
            data[key] = f"127.0.0.1:{ports[key]}"
        self.save_accounts()
        try:
            from nio.crypto import ENCRYPTION_ENABLED as e2e
        except ImportError:
            e2e = False
        data["matrix"] = local_matrix(self.user_data.get("matrix"), hs.url, bot, user, e2e)
        if "web" not in self.user_data:  # the memory page, on the http listener (#19)
            data["web"] = {"enabled": True}
        source = f" and {self.user_config}" if self.user_config else ""
        header = (
            f"# Written by deploy/local.sh on every run (from its local homeserver{source}).\n"
            "# Holds the bot's password: owner-only. Edit config.yaml instead of this file.\n"
        )
        write_private(self.config_path, header + dump_yaml(data))
        port = listen_port(data["http_listen"])
        assert port is not None
        return port

    def start_chazbot(self) -> subprocess.Popen[bytes]:
        self.chazbot = subprocess.Popen(
            [sys.executable, "-m", "chazbot.cli", "--config", str(self.config_path), "run"],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        return self.chazbot

    def wait_healthy(self, port: int, timeout: float = READY_TIMEOUT_S) -> None:
        """Until chazbot's /healthz says 200 (Matrix synced, DB writable, model loaded)."""
        assert self.chazbot is not None
        url = f"http://127.0.0.1:{port}/healthz"
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while True:
            if self.chazbot.poll() is not None:
                raise SetupError(f"chazbot exited with {self.chazbot.returncode} (see above)")
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    if response.status == 200:
                        return
            except urllib.error.HTTPError as exc:
                last = exc.read().decode(errors="replace")[:300]
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                raise SetupError(f"chazbot was not healthy within {timeout:.0f} s: {last}")
            time.sleep(0.25)

    def wait_joined(self, room_id: str, bot_id: str, token: str, timeout: float = 60.0) -> None:
        assert self.homeserver is not None
        path = f"/_matrix/client/v3/rooms/{q(room_id)}/joined_members"
        deadline = time.monotonic() + timeout
        while bot_id not in call(self.homeserver.url, "GET", path, token=token).get("joined", {}):
            if self.chazbot is not None and self.chazbot.poll() is not None:
                raise SetupError(f"chazbot exited with {self.chazbot.returncode} (see above)")
            if time.monotonic() > deadline:
                raise SetupError(f"the bot did not join {room_id} within {timeout:.0f} s")
            time.sleep(0.2)

    def web_link(self) -> str | None:
        """A one-time sign-in link to the memory page (valid 10 minutes), or None when the
        page is off or the link cannot be had."""
        web = self.user_data.get("web")
        if isinstance(web, dict) and not web.get("enabled", False):
            return None
        command = [sys.executable, "-m", "chazbot.cli", "--config", str(self.config_path)]
        try:
            out = subprocess.run(
                [*command, "web-link"], capture_output=True, text=True, timeout=60, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        found = [w for w in out.stdout.split() if w.startswith("http") and "/ui/" in w]
        return found[0] if found else None

    def banner(self, hs: Homeserver, user: dict[str, str], bot: dict[str, str]) -> str:
        cwd = Path.cwd()
        venv_bin = Path(sys.prefix) / "bin"
        with contextlib.suppress(ValueError):
            venv_bin = venv_bin.relative_to(cwd)
        config = self.config_path
        with contextlib.suppress(ValueError):
            config = config.relative_to(cwd)
        accounts = self.accounts_path
        with contextlib.suppress(ValueError):
            accounts = accounts.relative_to(cwd)
        chat = f"{venv_bin / 'chazbot'} --config {shlex.quote(str(config))} chat"
        room = self.accounts.get("dm_room")
        dm = f'  dm room:     {room}  (named "chazbot", already joined by both)\n' if room else ""
        link = self.web_link()
        page = (
            f"  memory page: {link}\n"
            "               (one-time sign-in, valid 10 minutes; for a new one say !chaz web\n"
            f"               in the DM, or run {venv_bin / 'chazbot'} --config "
            f"{shlex.quote(str(config))} web-link)\n"
            if link
            else ""
        )
        return (
            "\n"
            "chazbot is running, with a local homeserver on this machine.\n"
            f"  homeserver:  {hs.url}   (enter it as the homeserver in any Matrix client)\n"
            f"  user:        {user['user_id']}\n"
            f"  password:    {user['password']}\n"
            f"  bot:         {bot['user_id']}\n"
            f"{dm}"
            f"  terminal:    {chat}\n"
            f"{page}"
            f"Passwords are kept in {accounts} (owner-only). Invite the bot to more rooms\n"
            "as you like; it joins when you invite it. Ctrl-C stops chazbot and the homeserver;\n"
            "run bash deploy/local.sh again to carry on with the same accounts and memory.\n"
        )

    def run(self) -> int:
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.hs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with lock(self.hs_dir / "lock"):
            try:
                return self._run()
            finally:
                self.stop()

    def _run(self) -> int:
        self.load_accounts()
        say(f"starting the local homeserver (state in {self.hs_dir}) ...")
        hs = self.start_homeserver()
        bot, bot_token = self.ensure_account("bot", BOT_LOCALPART)
        if bot_token is not None:
            logout(hs.url, bot_token)  # chazbot logs in with a device of its own
        user, token = self.ensure_account("user", default_localpart())
        try:
            new_dm = "dm_room" not in self.accounts
            if new_dm:
                if token is None:
                    token = str(
                        login(hs.url, user["user_id"], user["password"], "setup")["access_token"]
                    )
                self.open_dm(user, bot, token)
            http_port = self.write_config(hs, bot, user)
            say("starting chazbot ...")
            proc = self.start_chazbot()
            self.wait_healthy(http_port)
            if new_dm and token is not None:
                self.wait_joined(str(self.accounts["dm_room"]), bot["user_id"], token)
        finally:
            if token is not None:
                logout(hs.url, token)  # the setup device is not needed any more
        say(self.banner(hs, user, bot))
        while True:
            if proc.poll() is not None:
                say(f"chazbot exited with {proc.returncode}; stopping the homeserver", sys.stderr)
                return proc.returncode or 1
            if hs.proc is not None and hs.proc.poll() is not None:
                say(
                    f"the homeserver exited with {hs.proc.returncode}:\n{hs.log_tail()}", sys.stderr
                )
                return 1
            time.sleep(0.2)

    def stop(self) -> None:
        """chazbot first (it says goodbye to the homeserver), then Synapse."""
        for handler in (signal.SIGINT, signal.SIGTERM):
            signal.signal(handler, _raise_stop)  # a second Ctrl-C: kill instead of waiting
        stop_process(self.chazbot)
        if self.homeserver is not None:
            stop_process(self.homeserver.proc)


@contextlib.contextmanager
def lock(path: Path) -> Iterator[None]:
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SetupError(
                f"another deploy/local.sh is already running on {path.parent}"
            ) from None
        yield


PERSON = re.compile(r"[a-z0-9._=-]{1,64}")


def add_person(run: LocalRun, localpart: str, allow: bool = True) -> dict[str, str]:
    """An account on the running local homeserver for another person (kept in
    ``accounts.json`` like yours; asked again, the same login), allowed to talk to the bot
    through the running chazbot (``/people allow``). Returns the account."""
    name = localpart.lower().lstrip("@").split(":", 1)[0]
    if not PERSON.fullmatch(name) or name == BOT_LOCALPART:
        raise SetupError(
            f"{localpart!r} is not a name for an account: use letters, digits and . _ = -"
        )
    if not run.accounts_path.exists():
        raise SetupError(
            f"no local homeserver in {run.hs_dir}: run bash deploy/local.sh first, then add"
            " people from another terminal while it runs"
        )
    run.load_accounts()
    url = f"http://127.0.0.1:{run.accounts.get('port')}"
    if not reachable(url):
        raise SetupError(
            f"the local homeserver is not running ({url}): start bash deploy/local.sh first,"
            " then add people from another terminal while it runs"
        )
    people: dict[str, Any] = run.accounts.setdefault("people", {})
    you = run.accounts.get("user")
    if isinstance(you, dict) and you.get("user_id") == f"@{name}:{SERVER_NAME}":
        raise SetupError(f"@{name}:{SERVER_NAME} is your own account (see the banner)")
    account = people.get(name)
    if not isinstance(account, dict):
        password = secrets.token_urlsafe(18)
        try:
            answer = register(url, str(run.accounts["registration_shared_secret"]), name, password)
        except MatrixHTTPError as exc:
            if exc.errcode == "M_USER_IN_USE":
                raise SetupError(
                    f"@{name}:{SERVER_NAME} exists but its password is not in"
                    f" {run.accounts_path}; pick another name"
                ) from None
            raise
        account = {"user_id": str(answer["user_id"]), "password": password}
        people[name] = account
        run.save_accounts()
    if allow:
        allowed = subprocess.run(
            [
                *(sys.executable, "-m", "chazbot.cli", "--config", str(run.config_path)),
                *("cmd", f"/people allow {account['user_id']}"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if allowed.returncode != 0:
            say(
                f"note: could not allow {account['user_id']} yet"
                f" ({(allowed.stdout + allowed.stderr).strip()[:200]});"
                f" say !chaz people allow {account['user_id']} in your DM with the bot",
                sys.stderr,
            )
        else:
            say(allowed.stdout.strip())
    say(
        "\n"
        f"An account for {name} on the local homeserver. Give them this login:\n"
        f"  homeserver:  {url}   (enter it as the homeserver in any Matrix client)\n"
        f"  user:        {account['user_id']}\n"
        f"  password:    {account['password']}\n"
        "They can invite the bot to a room or DM it; take them off again with\n"
        f"!chaz people remove {account['user_id']} (the account stays).\n"
    )
    return account


def cmd_add_person(args: argparse.Namespace) -> int:
    user_config = find_user_config(args.config)
    user_data = load_yaml(user_config) if user_config else {}
    if runs_own_matrix(user_data):
        raise SetupError(
            f"{user_config} names a homeserver of its own: add people there, then"
            " !chaz people allow @them:server"
        )
    state_dir = Path(args.state_dir or user_data.get("state_dir") or "./state")
    add_person(LocalRun(state_dir, user_config, user_data), args.name, allow=not args.no_allow)
    return 0


def _raise_stop(signum: int, frame: Any) -> None:
    raise Stop(signal.Signals(signum).name)


def find_user_config(explicit: str | None) -> Path | None:
    if explicit:
        path = Path(explicit)
        if not path.exists():
            raise SetupError(f"config file {path} does not exist")
        return path
    env = os.environ.get("CHAZBOT_CONFIG")
    if env:
        path = Path(env)
        if not path.exists():
            raise SetupError(f"config file {path} (from CHAZBOT_CONFIG) does not exist")
        return path
    path = Path("config.yaml")
    return path if path.exists() else None


def cmd_local(args: argparse.Namespace) -> int:
    user_config = find_user_config(args.config)
    user_data = load_yaml(user_config) if user_config else {}
    if user_config is not None and runs_own_matrix(user_data):
        say(
            f"{user_config} sets matrix: with a homeserver_url, so chazbot runs with it"
            " (no local homeserver)."
        )
        command = [sys.executable, "-m", "chazbot.cli", "--config", str(user_config)]
        if args.state_dir:
            command += ["--state-dir", args.state_dir]
        os.execv(sys.executable, [*command, "run"])
    state_dir = Path(args.state_dir or user_data.get("state_dir") or "./state")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_stop)
    run = LocalRun(state_dir, user_config, user_data)
    try:
        return run.run()
    except Stop:
        say("stopped.")
        return 0

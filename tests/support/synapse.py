"""A real Synapse homeserver on loopback for the Matrix tests, and the people who talk to it.

- ``SynapseServer``: a handwritten config (relaxed rate limits, bcrypt_rounds 4, no sync
  response cache, no federation) on a free port, started as a child process that dies with
  the test runner (PR_SET_PDEATHSIG); ``restart()`` keeps its port and database.
- ``register_user``: shared-secret registration through the admin API (no /login needed).
- ``Human``: a matrix-nio client that syncs in the background and keeps every room event it
  sees, so a test can wait for a reply matched to its message by ``m.in_reply_to``.
- ``ChazbotProcess``: a real ``chazbot run`` subprocess with a config pointing at the server.
- Fixtures: ``synapse`` (once per test session), ``matrix_user`` (a factory of unique users),
  ``humans`` (a factory of logged-in, syncing Humans, closed after the test) and ``chazbot``
  (a factory of bot processes, stopped after the test).

Everything waits for a condition (``wait_until``), never for a fixed time. Synapse runs only
in its own process; the test process never imports it. Skipped when it is not installed.
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import hmac
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.support.paths import ROOT
from tests.support.waits import wait_until as wait_until  # re-exported for the Matrix tests

SHARED_SECRET = "chazbot-test-shared-secret"
PASSWORD = "correct horse battery staple"
SERVER_NAME = "localhost"
BUSY = {"per_second": 10000, "burst_count": 100000}


def synapse_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("synapse", "nio"))


requires_synapse = pytest.mark.skipif(
    not synapse_installed(), reason="matrix-synapse is not installed (the dev extra)"
)


_GIVEN: set[int] = set()
"""Ports ``free_port`` has handed out in this process: the kernel may offer a port again as
soon as its probe socket closes, so two calls for one config (http and sync) could collide."""


def free_port() -> int:
    """A loopback port free now and never handed out before by this process."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _deploy_homeserver() -> Any:
    """``deploy/homeserver.py``, the local-run script, whose Synapse config the tests share."""
    path = ROOT / "deploy" / "homeserver.py"
    spec = importlib.util.spec_from_file_location("chazbot_deploy_homeserver", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


HOMESERVER = _deploy_homeserver()


def synapse_config(workdir: Path, port: int) -> dict[str, Any]:
    """The local-run config, with every rate limit lifted and cheap password hashing."""
    config: dict[str, Any] = HOMESERVER.synapse_config(
        workdir,
        port,
        {
            "registration_shared_secret": SHARED_SECRET,
            "macaroon_secret_key": SHARED_SECRET + "-macaroon",
            "form_secret": SHARED_SECRET + "-form",
        },
    )
    config["signing_key_path"] = str(workdir / "localhost.signing.key")
    config["bcrypt_rounds"] = 4
    config.update(
        {
            "rc_message": BUSY,
            "rc_registration": BUSY,
            "rc_registration_token_validity": BUSY,
            "rc_login": {"address": BUSY, "account": BUSY, "failed_attempts": BUSY},
            "rc_admin_redaction": BUSY,
            "rc_joins": {"local": BUSY, "remote": BUSY},
            "rc_joins_per_room": BUSY,
            "rc_3pid_validation": BUSY,
            "rc_invites": {"per_room": BUSY, "per_user": BUSY, "per_issuer": BUSY},
            "rc_third_party_invite": BUSY,
            "rc_key_requests": BUSY,
            "rc_media_create": BUSY,
            "rc_presence": {"per_user": BUSY},
            "rc_delayed_event_mgmt": BUSY,
            "rc_room_creation": BUSY,
            "rc_reports": BUSY,
            "rc_user_directory": BUSY,
            "rc_profile": BUSY,
        }
    )
    return config


class SynapseServer:
    """One Synapse process with its own SQLite database, on a free loopback port."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        (workdir / "hs.yaml").write_text(json.dumps(synapse_config(workdir, self.port)))
        (workdir / "log.yaml").write_text(json.dumps(HOMESERVER.log_config(workdir)))

    def start(self, timeout: float = 90.0) -> None:
        out = open(self.workdir / "stdout.log", "ab")  # noqa: SIM115 (owned by the process)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "synapse.app.homeserver", "-c", str(self.workdir / "hs.yaml")],
            cwd=self.workdir,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        out.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"synapse exited with {self.proc.returncode}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/_matrix/client/versions", timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"synapse did not start in {timeout} s:\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_tail(self, lines: int = 40) -> str:
        text = ""
        for name in ("stdout.log", "homeserver.log"):
            path = self.workdir / name
            if path.exists():
                text += "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text

    # ---- admin API ---------------------------------------------------------------------

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None, token: str | None = None
    ) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=10) as response:
            result: dict[str, Any] = json.loads(response.read())
            return result

    def register(self, localpart: str, password: str = PASSWORD, admin: bool = False) -> User:
        """Register through ``/_synapse/admin/v1/register`` with the shared secret."""
        path = "/_synapse/admin/v1/register"
        nonce = self._request("GET", path)["nonce"]
        mac = hmac.new(SHARED_SECRET.encode(), digestmod=hashlib.sha1)
        mac.update(
            b"\x00".join(
                [
                    nonce.encode(),
                    localpart.encode(),
                    password.encode(),
                    b"admin" if admin else b"notadmin",
                ]
            )
        )
        answer = self._request(
            "POST",
            path,
            {
                "nonce": nonce,
                "username": localpart,
                "password": password,
                "admin": admin,
                "mac": mac.hexdigest(),
            },
        )
        return User(answer["user_id"], password, answer["access_token"], answer["device_id"])

    def override_ratelimit(
        self, user_id: str, admin_token: str, per_second: int, burst: int
    ) -> None:
        """Rate-limit one user (0/0 would exempt them; the config already relaxes everyone)."""
        self._request(
            "POST",
            f"/_synapse/admin/v1/users/{user_id}/override_ratelimit",
            {"messages_per_second": per_second, "burst_count": burst},
            token=admin_token,
        )

    def devices(self, user_id: str, admin_token: str) -> list[dict[str, Any]]:
        answer = self._request(
            "GET", f"/_synapse/admin/v2/users/{user_id}/devices", token=admin_token
        )
        devices: list[dict[str, Any]] = answer["devices"]
        return devices


@dataclass(frozen=True)
class User:
    user_id: str
    password: str
    access_token: str
    device_id: str

    @property
    def localpart(self) -> str:
        return self.user_id[1:].split(":", 1)[0]


# ---- the humans -------------------------------------------------------------------------


@dataclass
class Seen:
    """One room event a Human saw."""

    room_id: str
    event: Any

    @property
    def content(self) -> dict[str, Any]:
        source = getattr(self.event, "source", {}) or {}
        content = source.get("content", {})
        return content if isinstance(content, dict) else {}

    @property
    def sender(self) -> str:
        return str(getattr(self.event, "sender", ""))

    @property
    def body(self) -> str:
        return str(getattr(self.event, "body", "") or self.content.get("body", ""))

    @property
    def in_reply_to(self) -> str | None:
        rel = self.content.get("m.relates_to")
        if isinstance(rel, dict) and isinstance(rel.get("m.in_reply_to"), dict):
            target = rel["m.in_reply_to"].get("event_id")
            return target if isinstance(target, str) else None
        return None


class Human:
    """A person on Matrix: a nio client syncing in the background, remembering what it sees."""

    def __init__(self, server: SynapseServer, user: User, store: Path | None = None) -> None:
        from nio import AsyncClient, AsyncClientConfig

        self.user = user
        self.server = server
        config = AsyncClientConfig(
            max_limit_exceeded=3,
            max_timeouts=3,
            request_timeout=30,
            encryption_enabled=store is not None,
            store_sync_tokens=False,
        )
        if store is not None:
            store.mkdir(parents=True, exist_ok=True)
        self.client = AsyncClient(
            server.url, user.user_id, store_path=str(store or ""), config=config
        )
        self.seen: list[Seen] = []
        self.typing: list[tuple[str, list[str]]] = []
        self._task: asyncio.Task[None] | None = None

    @property
    def user_id(self) -> str:
        return self.user.user_id

    async def start(self) -> None:
        from nio import Event, TypingNoticeEvent

        self.client.restore_login(self.user.user_id, self.user.device_id, self.user.access_token)

        async def on_event(room: Any, event: Any) -> None:
            self.seen.append(Seen(room.room_id, event))

        async def on_typing(room: Any, event: Any) -> None:
            self.typing.append((room.room_id, list(event.users)))

        self.client.add_event_callback(on_event, Event)
        self.client.add_ephemeral_callback(on_typing, TypingNoticeEvent)
        self.resume_sync()
        await wait_until(lambda: self.client.next_batch, what=f"{self.user_id}'s first sync")

    def resume_sync(self) -> None:
        """(Re)start the background sync, e.g. after the homeserver was restarted."""
        if self._task is not None:
            self._task.cancel()
        self._task = asyncio.create_task(
            self.client.sync_forever(
                timeout=30000,
                full_state=True,
                sync_filter={"room": {"timeline": {"limit": 500}}},
            )
        )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.client.close()

    # ---- acting --------------------------------------------------------------------------

    async def create_room(
        self,
        invite: list[str],
        *,
        encrypted: bool = False,
        name: str | None = None,
        direct: bool = False,
    ) -> str:
        from nio import RoomCreateResponse

        state = (
            [
                {
                    "type": "m.room.encryption",
                    "state_key": "",
                    "content": {"algorithm": "m.megolm.v1.aes-sha2"},
                }
            ]
            if encrypted
            else []
        )
        response = await self.client.room_create(
            name=name, invite=invite, initial_state=state, is_direct=direct
        )
        assert isinstance(response, RoomCreateResponse), response
        room_id = str(response.room_id)
        await wait_until(lambda: room_id in self.client.rooms, what=f"room {room_id} in sync")
        return room_id

    async def wait_invite(self, room_id: str) -> None:
        await wait_until(lambda: room_id in self.client.invited_rooms, what=f"invite to {room_id}")

    async def join(self, room_id: str) -> None:
        from nio import JoinResponse

        response = await self.client.join(room_id)
        assert isinstance(response, JoinResponse), response
        await wait_until(lambda: room_id in self.client.rooms, what=f"{room_id} joined")

    async def wait_member(
        self, room_id: str, user_id: str, membership: str = "join", timeout: float = 15
    ) -> None:
        from nio import RoomMemberEvent

        def seen() -> bool:
            return any(
                s.room_id == room_id
                and isinstance(s.event, RoomMemberEvent)
                and s.event.state_key == user_id
                and s.event.membership == membership
                for s in self.seen
            )

        await wait_until(seen, timeout, f"{user_id} {membership} in {room_id}")

    async def send(self, room_id: str, body: str, extra: dict[str, Any] | None = None) -> str:
        """Send an ``m.text`` (``extra`` is merged into the content); return its event id."""
        from nio import RoomSendResponse

        content: dict[str, Any] = {"msgtype": "m.text", "body": body, **(extra or {})}
        response = await self.client.room_send(
            room_id, "m.room.message", content, ignore_unverified_devices=True
        )
        assert isinstance(response, RoomSendResponse), response
        return str(response.event_id)

    # ---- looking -------------------------------------------------------------------------

    def messages(self, room_id: str | None = None, sender: str | None = None) -> list[Seen]:
        return [
            s
            for s in self.seen
            if (room_id is None or s.room_id == room_id)
            and (sender is None or s.sender == sender)
            and "msgtype" in s.content
        ]

    def replies(self, event_id: str, sender: str | None = None) -> list[Seen]:
        """Messages that answer ``event_id`` (by ``m.in_reply_to``)."""
        return [s for s in self.messages(sender=sender) if s.in_reply_to == event_id]

    async def wait_reply(self, event_id: str, timeout: float = 15.0, count: int = 1) -> list[Seen]:
        found: list[Seen] = await wait_until(
            lambda: (r := self.replies(event_id)) and len(r) >= count and r,
            timeout,
            f"a reply to {event_id}",
        )
        return found

    async def ask(
        self, room_id: str, body: str, extra: dict[str, Any] | None = None, timeout: float = 15.0
    ) -> Seen:
        """Send and wait for the (first) reply to it."""
        event_id = await self.send(room_id, body, extra)
        return (await self.wait_reply(event_id, timeout))[0]


# ---- the bot process --------------------------------------------------------------------


@dataclass
class ChazbotProcess:
    """A real ``chazbot run`` subprocess; its log (stderr) goes to ``log_path``."""

    workdir: Path
    config: dict[str, Any]
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    env: dict[str, str] = field(default_factory=dict)

    @property
    def log_path(self) -> Path:
        return self.workdir / "chazbot.log"

    @property
    def config_path(self) -> Path:
        return self.workdir / "config.yaml"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def start(self, timeout: float = 30.0) -> None:
        """Start and wait until the bot's first sync is done."""
        self.config_path.write_text(json.dumps(self.config, indent=1))
        before = self.log().count("matrix: first sync done")
        log_file = open(self.log_path, "ab")  # noqa: SIM115 (owned by the process)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "chazbot.cli", "--config", str(self.config_path), "run"],
            cwd=self.workdir,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        log_file.close()
        self.starts += 1

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"chazbot exited with {self.proc.returncode}:\n{self.log()[-4000:]}"
                )
            return self.log().count("matrix: first sync done") > before

        await wait_until(ready, timeout, "chazbot's first sync")

    async def stop(self, timeout: float = 30.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc is not None else 0
        self.proc.send_signal(signal.SIGTERM)
        proc = self.proc
        await wait_until(lambda: proc.poll() is not None, timeout, "chazbot to stop")
        return int(proc.returncode)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


# ---- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SynapseServer]:
    """One Synapse per test session (per xdist worker)."""
    pytest.importorskip("synapse", reason="matrix-synapse is not installed (the dev extra)")
    server = SynapseServer(tmp_path_factory.mktemp("synapse"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def synapse_admin(synapse: SynapseServer) -> User:
    return synapse.register(f"admin-{uuid.uuid4().hex[:8]}", admin=True)


@pytest.fixture
def matrix_user(synapse: SynapseServer) -> Callable[[str], User]:
    """A factory of users with unique localparts (``prefix-<random>``)."""

    def make(prefix: str) -> User:
        return synapse.register(f"{prefix}-{uuid.uuid4().hex[:8]}")

    return make


@asynccontextmanager
async def humans_made(
    synapse: SynapseServer, matrix_user: Callable[[str], User], tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[Human]]]:
    """A factory of logged-in, syncing Humans, all closed on leaving (``humans``)."""
    made: list[Human] = []

    async def make(prefix: str, encrypted: bool = False) -> Human:
        user = matrix_user(prefix)
        store = tmp_path / f"store-{user.localpart}" if encrypted else None
        human = Human(synapse, user, store)
        made.append(human)
        await human.start()
        return human

    try:
        yield make
    finally:
        await asyncio.gather(*(h.close() for h in made), return_exceptions=True)


@pytest_asyncio.fixture
async def humans(
    synapse: SynapseServer, matrix_user: Callable[[str], User], tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[Human]]]:
    """A factory of logged-in, syncing Humans (``await humans("alice", encrypted=True)``)."""
    async with humans_made(synapse, matrix_user, tmp_path) as make:
        yield make


def bot_config(
    synapse: SynapseServer,
    bot: User,
    state_dir: Path,
    llm_url: str,
    allow_list: list[str],
    admins: list[str],
    **matrix: Any,
) -> dict[str, Any]:
    return {
        "state_dir": str(state_dir),
        "sync_listen": "",
        "http_listen": "",
        "llm": {
            "backend": "openai",
            "api_base": llm_url,
            "api_key": "test",
            "model": "stand-in",
            "timeout_s": 20,
            "max_retries": 1,
        },
        "matrix": {
            "homeserver_url": synapse.url,
            "user_id": bot.user_id,
            "password": "${CHAZBOT_TEST_MATRIX_PASSWORD}",
            "allow_list": allow_list,
            "admins": admins,
            **matrix,
        },
    }


@asynccontextmanager
async def bots_made(
    synapse: SynapseServer, matrix_user: Callable[[str], User], tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[tuple[ChazbotProcess, User]]]]:
    """A factory of running bot processes, all stopped on leaving (``chazbot``)."""
    made: list[ChazbotProcess] = []

    async def make(
        llm_url: str,
        allow_list: list[str],
        admins: list[str],
        top: dict[str, Any] | None = None,
        **matrix: Any,
    ) -> tuple[ChazbotProcess, User]:
        bot = matrix_user("chazbot")
        workdir = tmp_path / f"bot-{len(made)}"
        workdir.mkdir()
        config = bot_config(synapse, bot, workdir / "state", llm_url, allow_list, admins, **matrix)
        config.update(top or {})
        proc = ChazbotProcess(workdir, config, env={"CHAZBOT_TEST_MATRIX_PASSWORD": bot.password})
        made.append(proc)
        await proc.start()
        return proc, bot

    try:
        yield make
    finally:
        for proc in made:
            await stop_and_show(proc)


async def stop_and_show(proc: ChazbotProcess) -> None:
    """Stop a bot (killed if it does not stop) and print its log's end, which pytest shows
    only when the test failed."""
    try:
        await proc.stop()
    except AssertionError:
        proc.kill()
    print(f"---- {proc.log_path} (last 150 lines) ----")
    print("\n".join(proc.log().splitlines()[-150:]))


@pytest_asyncio.fixture
async def chazbot(
    synapse: SynapseServer, matrix_user: Callable[[str], User], tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[tuple[ChazbotProcess, User]]]]:
    """A factory of running bot processes: ``proc, bot = await chazbot(llm_url, allow, admins)``."""
    async with bots_made(synapse, matrix_user, tmp_path) as make:
        yield make


__all__ = [
    "PASSWORD",
    "ChazbotProcess",
    "Human",
    "Seen",
    "SynapseServer",
    "User",
    "bot_config",
    "bots_made",
    "chazbot",
    "humans",
    "humans_made",
    "matrix_user",
    "requires_synapse",
    "stop_and_show",
    "synapse",
    "synapse_admin",
    "synapse_installed",
    "wait_until",
]

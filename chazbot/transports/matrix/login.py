"""Logging in and the Matrix credentials kept in the transport's own ``credentials`` table.

The device id and access token of the last login are kept and reused (one device per bot, not
one per start); a configured access token wins; a password logs in again when the saved
session is no longer valid. The key the e2e store is encrypted with lives beside them. None of
it is ever logged.
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

from nio import LoginResponse, ProfileGetDisplayNameResponse, WhoamiResponse

from chazbot.config import MatrixConfig
from chazbot.errors import BackendError
from chazbot.ledger import Ledger
from chazbot.transports.matrix.client import TRANSIENT, error_text, one_line
from chazbot.transports.matrix.credentials import Secrets

log = logging.getLogger(__name__)


class Credentials:
    """The peer-local credentials of one Matrix account (never synced, never printed)."""

    def __init__(self, ledger: Ledger, user_id: str) -> None:
        self._secrets = Secrets(ledger)
        self.user_id = user_id

    async def get(self, name: str) -> str | None:
        return await self._secrets.get(name)

    async def set(self, name: str, value: str) -> None:
        await self._secrets.set(name, value)

    async def session(self) -> dict[str, str]:
        """The saved ``device_id`` and ``access_token``, if any."""
        raw = await self.get(f"matrix:{self.user_id}")
        saved = json.loads(raw) if raw else {}
        return saved if isinstance(saved, dict) else {}

    async def save_session(self, device_id: str, access_token: str) -> None:
        record = {"device_id": device_id, "access_token": access_token}
        await self.set(f"matrix:{self.user_id}", json.dumps(record))

    async def pickle_key(self) -> str:
        """The key the e2e store is encrypted with: random, made on first use."""
        name = f"matrix:{self.user_id}:pickle_key"
        key = await self.get(name)
        if key is None:
            key = secrets.token_urlsafe(32)
            await self.set(name, key)
        return key


async def login(client: Any, cfg: MatrixConfig, creds: Credentials) -> None:
    """Reuse the saved device and token; else log in with the configured token or password."""
    saved = await creds.session()
    saved_device, saved_token = saved.get("device_id"), saved.get("access_token")
    how = ""
    if cfg.access_token:
        device = saved_device if saved_token == cfg.access_token else None
        if device is None:
            client.access_token = cfg.access_token
            device = await whoami(client, cfg)
        client.restore_login(cfg.user_id, device, cfg.access_token)
        how = "access token"
    elif saved_device and saved_token:
        client.restore_login(cfg.user_id, saved_device, saved_token)
        try:
            await whoami(client, cfg)
            how = "saved session"
        except BackendError as exc:
            if cfg.password is None:
                raise
            log.info("matrix: saved session no longer valid (%s); logging in again", exc)
            await password_login(client, cfg, saved_device)
            how = "password, same device"
    elif cfg.password:
        await password_login(client, cfg, saved_device)
        how = "password"
    else:
        raise BackendError(f"matrix: no password or access token for {cfg.user_id}")
    if client.device_id != saved_device or client.access_token != saved_token:
        await creds.save_session(client.device_id, client.access_token)
    reused = "reused" if client.device_id == saved_device else "new"
    log.info(
        "matrix: logged in as %s (%s, device %s, %s)", cfg.user_id, how, client.device_id, reused
    )


async def password_login(client: Any, cfg: MatrixConfig, device_id: str | None) -> None:
    client.device_id = device_id or ""
    response = await client.login(password=cfg.password, device_name=cfg.device_name)
    if not isinstance(response, LoginResponse):
        raise BackendError(f"matrix login as {cfg.user_id} failed: {error_text(response)}")


async def relogin(client: Any, cfg: MatrixConfig, creds: Credentials) -> None:
    """Log in again with the password on the same device (the token was revoked)."""
    log.warning("matrix: the access token was revoked; logging in again")
    await password_login(client, cfg, client.device_id)
    await creds.save_session(client.device_id, client.access_token)


async def whoami(client: Any, cfg: MatrixConfig) -> str:
    """The device the client's access token is for; BackendError if it is not ours."""
    response = await client.whoami()
    if not isinstance(response, WhoamiResponse):
        raise BackendError(f"matrix: the access token was refused: {error_text(response)}")
    if response.user_id != cfg.user_id:
        raise BackendError(f"matrix: the access token is for {response.user_id}, not {cfg.user_id}")
    if not response.device_id:
        raise BackendError("matrix: the homeserver did not say which device the token is for")
    return str(response.device_id)


async def display_name(client: Any) -> str | None:
    """The bot's display name (mentions by name count), or None."""
    try:
        response = await client.get_displayname()
    except TRANSIENT as exc:
        log.debug("matrix: no display name: %s", one_line(exc))
        return None
    if isinstance(response, ProfileGetDisplayNameResponse) and response.displayname:
        return str(response.displayname)
    return None


__all__ = ["Credentials", "display_name", "login", "password_login", "relogin", "whoami"]

"""TLS for sync: whom the client trusts, and the certificate the sync listener serves.

The client checks every ``https:`` peer's certificate and host name against the system's CAs
and, when the operator names one, an extra CA file (``sync_ca_file``: a self-signed peer's
certificate, or a private CA). The sync listener serves TLS itself when it is given a
certificate and key (``sync_tls_cert``, ``sync_tls_key``); behind a reverse proxy that ends
TLS (Caddy, nginx: docs/operations.md) it needs neither. Errors are one-line ConfigErrors
naming the key.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from chazbot.errors import ConfigError


def client_context(ca_file: Path | None = None) -> ssl.SSLContext:
    """Verifies certificates and host names: the system's CAs, and ``ca_file`` too."""
    context = ssl.create_default_context()
    if ca_file is not None:
        try:
            context.load_verify_locations(cafile=str(ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"sync_ca_file {ca_file}: not a readable PEM certificate file "
                f"({getattr(exc, 'strerror', None) or exc})"
            ) from None
    return context


def server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """What the sync listener serves: ``cert_file`` (the chain, PEM) and ``key_file``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert_file), str(key_file))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"sync_tls_cert {cert_file} / sync_tls_key {key_file}: not a usable certificate "
            f"and key ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    return context


__all__ = ["client_context", "server_context"]

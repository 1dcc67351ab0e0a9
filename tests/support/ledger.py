"""What the ledger's tests share: the permissions they grant and fixed keys by number."""

from __future__ import annotations

from chazbot.ledger import KeyPair, Permission

ADMIN0 = Permission.parse("admin", 0)
ADMIN1 = Permission.parse("admin", 1)
WRITE0 = Permission.parse("write", 0)
READ = Permission.parse("read")


def key(n: int) -> KeyPair:
    """The same key for the same ``n`` (1-255), in every run."""
    return KeyPair.from_private_bytes(bytes([n]) * 32)

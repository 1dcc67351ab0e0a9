"""Ed25519 keys. A public key is written ``ed25519:<64 hex>`` everywhere it is stored or sent."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from nacl.bindings import crypto_sign_open
from nacl.exceptions import BadSignatureError

from chazbot.errors import InputError

PREFIX = "ed25519:"


def parse_public_key(text: str) -> Ed25519PublicKey:
    """Parse ``ed25519:<hex>``; a malformed key is an InputError."""
    if (
        not isinstance(text, str)
        or not text.startswith(PREFIX)
        or len(text) != len(PREFIX) + 64
        or not all(c in "0123456789abcdef" for c in text[len(PREFIX) :])
    ):
        raise InputError(
            f"not a public key (ed25519:<64 lowercase hex digits>): {str(text)[:80]!r}"
        )
    try:
        return Ed25519PublicKey.from_public_bytes(bytes.fromhex(text[len(PREFIX) :]))
    except ValueError as exc:
        raise InputError(f"not a public key: {text[:80]!r}") from exc


@lru_cache(maxsize=65536)
def _raw_public_key(text: str) -> bytes:
    parse_public_key(text)  # validates the form and the curve point
    return bytes.fromhex(text[len(PREFIX) :])


def verify(public_key: str, signature: bytes, message: bytes) -> bool:
    """True when ``signature`` is ``public_key``'s signature of ``message``.

    Verification uses libsodium (PyNaCl), faster than OpenSSL's ed25519 in ``cryptography``;
    it is most of the cost of ingesting synced entries. ``bench/ledger.py`` times both
    (figures in docs/measured.md, "The ledger").
    """
    try:
        raw = _raw_public_key(public_key)
    except InputError:
        return False
    if len(signature) != 64:
        return False
    try:
        crypto_sign_open(signature + message, raw)
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


@dataclass(frozen=True)
class KeyPair:
    """A private signing key and its public name."""

    private: Ed25519PrivateKey
    public: str

    @classmethod
    def generate(cls) -> KeyPair:
        return cls.from_private_bytes(Ed25519PrivateKey.generate().private_bytes_raw())

    @classmethod
    def from_private_bytes(cls, raw: bytes) -> KeyPair:
        private = Ed25519PrivateKey.from_private_bytes(raw)
        pub = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return cls(private, PREFIX + pub.hex())

    def private_bytes(self) -> bytes:
        return self.private.private_bytes_raw()

    def sign(self, message: bytes) -> bytes:
        return self.private.sign(message)

    def __repr__(self) -> str:  # never show the private key
        return f"KeyPair({self.public})"

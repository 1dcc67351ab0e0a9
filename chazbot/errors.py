"""One exception tree for chazbot.

::

    ChazError                 base of every error chazbot raises on purpose
    ├── InputError            the user's (or the model's) input is wrong; shown as is
    │   └── ConfigError       the config file or an ${ENV} reference is wrong
    ├── PermissionDenied      a key or a user lacks the permission it needs
    ├── NotFound              a bank, agent, session, key or entry does not exist
    ├── ConflictError         the thing exists already, or the state moved under us
    ├── IntegrityError        stored or received data fails its id, signature or schema check
    └── BackendError          a service we talk to failed: LLM, embedder, homeserver, peer

Library errors are translated once, at the adapter that called the library, with
``raise ... from exc``. Every message is one line, meant for a person.
"""

from __future__ import annotations


class ChazError(Exception):
    """Base of every error chazbot raises on purpose. ``str(err)`` is one line for a person."""

    def __str__(self) -> str:
        text = super().__str__()
        return " ".join(text.split())


class InputError(ChazError):
    """The input is wrong (chat, command, tool argument, ticket, request); nothing was changed."""


class ConfigError(InputError):
    """The configuration is wrong: a bad value, an unknown key, a missing ${ENV} variable."""


class PermissionDenied(ChazError):
    """A key or a user lacks the permission needed; nothing was changed."""


class NotFound(ChazError):
    """A bank, agent, session, key or entry does not exist."""


class ConflictError(ChazError):
    """The thing exists already, or the state changed in a way that forbids the operation."""


class IntegrityError(ChazError):
    """Stored or received data fails its id, signature, authorisation or schema check."""


class BackendError(ChazError):
    """An outside service failed: the LLM, the embedder, the homeserver or another peer."""


__all__ = [
    "BackendError",
    "ChazError",
    "ConfigError",
    "ConflictError",
    "InputError",
    "IntegrityError",
    "NotFound",
    "PermissionDenied",
]

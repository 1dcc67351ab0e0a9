"""One exception tree for chazbot.

::

    ChazError                 base of every error chazbot raises on purpose
    ├── InputError            the user's (or the model's) input is wrong; shown as is
    │   ├── ConfigError       the config file or an ${ENV} reference is wrong
    │   ├── UsageError        a command's arguments are wrong (commands.tree)
    │   ├── _ReadTimeout      a sync request's body came too slowly (sync.server, HTTP 408)
    │   ├── ProtocolMismatch  a sync request in another protocol version (sync.protocol, 426)
    │   ├── AddressRefused    a ticket's peer address is not called: nothing sent (sync.reach)
    │   └── Refusal           the same, raised in aiohttp's resolver (also an OSError)
    ├── PermissionDenied      a key or a user lacks the permission it needs
    │   ├── Unauthenticated   a sync request's signature, time or nonce is refused (sync.protocol)
    │   │   └── Misdirected   a sync request signed for another server (sync.protocol, 401)
    │   └── NeedsOwnerGrant   this peer's key needs a grant from a bank's owner (memory.banks)
    ├── NotFound              a bank, agent, session, key or entry does not exist
    ├── ConflictError         the thing exists already, or the state moved under us
    │   └── StateLocked       another process holds the state directory (ledger.statelock)
    ├── IntegrityError        stored or received data fails its id, signature or schema check
    ├── Unavailable           we cannot take the request now; the caller should retry later
    │   ├── OverBudget        a search past its work budget on the loop: retried on a thread
    │   └── Busy              the sync server's replay cache is full (sync.protocol, HTTP 503)
    │       └── RateLimited   too many requests from an address or key (sync.protocol, 429)
    └── BackendError          a service we talk to failed: LLM, embedder, homeserver, peer
        ├── Retryable         a failure worth another attempt (backends.retry; never escapes)
        └── SyncFailed        a Matrix sync failed (transports.matrix.sync; the loop restarts)

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


class Unavailable(ChazError):
    """We cannot take the request now (a full cache, a queue at its bound); retry later."""


class OverBudget(Unavailable):
    """A search ran past the work it was allowed on the event loop (``bm25_kernel.budget``):
    nothing was returned; it runs again on a search thread (``memory.offloop``)."""


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
    "OverBudget",
    "PermissionDenied",
    "Unavailable",
]

"""Database tickets: how one peer tells another where to fetch a database.

A ticket is ``eidetica:?db=sha256:<64 hex>&pr=https:<host>:<port>``. It names the database and
one to four peer addresses (``pr``) that serve it; it carries no secret, because a server
only serves a database to keys its AuthSettings allow. Parameters are percent-decoded;
unknown ones are ignored (a later version may add some), a malformed ``pr`` is skipped, but
at least one valid ``pr`` and exactly one valid ``db`` are required, and more than
``MAX_TICKET_ADDRESSES`` ``pr`` (malformed ones counted) are refused.

A peer address is ``https:<host>:<port>`` (TLS: the client checks the peer's certificate) or
``http:<host>:<port>`` (plain: the client talks plain HTTP only to this machine unless the
operator opts in, ``sync_allow_plain_http``): a DNS name, an IPv4 address or a bracketed IPv6
address, and a port 1-65535. ``base_url`` turns it into the URL the sync client talks to.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from chazbot.errors import InputError
from chazbot.ledger.encoding import is_content_id

SCHEME = "eidetica:"
SCHEMES = ("http", "https")
"""A peer address's schemes: ``https`` (TLS) and ``http`` (plain)."""
MAX_TICKET_CHARS = 4096
MAX_TICKET_ADDRESSES = 4
"""``pr`` parameters a ticket may hold: an import tries each, so a ticket of many would have
this peer knock on many doors (issue #47)."""
_HOSTNAME = re.compile(
    r"(?=.{1,253}\Z)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)


@dataclass(frozen=True)
class Ticket:
    """A database id and the addresses of peers that serve it."""

    db: str
    addresses: list[str]

    def __str__(self) -> str:
        return format_ticket(self.db, self.addresses)


def split_address(text: str) -> tuple[str, str, int]:
    """Split ``http[s]:<host>:<port>`` into (scheme, host, port); a bad one is an InputError."""
    scheme = text.partition(":")[0] if isinstance(text, str) else ""
    if scheme not in SCHEMES or len(text) > 300:
        raise InputError(f"not a peer address (https:<host>:<port>): {str(text)[:80]!r}")
    rest = text[len(scheme) + 1 :]
    host, sep, port_text = rest.rpartition(":")
    if not sep or not port_text.isascii() or not port_text.isdigit() or len(port_text) > 5:
        raise InputError(f"peer address needs a port ({scheme}:<host>:<port>): {text[:80]!r}")
    port = int(port_text)
    if not 0 < port < 65536:
        raise InputError(f"peer address port must be 1-65535: {text[:80]!r}")
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise InputError(f"peer address has a bad IPv6 host: {text[:80]!r}") from None
    elif not host.isascii() or not _HOSTNAME.fullmatch(host):
        raise InputError(f"peer address has a bad host: {text[:80]!r}")
    return scheme, host, port


def parse_address(text: str) -> tuple[str, int]:
    """Split ``http[s]:<host>:<port>`` into (host, port); a bad address is an InputError."""
    _, host, port = split_address(text)
    return host, port


def check_address(text: str) -> str:
    """Return ``text`` if it is a valid peer address, else raise InputError."""
    parse_address(text)
    return text


def canonical_address(text: str) -> str:
    """``text`` (a peer address) in the one form two peers compare: the host in lower case,
    an IP address written the standard way (``http:[::1]:80``, never ``[0:0::1]``).

    A request is signed for its server's canonical address (``sync.protocol``)."""
    scheme, host, port = split_address(text)
    bare = host.strip("[]").lower()
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        return f"{scheme}:{bare}:{port}"
    return format_address(ip.compressed, port, scheme)


def base_url(address: str) -> str:
    """``https:<host>:<port>`` → ``https://<host>:<port>`` (and ``http:`` → ``http://``)."""
    scheme, host, port = split_address(address)
    return f"{scheme}://{host}:{port}"


def format_address(host: str, port: int, scheme: str = "http") -> str:
    """The peer address of ``host:port`` (IPv6 hosts get brackets)."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return check_address(f"{scheme}:{host}:{port}")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine for certain: ``localhost`` or a loopback address
    (a name that resolves to one is not: what it resolves to can change)."""
    bare = host.strip("[]").lower()
    if bare == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        return False
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def plain_off_host(address: str) -> bool:
    """Whether talking to ``address`` is plain HTTP to another machine (anyone on the way
    reads and changes what passes)."""
    scheme, host, _ = split_address(address)
    return scheme == "http" and not is_loopback(host)


def is_wildcard(host: str) -> bool:
    """Whether ``host`` is a bind-everything address (``0.0.0.0``, ``::``), no use to peers."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def address_from_url(url: str) -> str:
    """``https://host[:port][/]`` (``sync_public_url``) → the peer address ``https:host:port``
    (and ``http://`` → ``http:``).

    The port defaults to 443 (80 for http); a wildcard host is refused (peers cannot reach it).
    """
    text = url.strip().rstrip("/")
    scheme = text.partition("://")[0].lower()
    if scheme not in SCHEMES or "://" not in text:
        raise InputError(f"a public sync URL is https://host[:port], not {url[:80]!r}")
    rest = text.partition("://")[2]
    default = "443" if scheme == "https" else "80"
    if rest.startswith("["):
        host, _, tail = rest.partition("]")
        host += "]"
        port = tail[1:] if tail.startswith(":") else (default if not tail else "x")
    else:
        host, sep, port = rest.partition(":")
        port = port if sep else default
    address = f"{scheme}:{host}:{port}"
    check_address(address)
    if is_wildcard(host):
        raise InputError(f"a public sync URL cannot be a wildcard address: {url[:80]!r}")
    return address


def format_ticket(db: str, addresses: list[str]) -> str:
    """The ticket for ``db`` served at ``addresses`` (at least one, each checked)."""
    if not is_content_id(db):
        raise InputError(f"not a database id (sha256:<64 hex digits>): {str(db)[:80]!r}")
    if not addresses:
        raise InputError("a ticket needs at least one peer address")
    if len(_unique(addresses)) > MAX_TICKET_ADDRESSES:
        raise InputError(f"a ticket names at most {MAX_TICKET_ADDRESSES} peer addresses")
    parts = [f"db={db}"]
    for address in _unique(addresses):
        parts.append("pr=" + quote(check_address(address), safe=":"))
    return SCHEME + "?" + "&".join(parts)


def parse_ticket(text: str) -> Ticket:
    """Parse a ticket (see the module docstring); a bad ticket is an InputError."""
    if not isinstance(text, str):
        raise InputError("a ticket must be text")
    text = text.strip()
    if len(text) > MAX_TICKET_CHARS:
        raise InputError(f"ticket is longer than {MAX_TICKET_CHARS} characters")
    if not text[: len(SCHEME)].lower() == SCHEME or text[len(SCHEME) : len(SCHEME) + 1] != "?":
        raise InputError(f"not a ticket (eidetica:?db=…&pr=…): {text[:80]!r}")
    dbs: list[str] = []
    addresses: list[str] = []
    parts = [part.partition("=") for part in text[len(SCHEME) + 1 :].split("&")]
    named = sum(1 for name, _, _ in parts if name == "pr")
    if named > MAX_TICKET_ADDRESSES:
        raise InputError(
            f"a ticket names at most {MAX_TICKET_ADDRESSES} peer addresses (pr=…); this one "
            f"names {named}"
        )
    for name, _, raw in parts:
        try:
            value = unquote(raw, errors="strict")
        except UnicodeDecodeError:
            value = ""  # bad percent-encoding: an invalid value, refused or skipped below
        if name == "db":
            dbs.append(value)
        elif name == "pr":
            try:
                addresses.append(check_address(value))
            except InputError:
                continue  # a malformed peer address is skipped; others may do
    if len(dbs) != 1:
        raise InputError("a ticket needs exactly one db=sha256:<64 hex digits>")
    if not is_content_id(dbs[0]):
        raise InputError(f"ticket has a bad database id: {dbs[0][:80]!r}")
    if not addresses:
        raise InputError("ticket has no valid peer address (pr=https:<host>:<port>)")
    return Ticket(dbs[0], _unique(addresses))


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))

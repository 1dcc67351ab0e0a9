"""Tickets: parse, format, round trip, and one-line InputErrors on bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chazbot.errors import InputError
from chazbot.sync.tickets import (
    Ticket,
    address_from_url,
    base_url,
    format_ticket,
    parse_address,
    parse_ticket,
    plain_off_host,
)

DB = "sha256:" + "ab" * 32


def test_parse_one_address() -> None:
    t = parse_ticket(f"eidetica:?db={DB}&pr=http:127.0.0.1:8765")
    assert t == Ticket(DB, ["http:127.0.0.1:8765"])
    assert base_url(t.addresses[0]) == "http://127.0.0.1:8765"


def test_several_addresses_unknown_params_and_bad_pr_skipped() -> None:
    text = (
        f"  eidetica:?v=2&db={DB}&pr=http:peer.example.org:443&pr=ftp:x:1"
        "&pr=http:[::1]:9000&x&pr=http:peer.example.org:443\n"
    )
    t = parse_ticket(text)
    assert t.db == DB
    assert t.addresses == ["http:peer.example.org:443", "http:[::1]:9000"]
    t = parse_ticket(f"eidetica:?db={DB}&pr=http:nohost&pr=http:10.0.0.2:99999&pr=http:a:1")
    assert t.addresses == ["http:a:1"]


@pytest.mark.parametrize("count", [5, 6, 160])
def test_a_ticket_names_at_most_four_addresses(count: int) -> None:
    """Issue #47: one ticket held 160 addresses, each of which an import knocked on."""
    four = [f"http:peer{n}.example.org:443" for n in range(4)]
    assert parse_ticket(format_ticket(DB, four)).addresses == four
    for prs in (
        [f"http:p{n}:{n + 1}" for n in range(count)],  # all valid
        ["http:p:1"] * count,  # one address, said many times
        ["http:p:1", *["ftp:b:1"] * (count - 1)],  # malformed ones count
    ):
        text = f"eidetica:?db={DB}&" + "&".join(f"pr={a}" for a in prs)
        with pytest.raises(InputError, match="at most 4 peer addresses") as err:
            parse_ticket(text)
        assert "\n" not in str(err.value) and str(count) in str(err.value)
    with pytest.raises(InputError, match="at most 4"):
        format_ticket(DB, [f"http:peer{n}.example.org:443" for n in range(count)])


def test_percent_encoded_values() -> None:
    t = parse_ticket(f"eidetica:?db={DB.replace(':', '%3A')}&pr=http%3A%5B%3A%3A1%5D%3A80")
    assert t == Ticket(DB, ["http:[::1]:80"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not a ticket"),
        ("http://x", "not a ticket"),
        ("eidetica:db=x", "not a ticket"),
        ("eidetica:?pr=http:a:1", "exactly one db"),
        (f"eidetica:?db={DB}&db={DB}&pr=http:a:1", "exactly one db"),
        ("eidetica:?db=sha256:abc&pr=http:a:1", "bad database id"),
        (f"eidetica:?db={DB.upper()}&pr=http:a:1", "bad database id"),
        (f"eidetica:?db={DB}", "no valid peer address"),
        (f"eidetica:?db={DB}&pr=http:a:0&pr=http:-a:1&pr=http:[zz]:1", "no valid peer address"),
        (f"eidetica:?db={DB}%ff&pr=http:a:1", "bad database id"),
        ("eidetica:?" + "x" * 5000, "longer than"),
    ],
)
def test_bad_tickets(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        parse_ticket(text)
    assert "\n" not in str(err.value)


def test_format_checks_its_input() -> None:
    with pytest.raises(InputError):
        format_ticket("sha256:nothex", ["http:a:1"])
    with pytest.raises(InputError):
        format_ticket(DB, [])
    with pytest.raises(InputError):
        format_ticket(DB, ["http:a"])
    with pytest.raises(InputError):
        parse_address("http:a:b")


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
_host = st.one_of(
    st.lists(_label, min_size=1, max_size=4).map(".".join),
    st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t))),
    st.ip_addresses(v=6).map(lambda a: f"[{a}]"),
)
_address = st.builds(lambda h, p: f"http:{h}:{p}", _host, st.integers(1, 65535))


@settings(max_examples=200, deadline=None)
@given(
    db=st.text("0123456789abcdef", min_size=64, max_size=64).map(lambda h: "sha256:" + h),
    addresses=st.lists(_address, min_size=1, max_size=4, unique=True),
)
def test_round_trip(db: str, addresses: list[str]) -> None:
    text = format_ticket(db, addresses)
    assert parse_ticket(text) == Ticket(db, addresses)
    assert str(parse_ticket(text)) == text


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300) | st.builds(lambda s: "eidetica:?" + s, st.text(max_size=300)))
def test_garbage_is_an_input_error_or_a_ticket(text: str) -> None:
    try:
        t = parse_ticket(text)
    except InputError as exc:
        assert "\n" not in str(exc)
    else:
        assert parse_ticket(format_ticket(t.db, t.addresses)) == t


def test_https_addresses_and_public_urls() -> None:
    t = parse_ticket(f"eidetica:?db={DB}&pr=https:sync.example.org:443&pr=http:127.0.0.1:8765")
    assert t.addresses == ["https:sync.example.org:443", "http:127.0.0.1:8765"]
    assert base_url(t.addresses[0]) == "https://sync.example.org:443"
    assert parse_ticket(str(Ticket(DB, ["https:[::1]:9"]))).addresses == ["https:[::1]:9"]
    assert address_from_url("https://sync.example.org/") == "https:sync.example.org:443"
    assert address_from_url("https://[2001:db8::1]:8443") == "https:[2001:db8::1]:8443"
    assert address_from_url("http://sync.example.org") == "http:sync.example.org:80"
    for bad in ("ftp://x:1", "https//x", "https://0.0.0.0:1", "https:x:1"):
        with pytest.raises(InputError):
            address_from_url(bad)
    with pytest.raises(InputError):
        parse_address("httpss:a:1")


def test_plain_http_is_for_this_machine_only() -> None:
    for here in ("http:127.0.0.1:1", "http:[::1]:1", "http:localhost:1", "http:127.8.0.1:1"):
        assert not plain_off_host(here), here
    for there in ("http:10.0.0.2:1", "http:peer.example.org:1", "http:localhost.evil.org:1"):
        assert plain_off_host(there), there
    assert not plain_off_host("https:peer.example.org:1")

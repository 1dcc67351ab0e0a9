"""#46: the built-ins ``get_time``, ``calculate`` and ``web_fetch``. ``web_fetch`` never
reaches a loopback, private, link-local or metadata address, however the URL spells it, after
DNS resolution, on every redirect and when DNS answers change, and it refuses before
connecting: the loopback site of these tests counts every request it gets. It is reachable
only when the test's config allows it."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
import pytest_asyncio
from aiohttp import web

from chazbot.errors import BackendError, InputError, PermissionDenied
from chazbot.tools.addresses import AddressPolicy, networks, why_private
from chazbot.tools.builtins import BUILTINS, Builtins
from chazbot.tools.calc import calculate
from chazbot.tools.fetch import FetchSettings, fetch


@dataclass
class Site:
    """A web site on loopback that counts what it is asked."""

    host: str = "127.0.0.1"
    hits: list[str] = field(default_factory=list)
    port: int = 0
    redirect_to: str = ""
    runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.hits.append(request.path_qs)
        if request.path == "/go" and self.redirect_to:
            raise web.HTTPFound(self.redirect_to)
        if request.path == "/big":
            return web.Response(text="y" * 300_000, content_type="text/plain")
        if request.path == "/png":
            return web.Response(body=b"\x89PNG....", content_type="image/png")
        page = (
            "<html><head><title>Notice</title><script>steal()</script></head>"
            "<body><h1>Bins</h1><p>Collection moves to <b>Friday</b>.</p></body></html>"
        )
        return web.Response(text=page, content_type="text/html")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, self.host, 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.port}{path}"


@pytest_asyncio.fixture
async def site() -> AsyncIterator[Site]:
    s = Site()
    await s.start()
    yield s
    assert s.runner is not None
    await s.runner.cleanup()


@pytest_asyncio.fixture
async def other_site() -> AsyncIterator[Site]:
    s = Site(host="127.0.0.2")
    await s.start()
    yield s
    assert s.runner is not None
    await s.runner.cleanup()


class Answers:
    """A stand-in resolver whose answers a test sets, and changes, per name."""

    def __init__(self, **names: Sequence[str]) -> None:
        self.names = {k.replace("_", "."): list(v) for k, v in names.items()}
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append(host)
        answers = self.names.get(host)
        if not answers:
            raise OSError(f"{host} not found")
        return [answers.pop(0)] if len(answers) > 1 else answers


def settings(allow: bool = False, allow_nets: Sequence[str] = ()) -> FetchSettings:
    return FetchSettings(
        max_bytes=100_000, timeout_s=10, policy=AddressPolicy(allow, networks(allow_nets))
    )


PRIVATE_SPELLINGS = [
    "127.0.0.1",
    "127.1",
    "2130706433",  # decimal
    "0177.0.0.1",  # octal
    "0x7f.0.0.1",  # hex
    "0x7f000001",
    "017700000001",
    "[::1]",
    "[::ffff:127.0.0.1]",  # IPv4-mapped
    "[::ffff:7f00:1]",
    "[64:ff9b::7f00:1]",  # NAT64
    "[2002:7f00:1::]",  # 6to4
    "0.0.0.0",
    "10.1.2.3",
    "172.16.5.4",
    "192.168.1.1",
    "100.64.0.1",  # shared (CGNAT)
    "169.254.169.254",  # cloud metadata
    "[fd00:ec2::254]",
    "[fe80::1]",
    "[fc00::1]",
    "224.0.0.1",
]


@pytest.mark.parametrize("host", PRIVATE_SPELLINGS)
async def test_every_private_spelling_is_refused_before_connecting(site: Site, host: str) -> None:
    url = f"http://{host}:{site.port}/"
    with pytest.raises(PermissionDenied, match="web_fetch does not go there"):
        await fetch(url, settings())
    assert site.hits == []


async def test_names_are_judged_by_what_they_resolve_to(site: Site) -> None:
    names = Answers(**{"intranet_test": ["10.0.0.7"], "loop_test": ["127.0.0.1"]})
    names.names["mixed.test"] = ["93.184.216.34", "127.0.0.1"]  # one bad answer of two

    async def both(host: str, port: int) -> Sequence[str]:
        if host == "mixed.test":
            return ["93.184.216.34", "127.0.0.1"]
        return await names(host, port)

    for host in ("loop.test", "intranet.test", "mixed.test"):
        with pytest.raises(PermissionDenied):
            await fetch(f"http://{host}:{site.port}/", settings(), both)
    with pytest.raises(PermissionDenied):  # the system resolver: localhost is loopback
        await fetch(f"http://localhost:{site.port}/", settings())
    with pytest.raises(PermissionDenied, match="metadata"):  # not even resolved
        await fetch("http://metadata.google.internal/computeMetadata/v1/", settings(), both)
    assert "metadata.google.internal" not in names.asked
    assert site.hits == []


async def test_loopback_is_reached_only_when_the_operator_allows_it(site: Site) -> None:
    with pytest.raises(PermissionDenied):
        await fetch(site.url(), settings())
    text = await fetch(site.url(), settings(allow=True))
    assert site.hits == ["/"]
    assert "Notice" in text and "Collection moves to Friday." in text
    assert "steal" not in text  # scripts are no text
    allowed_one = await fetch(site.url(), settings(allow_nets=["127.0.0.1/32"]))
    assert "Friday" in allowed_one


async def test_a_redirect_to_loopback_is_refused(site: Site, other_site: Site) -> None:
    other_site.redirect_to = site.url("/secret")
    only_other = settings(allow_nets=["127.0.0.2/32"])
    with pytest.raises(PermissionDenied, match="loopback"):
        await fetch(other_site.url("/go"), only_other)
    assert other_site.hits == ["/go"] and site.hits == []
    # the same through a name, and through a spelling
    names = Answers(**{"home_test": ["127.0.0.1"]})
    for target in (f"http://home.test:{site.port}/s", f"http://2130706433:{site.port}/s"):
        other_site.redirect_to = target
        with pytest.raises(PermissionDenied):
            await fetch(other_site.url("/go"), only_other, names)
    assert site.hits == []


async def test_dns_answers_that_change_are_checked_each_time(site: Site, other_site: Site) -> None:
    names = Answers(**{"rebind_test": ["127.0.0.2", "127.0.0.1"]})
    only_other = settings(allow_nets=["127.0.0.2/32"])
    first = await fetch(f"http://rebind.test:{other_site.port}/", only_other, names)
    assert "Friday" in first and other_site.hits == ["/"]
    with pytest.raises(PermissionDenied, match=r"rebind\.test"):
        await fetch(f"http://rebind.test:{other_site.port}/", only_other, names)
    assert other_site.hits == ["/"] and site.hits == []
    assert names.asked == ["rebind.test", "rebind.test"]


async def test_bounded_bytes_and_only_text(site: Site) -> None:
    text = await fetch(site.url("/big"), settings(allow=True))
    assert "(cut at 100,000 bytes)" in text and len(text) < 101_000
    with pytest.raises(InputError, match="image/png is not text"):
        await fetch(site.url("/png"), settings(allow=True))
    for bad in ("ftp://example.org/", "file:///etc/passwd", "http://user:pw@example.org/", "x"):
        with pytest.raises(InputError):
            await fetch(bad, settings())


async def test_a_dead_port_is_a_backend_error_not_a_crash() -> None:
    with pytest.raises(BackendError):
        await fetch("http://127.0.0.1:9/", settings(allow=True))


def test_why_private_reads_embedded_addresses() -> None:
    assert why_private(ipaddress.ip_address("8.8.8.8")) is None
    assert why_private(ipaddress.ip_address("2606:4700::1111")) is None
    assert "loopback" in (why_private(ipaddress.ip_address("::ffff:127.0.0.1")) or "")
    assert "metadata" in (why_private(ipaddress.ip_address("169.254.169.254")) or "")


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("17 % of 2,340", "397.8"),
        ("17/100*2340", "397.8"),
        ("(2 + 3) * 4", "20"),
        ("2^10", "1024"),
        ("sqrt(2)**2", "2"),
        ("2340 % 17", "11"),
        ("-3 // 2", "-2"),
    ],
)
def test_calculate(expression: str, value: str) -> None:
    assert calculate(expression) == value


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",
        "open('/etc/passwd')",
        "(1).__class__",
        "[1, 2]",
        "lambda: 1",
        "9**9**9",
        "10**400",
        "1/0",
        "a" * 600,
        "(" * 240 + "1" + ")" * 240,
        "",
    ],
)
def test_calculate_refuses_what_is_no_arithmetic(expression: str) -> None:
    with pytest.raises(InputError):
        calculate(expression)


async def test_get_time_in_a_zone() -> None:
    fixed = Builtins(clock=lambda: datetime(2026, 12, 7, 12, 0, tzinfo=UTC))
    said = await BUILTINS["get_time"].run(fixed, {"zone": "Asia/Tokyo"})
    assert said == "Monday 2026-12-07 21:00 in Asia/Tokyo (UTC+09:00)"
    with pytest.raises(InputError, match="IANA"):
        await BUILTINS["get_time"].run(fixed, {"zone": "Mars/Olympus"})

"""A sign-in link sent in a DM signs in only while that DM is still read by its person alone.

Found by the red team of the audience rule: under ``shared`` history (Element's default for a
DM) someone invited into Alice's DM within the link's 10 minutes could scroll up, open the
unused link and be signed in as Alice (or as an admin, had she been one). The link now keeps
the room it was sent in; when it is used, the chat transport is asked who reads that room
(``Service.room_audience``), and anyone else there — or no answer — refuses it, and spends it.
Real SQLite, the memory page on a loopback port; the rooms are what the test says of them."""

from __future__ import annotations

import re
from pathlib import Path

from chazbot.commands.web_cmds import LINK_SHARED_ROOM
from chazbot.memory.audience import Audience, room_audience
from chazbot.peer import Peer
from tests.support.web import ADMIN, ALICE, browser_session, serving, sign_in

DM = "matrix:!dm-alice:example.org"
MALLORY = "@mallory:example.org"
LINK = re.compile(r"https?://\S+/ui/login\?t=\S+")


class Rooms:
    """Who reads each room now, as the test sets it; ``broken``: the homeserver is away."""

    def __init__(self) -> None:
        self.readers: dict[str, set[str]] = {DM: {ALICE}}
        self.broken = False

    def room_name(self, session: str) -> str | None:
        return None

    async def room_audience(self, session: str) -> Audience | None:
        if self.broken:
            raise ConnectionError("the homeserver did not answer")
        if session not in self.readers:
            return None
        return room_audience(session, self.readers[session], lambda u: u == ADMIN)


async def asked_in(peer: Peer, person: str, session: str, readers: set[str]) -> str:
    audience = room_audience(session, readers, lambda u: u == ADMIN)
    reply = await peer.command("/web", session=session, sender=person, audience=audience)
    found = LINK.search(reply.text)
    assert reply.ok and found is not None, reply.text
    return found.group(0)


async def test_a_link_signs_in_only_while_its_dm_is_read_by_its_person_alone(
    tmp_path: Path,
) -> None:
    rooms = Rooms()
    async with serving(tmp_path, rooms=rooms) as (peer, _):
        # the DM as it was: Alice signs in
        link = await asked_in(peer, ALICE, DM, {ALICE})
        async with browser_session() as client:
            answer = await sign_in(client, link)
            assert answer.status == 303 and answer.headers["Location"].endswith("/ui/me")
        # Mallory is invited before the next link is used: it signs no one in, and is spent
        link = await asked_in(peer, ALICE, DM, {ALICE})
        rooms.readers[DM] = {ALICE, MALLORY}
        async with browser_session() as client:
            answer = await sign_in(client, link)
            assert answer.status == 403 and LINK_SHARED_ROOM in await answer.text()
            assert "/ui/me" not in answer.headers.get("Location", "")
        rooms.readers[DM] = {ALICE}  # Mallory gone again: the spent link stays spent
        async with browser_session() as client:
            assert (await sign_in(client, link)).status == 403
        # the homeserver cannot say who reads the room: refused (fail closed)
        link = await asked_in(peer, ALICE, DM, {ALICE})
        rooms.broken = True
        async with browser_session() as client:
            assert (await sign_in(client, link)).status == 403
        # a room no transport knows now (the bot left it): refused
        rooms.broken = False
        link = await asked_in(peer, ALICE, DM, {ALICE})
        del rooms.readers[DM]
        async with browser_session() as client:
            assert (await sign_in(client, link)).status == 403
        # the operator's link (the terminal, chazbot web-link) belongs to no room
        operator = await peer.command("/web")
        found = LINK.search(operator.text)
        assert found is not None, operator.text
        async with browser_session() as client:
            answer = await sign_in(client, found.group(0))
            assert answer.status == 303 and answer.headers["Location"].endswith("/ui/admin")


async def test_without_a_chat_transport_a_rooms_link_signs_no_one_in(tmp_path: Path) -> None:
    async with serving(tmp_path) as (peer, _):
        link = await asked_in(peer, ALICE, DM, {ALICE})
        async with browser_session() as client:
            assert (await sign_in(client, link)).status == 403

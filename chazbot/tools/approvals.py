"""Calls that wait for a person's yes (SPEC §12).

A call that needs approval is put to the room through the transport's ``RoomLink``: Matrix
posts one short prompt (answered by a ✅/❌ reaction to it, or ``approve``/``deny``), the
terminal asks y/n. Only the person whose message started the turn, or an admin, in that room,
may answer. Unanswered after ``timeout_s`` it is denied and the room is told; an answer after
that finds nothing to answer and changes nothing. A session with no link (``chazbot cmd``,
the Python API) cannot be asked: its calls are denied (fail closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from dataclasses import dataclass, field
from typing import Protocol

from chazbot.errors import InputError, NotFound, PermissionDenied
from chazbot.memory.audience import Audience

log = logging.getLogger(__name__)

ASK = (
    "🔧 {agent} wants to run {tool}({args}) for {person}. React ✅ to allow or ❌ to deny, "
    "or write {prefix}approve / {prefix}deny ({minutes} to answer; {id})."
)
TIMED_OUT = "Nobody answered within {minutes}: {tool} was not run ({id})."
MAX_PENDING_PER_ROOM = 8


def span(seconds: float) -> str:
    """``300`` → ``5 min``, ``20`` → ``20 s``."""
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


@dataclass(frozen=True)
class Request:
    """What a prompt shows: the agent, the tool, its arguments (cut), who started the turn."""

    id: str
    session: str
    agent: str
    tool: str
    args: str
    person: str
    timeout_s: float

    def text(self, prefix: str) -> str:
        return ASK.format(
            agent=self.agent,
            tool=self.tool,
            args=self.args,
            person=self.person,
            prefix=prefix,
            minutes=span(self.timeout_s),
            id=self.id,
        )


class RoomLink(Protocol):
    """What a transport offers approvals in its sessions."""

    prefix: str
    """How commands are written there (``!chaz ``)."""

    async def prompt(self, request: Request) -> str | bool | None:
        """Put ``request`` to the room: a reference an answer names (a Matrix event id), or
        the decision itself (the terminal's y/n), or None when it could not be put."""
        ...

    async def tell(self, session: str, text: str) -> None: ...

    async def readers(self, session: str) -> Audience | None:
        """Who reads the room now (the owner rule is decided at the call); None: unknown."""
        ...


@dataclass(frozen=True)
class Decision:
    approved: bool
    how: str  # approved, denied, timed out, no one to ask
    by: str = ""


@dataclass
class _Waiting:
    request: Request
    ref: str | None
    future: asyncio.Future[Decision]


@dataclass
class Approvals:
    """The calls waiting for an answer, per session, and the transports' links."""

    timeout_s: float = 300.0
    links: dict[str, RoomLink] = field(default_factory=dict)
    _waiting: dict[str, _Waiting] = field(default_factory=dict)

    def attach(self, session_prefix: str, link: RoomLink) -> None:
        """Sessions named ``<session_prefix>…`` are asked through ``link``."""
        self.links[session_prefix] = link

    def detach(self, session_prefix: str) -> None:
        self.links.pop(session_prefix, None)

    def link_for(self, session: str) -> RoomLink | None:
        for prefix, link in self.links.items():
            if session.startswith(prefix):
                return link
        return None

    def waiting_in(self, session: str) -> list[Request]:
        return [w.request for w in self._waiting.values() if w.request.session == session]

    def is_prompt(self, ref: str) -> bool:
        """Whether ``ref`` (an event id) is a prompt still waiting."""
        return any(w.ref == ref for w in self._waiting.values())

    async def ask(self, session: str, agent: str, tool: str, args: str, person: str) -> Decision:
        """Ask the room and wait for the answer (or the deadline)."""
        link = self.link_for(session)
        if link is None:
            return Decision(False, "no one to ask")
        if len(self.waiting_in(session)) >= MAX_PENDING_PER_ROOM:
            return Decision(False, "too many waiting")
        request = Request(
            "a" + secrets.token_hex(3), session, agent, tool, args, person, self.timeout_s
        )
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        waiting = self._waiting[request.id] = _Waiting(request, None, future)
        try:
            try:  # waiting already: an answer may come at once
                answer = await link.prompt(request)
            except Exception as exc:  # the room could not be asked: denied
                log.warning("tools: could not ask in %s: %s", session, exc)
                answer = None
            if isinstance(answer, bool) and not future.done():
                future.set_result(Decision(answer, "approved" if answer else "denied", person))
            elif answer is None and not future.done():
                return Decision(False, "could not ask")
            waiting.ref = answer if isinstance(answer, str) else None
            async with asyncio.timeout(self.timeout_s):
                return await asyncio.shield(future)
        except TimeoutError:
            pass
        finally:
            self._waiting.pop(request.id, None)
        told = TIMED_OUT.format(minutes=span(self.timeout_s), tool=tool, id=request.id)
        with contextlib.suppress(Exception):
            await link.tell(session, told)
        return Decision(False, "timed out")

    def answer(
        self, session: str, who: str, is_admin: bool, approve: bool, ref: str | None = None
    ) -> Request:
        """Answer a waiting call of ``session``: the one ``ref`` names (its id, or the
        prompt's event id), else the only one waiting. NotFound when nothing waits (it may
        have timed out: then nothing changes), PermissionDenied for someone who may not."""
        here = [w for w in self._waiting.values() if w.request.session == session]
        if ref is not None:
            here = [w for w in here if ref in (w.request.id, w.ref)]
        if not here:
            raise NotFound("nothing here waits for an answer (it may have timed out already)")
        if len(here) > 1:
            ids = ", ".join(w.request.id for w in here)
            raise InputError(f"several calls wait here ({ids}); name one: approve <id>")
        waiting = here[0]
        request = waiting.request
        if who != request.person and not is_admin:
            raise PermissionDenied(f"only {request.person} (who asked) or an admin may answer")
        if waiting.future.done():
            raise NotFound("that call was answered already")
        waiting.future.set_result(Decision(approve, "approved" if approve else "denied", who))
        log.info(
            "tools: %s %s %s in %s", who, "approved" if approve else "denied", request.tool, session
        )
        return request


__all__ = ["ASK", "TIMED_OUT", "Approvals", "Decision", "Request", "RoomLink"]

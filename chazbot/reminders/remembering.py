"""What a delivered reminder may add from memory (#37): "call Ines — she moved to Porto last
month".

At delivery the reminder's words (stopwords dropped, as auto-recall's query) are recalled in
the agent's memory as heard in the room it goes to, by the people in that room *now*
(``MemoryScope.within`` with the room's current audience: the rule of a reply, SPEC §5c,
fail closed), then in the banks its auto-recall reads there, with the agent's relevance floor;
at most ``NOTE_LINES`` short lines of what was said, nothing when nothing is relevant. A row
that is itself the request for the reminder ("remind me to call Ines") adds nothing; without
a relevance floor (an embedder with no measured one) a row must share a word with it.
"""

from __future__ import annotations

from collections.abc import Sequence

from chazbot.errors import NotFound, PermissionDenied
from chazbot.memory.rows import Hit, said_text
from chazbot.memory.scope import MemoryScope
from chazbot.memory.tokenize import STOPWORDS, tokenize
from chazbot.reminders.when import asks_for_reminder

NOTE_LINES = 2
NOTE_CHARS = 160
"""Characters of one line of memory shown with a reminder."""


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= NOTE_CHARS else line[: NOTE_CHARS - 1].rstrip() + "…"


async def related(
    memory: MemoryScope, what: str, banks: Sequence[str] = (), limit: int = NOTE_LINES
) -> list[str]:
    """Up to ``limit`` short lines of memory relevant to ``what`` that ``memory``'s audience
    may be told, from own memory, then ``banks`` (DB ids the agent reads in that room, as its
    auto-recall does); [] when none passes (recall without words would list the newest rows)."""
    words = [t for t in dict.fromkeys(tokenize(what)) if t not in STOPWORDS]
    if not words or memory.hearing.audience is None:
        return []  # no words to match, or the operator's full view: never at delivery
    floor = await memory.engine.agent_floor(memory.db)
    hits: list[Hit] = []
    for bank in (None, *banks):
        try:
            hits += await memory.recall(" ".join(words), limit=limit + 2, bank=bank)
        except (NotFound, PermissionDenied):
            continue  # a bank deleted or its grant revoked since it was chosen
    found: list[str] = []
    for hit in hits:
        said = said_text(hit.value)
        if asks_for_reminder(said) is not None or what.casefold() in said.casefold():
            continue  # the request itself, not something known about it
        if floor is None and not set(words) & set(tokenize(hit.key + " " + said)):
            continue  # no floor to judge a row found by meaning alone: words must meet
        line = _short(said)
        if line and line not in found:
            found.append(line)
        if len(found) == limit:
            break
    return found


__all__ = ["NOTE_CHARS", "NOTE_LINES", "related"]

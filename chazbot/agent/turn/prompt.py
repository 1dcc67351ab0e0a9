"""Stage 2 of a turn: recall and the prompt.

The conversation this room's readers may see (``Session.history``, trimmed to a budget), the
auto-recall block of what memory holds about it (``auto_recall``, within the audience), and the
system prompt: the agent's own, the date in the sender's zone for a model with tools, and the
rule for memories (or, nothing recalled for a question, that it must not guess). The recalled
block goes after the conversation as a user-role message, never a system one: memories are what
people said, data for the model, and the system prompt says so (SPEC §5).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from chazbot import metrics
from chazbot.agent import asked
from chazbot.agent.grounding import equivalents
from chazbot.agent.pictures import picture_parts
from chazbot.agent.recall import (
    DEFAULT_TUNING,
    MEMORY_RULE,
    RecallTuning,
    focus_query,
    format_block,
    fuse_rankings,
    recall_banks,
    recall_query,
    recall_settings,
)
from chazbot.agent.turn.context import Incoming, TurnContext
from chazbot.agent.turn.result import TurnResult
from chazbot.agent.words import asks, personal
from chazbot.errors import InputError, NotFound
from chazbot.memory.rows import MemoryRow
from chazbot.reminders.when import zone

if TYPE_CHECKING:
    from chazbot.agent.host import AgentHandle, MemoryHost
    from chazbot.agent.session import Session
    from chazbot.memory.scope import MemoryScope
    from chazbot.memory.view import MemoryView

log = logging.getLogger("chazbot.agent.turn")

NOTHING_RECALLED = (
    "Nothing in your memory matches this message. If it asks about the person or something "
    "they told you, say plainly that you don't know (they have not told you) and ask them; "
    "never guess or make it up."
)
"""Added to the system prompt when a question finds no memories (SPEC §5)."""
NOW_LINE = "Now it is {now} in {tz}, the person's time zone."
"""Added to the system prompt of a model with tools, so "next Friday" becomes a date (#37)."""
HISTORY_CHAR_BUDGET = 24_000  # about 6k tokens of conversation
HISTORY_MAX_MESSAGES = 100


@dataclass
class Prompt:
    """What the model is sent (``messages``), the memory rows it was shown (``shown``, for the
    answer check) and how many auto-recall found (``hits``)."""

    messages: list[dict[str, Any]]
    shown: list[MemoryRow] = field(default_factory=list)
    hits: int = 0


async def recall_and_prompt(ctx: TurnContext, said: Incoming) -> Prompt | TurnResult:
    """The messages for the model; a small model asked about the person with nothing
    recalled is answered here that it does not know (it would invent, #17), in the person's
    language. Pictures go as image content to a model that sees (``ModelCan.vision``)."""
    text = said.text
    heard = ctx.readers  # under a closed history, what a newcomer could not read
    readable = [m for m in await ctx.session.history() if heard is None or heard.reads_from(m.ts)]
    history = _trim([{"role": m.role, "content": m.content} for m in readable])
    contents = [m["content"] for m in history]
    keep = None
    if not ctx.can.tools and asks(text) and personal(text):
        # A small model asked about the person answers from whatever it is shown: rows that
        # share only attribute words with the question ("name") are false friends (#17).
        def keep(row: MemoryRow) -> bool:
            return not asked.false_friend(row, text)

    shown: list[MemoryRow] = []
    # the words of the five languages for what a question about the person asks ("my
    # neighbour" finds "mijn buurman"), whatever the model: a composing one answers from
    # what it is shown, and the answer check reads the same rows (#45)
    also = " ".join(equivalents(text)) if asks(text) and personal(text) else ""
    block, hits = await auto_recall(
        ctx.peer,
        ctx.agent,
        ctx.session,
        contents,
        ctx.memory,
        ctx.sender,
        keep,
        shown,
        ctx.tuning,
        also,
    )
    prompt = ctx.agent.config.system_prompt
    if ctx.can.tools:
        prompt = f"{prompt}\n\n{now_line(ctx.clock(), ctx.zone)}"
    if block is not None:
        prompt = f"{prompt}\n\n{MEMORY_RULE}"
    elif asks(text):
        if not ctx.can.tools and personal(text):
            unknown = asked.dont_know(text)
            await ctx.say(unknown)
            return TurnResult(unknown)
        prompt = f"{prompt}\n\n{NOTHING_RECALLED}"
    messages: list[dict[str, Any]] = [{"role": "system", "content": prompt}, *history]
    if said.pictures and ctx.can.vision and messages[-1].get("role") == "user":
        messages[-1] = {"role": "user", "content": picture_parts(text, said.pictures)}
    if block is not None:
        messages.append({"role": "user", "content": block})
        log.debug("auto-recall for %s in %s:\n%s", ctx.agent.name, ctx.session.name, block)
    return Prompt(messages, shown, hits)


async def auto_recall(
    peer: MemoryHost,
    agent: AgentHandle,
    session: Session,
    messages: list[str],
    memory: MemoryScope | None = None,
    reader: str = "",
    keep: Callable[[MemoryRow], bool] | None = None,
    shown: list[MemoryRow] | None = None,
    tuning: RecallTuning = DEFAULT_TUNING,
    also: str = "",
) -> tuple[str | None, int]:
    """The auto-recall block for this turn (None when nothing matched) and the hit count.

    ``memory`` is the agent's memory as heard in this session (``MemoryScope.within``): only
    rows its audience may be told are searched (SPEC §5c); default the agent's own view.
    ``shown`` gets every row the block holds (for the check of the answer, ``grounding``).
    ``tuning``: how the queries are built (``RecallTuning``); each store is ranked as the
    engine ranks (``MemoryEngine.ranking``). ``also``: words searched as a third ranking
    (``grounding.equivalents`` of a question about the person, in the other languages)."""
    memory = memory if memory is not None else agent.memory
    settings = await recall_settings(peer.ledger, agent.db)
    query = recall_query(messages, tuning)
    if not settings.enabled or not query:
        return None, 0
    engine = peer.memory
    ranking = engine.ranking
    limit, floor = settings.max_entries, engine.similarity_floor(settings.min_similarity)
    focus = focus_query(messages, tuning)
    texts = [q for q in dict.fromkeys([focus, query]) if q]
    if tuning.one_query_vector and focus:
        vector = await engine.query_vector(focus)
        queries = [(q, vector) for q in texts]
    else:
        queries = [(q, await engine.query_vector(q)) for q in texts]
    if also and also not in texts:  # the subject's words in other languages: BM25 alone
        queries.append((also, None))

    async def search(db: str) -> list[MemoryRow]:
        view = await engine.view(db)
        heard = await memory.filtered(db)
        started = time.perf_counter()

        def ranked(view: MemoryView) -> list[MemoryRow]:  # a big view's on a search thread
            if len(queries) == 1:
                q, v = queries[0]
                return [r.row for r in view.search(q, (), limit, v, heard, floor, ranking)]
            depth = max(limit, tuning.focus_depth)
            rankings = [
                [r.row for r in view.search(q, (), depth, v, heard, floor, ranking)]
                for q, v in queries
            ]
            return fuse_rankings(rankings, limit)

        found = await engine.searches.run(view, ranked)
        metrics.RECALL_SECONDS.observe(time.perf_counter() - started)
        return found

    own = await search(agent.db)
    defaults = agent.config.default_memory_banks
    found: list[tuple[str, list[MemoryRow]]] = []
    for name, db in await recall_banks(peer.ledger, session, memory, defaults, settings):
        try:
            found.append((name, await search(db)))
        except NotFound:  # deleted meanwhile
            continue
    if keep is not None:  # a small model's view, narrowed (see ``recall_and_prompt``)
        own = [r for r in own if keep(r)]
        found = [(name, [r for r in rows if keep(r)]) for name, rows in found]
    hits = len(own) + sum(len(rows) for _, rows in found)
    if shown is not None:
        shown += own + [r for _, rows in found for r in rows]
    return format_block(own, found, memory.hearing.audience, reader), hits


def now_line(moment: datetime, tz: str) -> str:
    """The date, weekday and time of ``moment`` in the zone ``tz``, for the system prompt
    (UTC when ``tz`` is no zone: a value synced from elsewhere never fails the turn)."""
    try:
        local = moment.astimezone(zone(tz))
    except InputError:
        tz, local = "UTC", moment.astimezone(UTC)
    return NOW_LINE.format(now=local.strftime("%A %d %B %Y, %H:%M"), tz=tz)


def _trim(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kept: list[dict[str, Any]] = []
    used = 0
    for message in reversed(history[-HISTORY_MAX_MESSAGES:]):
        used += len(message["content"])
        if used > HISTORY_CHAR_BUDGET and kept:
            break
        kept.append(message)
    return list(reversed(kept))


__all__ = [
    "HISTORY_CHAR_BUDGET",
    "HISTORY_MAX_MESSAGES",
    "NOTHING_RECALLED",
    "NOW_LINE",
    "Prompt",
    "auto_recall",
    "now_line",
    "recall_and_prompt",
]

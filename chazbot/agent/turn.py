"""One turn of one agent: history + auto-recall block → LLM → tool calls → reply."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from chazbot import metrics
from chazbot.agent import asked
from chazbot.agent.chat_model import ChatModel
from chazbot.agent.grounding import equivalents, evidence, grounded
from chazbot.agent.pictures import CANNOT_SEE, Picture, picture_parts
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
from chazbot.agent.words import asks, intent, personal
from chazbot.errors import BackendError, InputError, NotFound
from chazbot.memory.rows import MemoryRow
from chazbot.memory.tools import TOOLS, run_tool
from chazbot.reminders.setting import set_reminder
from chazbot.reminders.store import Reminders, person_cap
from chazbot.reminders.tools import TOOLS as REMINDER_TOOLS
from chazbot.reminders.tools import Asking, run_reminder_tool
from chazbot.reminders.when import asks_for_reminder, zone

if TYPE_CHECKING:
    from chazbot.agent.host import AgentHandle, MemoryHost
    from chazbot.agent.session import Session
    from chazbot.memory.scope import MemoryScope
    from chazbot.memory.view import MemoryView

log = logging.getLogger(__name__)

NO_LLM = (
    "No LLM is configured: set llm: in config.yaml or install chazbot[local]. "
    "Commands still work (try help)."
)
NOTHING_RECALLED = (
    "Nothing in your memory matches this message. If it asks about the person or something "
    "they told you, say plainly that you don't know (they have not told you) and ask them; "
    "never guess or make it up."
)
"""Added to the system prompt when a question finds no memories (SPEC §5)."""
KNOWN_TOOLS = frozenset(TOOLS) | frozenset(REMINDER_TOOLS)
"""Every tool a turn may offer: the only names a metric label may carry."""
NOW_LINE = "Now it is {now} in {tz}, the person's time zone."
"""Added to the system prompt of a model with tools, so "next Friday" becomes a date (#37)."""
WORDS_MAX_CHARS = 2_000
"""A message longer than this is no request in words (forget, remember, undo…): it goes to the
model. The word rules read every clause of a message, and on tens of KB of punctuation they took
seconds (a 60 KB message of dots held the event loop 3.3 s); they run off the loop as well."""
EVIDENCE_LINE_CHARS = 2_000
"""What the answer check reads of each line the model was shown: a row of 16 KiB built to be
slow ("my son is my son …") took 16 s to check; cutting only ever makes the check stricter."""
HISTORY_CHAR_BUDGET = 24_000  # about 6k tokens of conversation
HISTORY_MAX_MESSAGES = 100


@dataclass
class TurnResult:
    text: str
    ok: bool = True
    tool_calls: list[tuple[str, bool]] = field(default_factory=list)  # (tool, ok)
    recalled: int = 0
    llm_seconds: float = 0.0
    answered_in_words: bool = False  # an intent answered it (nothing for capture to keep)
    withheld: str | None = None  # the model's reply the answer check replaced (never sent)


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
    if keep is not None:  # a small model's view, narrowed (see ``run_turn``)
        own = [r for r in own if keep(r)]
        found = [(name, [r for r in rows if keep(r)]) for name, rows in found]
    hits = len(own) + sum(len(rows) for _, rows in found)
    if shown is not None:
        shown += own + [r for _, rows in found for r in rows]
    return format_block(own, found, memory.hearing.audience, reader), hits


def agent_dbs(peer: MemoryHost) -> tuple[str, ...]:
    """Every hosted agent's DB: a person's reminder cap counts them all (#47)."""
    return tuple(a.db for a in peer.agents.values())


def _utc_now() -> datetime:
    return datetime.now(UTC)


def now_line(moment: datetime, tz: str) -> str:
    """The date, weekday and time of ``moment`` in the zone ``tz``, for the system prompt
    (UTC when ``tz`` is no zone: a value synced from elsewhere never fails the turn)."""
    try:
        local = moment.astimezone(zone(tz))
    except InputError:
        tz, local = "UTC", moment.astimezone(UTC)
    return NOW_LINE.format(now=local.strftime("%A %d %B %Y, %H:%M"), tz=tz)


def tool_label(name: str) -> str:
    """The metric label of a tool call: its name when the turn offers such a tool, else
    ``unknown`` (the name comes from the model, and a prompt injection could send endless
    made-up names, each a new time series)."""
    return name if name in KNOWN_TOOLS else "unknown"


async def _grounded(question: str, reply: str, told: list[str]) -> bool:
    """``grounding.grounded`` off the event loop, each line it reads bounded
    (``EVIDENCE_LINE_CHARS``; of a long question its end, where the question is)."""
    cut = ["\n".join(line[:EVIDENCE_LINE_CHARS] for line in t.splitlines()) for t in told]
    return await asyncio.to_thread(grounded, question[-WORDS_MAX_CHARS:], reply, cut)


def _trim(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kept: list[dict[str, Any]] = []
    used = 0
    for message in reversed(history[-HISTORY_MAX_MESSAGES:]):
        used += len(message["content"])
        if used > HISTORY_CHAR_BUDGET and kept:
            break
        kept.append(message)
    return list(reversed(kept))


async def run_turn(
    peer: MemoryHost,
    agent: AgentHandle,
    session: Session,
    text: str,
    sender: str,
    llm: ChatModel | None,
    memory: MemoryScope | None = None,
    timezone: str = "UTC",
    pictures: Sequence[Picture] = (),
    acknowledge: bool = False,
    tuning: RecallTuning = DEFAULT_TUNING,
    clock: Callable[[], datetime] = _utc_now,
) -> TurnResult:
    """Answer one user message; tool errors go back to the model, never to the user.

    "remind me …" (in the languages of ``reminders.when``) sets a reminder in this room for
    every model, read in the sender's zone (``timezone`` when they set none).

    ``pictures`` (a photo sent in Matrix, ``text`` its caption) go to a model that sees
    (``llm.vision``) as image content beside the text; another model is told nothing of them
    and the reply says plainly that it cannot see pictures (#39).

    ``memory``: the agent's memory as heard in this session (``MemoryScope.within``); recall
    and every tool the model calls act within its audience, and answers that name a command
    write it as it is written there (``memory.hearing.prefix``). The recalled block goes after
    the conversation as a user-role message, never a system one: memories are what people
    said, data for the model, and the system prompt says so (SPEC §5).

    ``acknowledge`` (capture keeps what is told here): a message that tells one fact gets
    "Noted: …" in the person's own words, for every model, and is captured as usual.

    ``tuning``: how auto-recall builds its queries (``RecallTuning``; benches pass theirs).

    A model with tools is told the date, weekday and time in the sender's zone (``clock``:
    now, injected by tests), so it can turn "next Friday" into a date for ``schedule_once``."""
    memory = memory if memory is not None else agent.memory
    await session.add_message("user", text, sender)
    tools_ok = bool(getattr(llm, "supports_tools", False))
    if asks_for_reminder(text) is not None:
        store = Reminders(peer.ledger, agent.db, agent.key)
        said: str | None
        try:
            cap = person_cap(agent_dbs(peer), admin=False)
            said = await set_reminder(
                store, text, session.name, sender, timezone, cap, origin=memory.hearing.origin
            )
        except InputError as exc:
            said = None if asks(text) else f"{exc} (nothing was set)"
        if said is not None:
            await session.add_message("assistant", said, agent.name)
            return TurnResult(said, answered_in_words=True)
    found = await asyncio.to_thread(intent, text) if len(text) <= WORDS_MAX_CHARS else None
    if found is not None:
        callable_tools = frozenset(agent.config.allowed_tools) if tools_ok else frozenset()
        words = await asked.answer(found, memory, agent.name, sender, callable_tools, session)
        if words is not None:
            await session.add_message("assistant", words, agent.name)
            return TurnResult(words, answered_in_words=True)
    noted = asked.acknowledgement(text, (agent.name,)) if acknowledge and not pictures else None
    if noted is not None:
        await session.add_message("assistant", noted, agent.name)
        return TurnResult(noted)
    if llm is None:
        return TurnResult(NO_LLM, ok=False)
    heard = memory.hearing.audience  # under a closed history, what a newcomer could not read
    readable = [m for m in await session.history() if heard is None or heard.reads_from(m.ts)]
    history = [{"role": m.role, "content": m.content} for m in readable]
    history = _trim(history)
    contents = [m["content"] for m in history]
    keep = None
    if not tools_ok and asks(text) and personal(text):
        # A small model asked about the person answers from whatever it is shown: rows that
        # share only attribute words with the question ("name") are false friends (#17).
        def keep(row: MemoryRow) -> bool:
            return not asked.false_friend(row, text)

    shown: list[MemoryRow] = []
    also = " ".join(equivalents(text)) if keep is not None else ""
    block, hits = await auto_recall(
        peer, agent, session, contents, memory, sender, keep, shown, tuning, also
    )
    prompt = agent.config.system_prompt
    store = Reminders(peer.ledger, agent.db, agent.key)
    if tools_ok:
        prompt = f"{prompt}\n\n{now_line(clock(), await store.zone_of(sender, timezone))}"
    if block is not None:
        prompt = f"{prompt}\n\n{MEMORY_RULE}"
    elif asks(text):
        if not tools_ok and personal(text):
            # a small model asked about the person with nothing recalled invents (#17)
            unknown = asked.dont_know(text)
            await session.add_message("assistant", unknown, agent.name)
            return TurnResult(unknown)
        prompt = f"{prompt}\n\n{NOTHING_RECALLED}"
    messages: list[dict[str, Any]] = [{"role": "system", "content": prompt}]
    messages += history
    sees = bool(getattr(llm, "vision", False))
    if pictures and sees and messages[-1].get("role") == "user":
        messages[-1] = {"role": "user", "content": picture_parts(text, pictures)}
    if block is not None:
        messages.append({"role": "user", "content": block})
        log.debug("auto-recall for %s in %s:\n%s", agent.name, session.name, block)
    allowed = [t for t in agent.config.allowed_tools if t in TOOLS or t in REMINDER_TOOLS]
    tools = [(TOOLS.get(t) or REMINDER_TOOLS[t]).schema() for t in allowed] or None
    heard = memory.hearing.audience  # reminder tools act for the sender, in this room (#37)
    asking = Asking(
        store,
        session.name,
        sender,
        heard is None or heard.full,  # the operator's turn; a room's model never acts as admin
        timezone,
        heard,
        memory.hearing.origin,
        clock,
        agent_dbs(peer),
    )
    result = TurnResult("", recalled=hits)
    told = [evidence(r) for r in shown]  # what the model was shown of memory
    reply: str | None = None
    for _ in range(agent.config.max_iterations):
        started = time.perf_counter()
        try:
            answer = await llm.complete(messages, tools, model=agent.config.model)
        except BackendError as exc:
            result.llm_seconds += time.perf_counter() - started
            result.text, result.ok = f"The language model failed: {exc}", False
            return result
        result.llm_seconds += time.perf_counter() - started
        if not answer.tool_calls:
            reply = answer.content or ""
            break
        messages.append(
            {
                "role": "assistant",
                "content": answer.content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in answer.tool_calls
                ],
            }
        )
        for call in answer.tool_calls:
            if call.name in REMINDER_TOOLS:
                ok, output = await run_reminder_tool(
                    asking, agent.config.allowed_tools, call.name, call.arguments
                )
            else:
                ok, output = await run_tool(
                    memory, agent.config.allowed_tools, call.name, call.arguments
                )
            result.tool_calls.append((call.name, ok))
            if call.name == "recall" and ok:
                told.append(output)
            log.info("tool %s by %s: %s", call.name, agent.name, "ok" if ok else output)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    if reply is None:
        reply = f"I stopped after {agent.config.max_iterations} steps without a final answer."
    reply = reply.strip() or "(no reply)"
    if pictures and not sees:
        reply = f"{CANNOT_SEE} {reply}" if text.strip() else CANNOT_SEE
    if asks(text) and personal(text) and not await _grounded(text, reply, told):
        log.info("turn agent=%s: a reply about the person stood on nothing shown", agent.name)
        # an answer about the person needs a row about it (#36), in the person's language
        bounded = [replace(r, value=r.value[:EVIDENCE_LINE_CHARS]) for r in shown]
        result.withheld = reply
        reply = await asyncio.to_thread(
            asked.unsupported, text[-WORDS_MAX_CHARS:], bounded, memory, sender
        )
    await session.add_message("assistant", reply, agent.name)
    result.text = reply
    return result

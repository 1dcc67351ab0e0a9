"""Capture: agents remember what people tell them without calling a tool (SPEC §5b).

After a turn the agent answered (never a command), capture writes ordinary memory rows into
the agent's own DB, never into a bank, so they are searched, forgotten and exported like
any other row. Per agent ``capture:``:

- ``messages``: the message itself, one row, shaped to stand alone in recall: the key names
  the speaker by full MXID, the date and a short id (``@alice:example.org/2026-12-02/3f9a01c2``,
  no spaces, so it is easy to ``forget``); the value says who said it when, and what it
  replied to when that is needed to make sense of it (``@alice:example.org (2026-12-02): my
  sister Ada lives in Lyon [replying to chaz: Where does your family live?]``). A full MXID,
  never a localpart: ``@alice:evil.org`` is not ``@alice:example.org``. What it replied to
  is the newest message by another person since the speaker last spoke, else the agent's
  last reply. The agent's own
  reply is kept only when it asked something or the message is a fragment (``Lyon``): its
  statements are its model's words, noise that recall brought back and a small model
  repeated (bench/localchat.py --capture: fewer answers right with them kept; figures in
  docs/measured.md, "The built-in chat models").
- ``facts``: one more call to a tool-capable chat model turns the turn into key/value rows;
  it is shown the closest existing memories said by the same speaker (by recall, within the
  turn's audience) and told to reuse their keys, so an update replaces a row instead of
  adding a near-duplicate. Keys live in the speaker's namespace (``@alice:example.org/iban``)
  and values end with who said it when, so another speaker's statement never replaces them.
- ``auto`` (the default): ``facts`` when the chat model calls tools (an OpenAI-compatible
  backend), else ``messages`` (the embedded model). ``facts`` without a tool-capable model
  falls back to ``messages``.

Everything is bounded (message length, context length, rows per turn, key and value sizes),
and a failure is one log line: it never breaks the turn.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from chazbot.agent.chat_model import ChatModel
from chazbot.agent.recall import focus_query
from chazbot.agent.session import Message
from chazbot.agent.words import keep_out, worth_keeping
from chazbot.errors import ChazError
from chazbot.memory.rows import MAX_KEY_CHARS, Hit, row_text
from chazbot.memory.tokenize import tokenize

if TYPE_CHECKING:
    from chazbot.agent.host import AgentHandle
    from chazbot.agent.session import Session
    from chazbot.memory.scope import MemoryScope

log = logging.getLogger(__name__)

Mode = Literal["off", "messages", "facts"]

CAPTURE_TAG = "captured"
MAX_MESSAGE_CHARS = 2000
"""A longer message is stored cut to this many characters (and an ellipsis)."""
MAX_CONTEXT_CHARS = 300
SHORT_MESSAGE_TOKENS = 2
"""A message of at most this many words ("Lyon", "next Friday") is stored with what it
replied to, whatever that was: alone it means nothing. ("I drive a blue Volvo" is 3.)"""
MAX_SPEAKER_CHARS = 200
"""A speaker's name in a key (an MXID is at most 255; a key at most 256 with the rest)."""
MAX_FACTS_PER_TURN = 5
MAX_FACT_KEY_CHARS = 120
MAX_FACT_VALUE_CHARS = 1000
CLOSE_MEMORIES = 8
"""Existing memories shown to the facts model so it reuses their keys."""
HISTORY_LOOKBACK = 30
EDIT_LOOKBACK = 200
"""An edited message is looked for among this many of the session's newest messages (an
older one's rows are forgotten, its new words not captured)."""
FACTS_TOOL = "save_memories"

FACTS_PROMPT = (
    "You keep the long-term memory of {agent}, an assistant. From the conversation turn "
    "below, pick out durable facts worth remembering about the people and what they care "
    "about: names, relations, places, dates, plans, preferences, decisions, and anything "
    "they ask to be remembered. Skip greetings, questions and small talk. Call "
    f"{FACTS_TOOL} once with every fact as a key (a short lowercase topic such as "
    "'alice.sister') and a value (one self-contained sentence naming the person). When an "
    "existing memory covers the same topic, reuse its key exactly, with the updated value. "
    "Do not repeat a memory that is unchanged. If nothing is worth keeping, call no tool."
)
FACTS_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": FACTS_TOOL,
        "description": "Store or update long-term memories (key/value pairs).",
        "parameters": {
            "type": "object",
            "properties": {
                "memories": {
                    "type": "array",
                    "maxItems": MAX_FACTS_PER_TURN,
                    "items": {
                        "type": "object",
                        "properties": {
                            "key": {"type": "string", "maxLength": MAX_FACT_KEY_CHARS},
                            "value": {"type": "string", "maxLength": MAX_FACT_VALUE_CHARS},
                        },
                        "required": ["key", "value"],
                    },
                }
            },
            "required": ["memories"],
        },
    },
}
_PROVENANCE = re.compile(r"\s*\([^()]{1,260},\s*\d{4}-\d{2}-\d{2}\)\s*$")


def effective_mode(configured: str, llm: ChatModel | None) -> Mode:
    """The mode an agent's ``capture:`` setting means with this chat model."""
    tools = llm is not None and llm.supports_tools
    if configured == "off":
        return "off"
    if configured == "messages" or not tools:
        return "messages"
    return "facts"


async def capture_mode(agent: AgentHandle, session: Session | None, llm: ChatModel | None) -> Mode:
    """What capture does for ``agent`` with ``llm`` (in ``session``, whose ``/memory capture
    on|off`` switch may override the agent's setting)."""
    return switched_mode(agent, await session.capture() if session is not None else None, llm)


def switched_mode(agent: AgentHandle, switch: bool | None, llm: ChatModel | None) -> Mode:
    """``capture_mode`` with the session's switch already read (a turn reads it once)."""
    configured = effective_mode(agent.config.capture, llm)
    if switch is False:
        return "off"
    if switch is True and configured == "off":
        return effective_mode("auto", llm)
    return configured


def speaker_name(sender: str) -> str:
    """How a row names the sender: the full MXID (SPEC §5b: ``@alice:evil.org`` is not the
    local alice), or the terminal's name for its user."""
    name = " ".join(sender.split())[:MAX_SPEAKER_CHARS]
    return name or "someone"


def fact_key(speaker: str, topic: str) -> str:
    """A fact's key in its speaker's namespace (``@alice:example.org/iban``)."""
    prefix = "_".join(speaker.split()) + "/"
    topic = topic.removeprefix(prefix)
    return (prefix + topic)[:MAX_KEY_CHARS]


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class Said:
    """One message as capture sees it: who, when, what, and what it replied to."""

    speaker: str
    when: datetime
    text: str
    replied_to: tuple[str, str] | None  # (speaker, text)
    source_id: str  # stable per message: the key's short id

    @property
    def date(self) -> str:
        return self.when.astimezone(UTC).date().isoformat()


def message_row(said: Said) -> tuple[str, str, list[str]]:
    """The ``(key, value, tags)`` of a ``messages`` capture: a row that stands alone."""
    key = f"{'_'.join(said.speaker.split())}/{said.date}/{said.source_id}"
    value = _said_line(said)
    if said.replied_to is not None:
        who, text = said.replied_to
        value += f" [replying to {who}: {_one_line(text, MAX_CONTEXT_CHARS)}]"
    return key, value, [CAPTURE_TAG]


def _said_line(said: Said) -> str:
    return f"{said.speaker} ({said.date}): {_one_line(said.text, MAX_MESSAGE_CHARS)}"


VectorShape = Literal["context", "value", "said", "text"]
VECTOR_SHAPE: VectorShape = "context"
"""What a ``messages`` row's vector is of: ``context`` (kept), the whole row as the memory
layer embeds any row (``rows.row_text``, its ``[replying to …]`` included); ``value``, the
value without the key; ``said``, the key and ``<who> (<date>): <text>``; ``text``, the
message alone. The row itself is the same whatever the shape. Measured through the product
on LoCoMo's dev split (bench/locomo_capture.py, capture hybrid recall@10): every cheaper
shape loses more than 0.01, so the vector stays of the whole row (figures in docs/memory.md,
"Capture under load")."""


def message_vector_text(said: Said, shape: VectorShape | None = None) -> str:
    """The text a ``messages`` capture's vector is of (``shape``: ``VECTOR_SHAPE``)."""
    shape = shape or VECTOR_SHAPE
    if shape == "text":
        return _one_line(said.text, MAX_MESSAGE_CHARS)
    key, value, _ = message_row(said)
    if shape == "value":
        return value
    return row_text(key, value, said.speaker) if shape == "context" else f"{key} {_said_line(said)}"


def needs_context(text: str, replied: Message) -> bool:
    """Whether the row of ``text`` says what it replied to: always when that was another
    person's message; the agent's own reply only when it asked something or ``text`` is a
    fragment that means nothing alone. The agent's statements are its model's words, not
    what anybody told it: stored beside every message, recall brought them back and a small
    model repeated them."""
    if replied.role != "assistant":
        return True
    short = len(tokenize(text[:MAX_MESSAGE_CHARS])) <= SHORT_MESSAGE_TOKENS
    return short or "?" in replied.content


def find_said(
    history: Sequence[Message],
    text: str,
    sender: str,
    session_db: str,
    agent_name: str,
    when: datetime | None = None,
) -> Said | None:
    """The newest message in ``history`` by ``sender`` with ``text``, as a ``Said``.

    What it replied to: the newest message by another person since the sender last spoke
    (people in a group answer each other), else the newest message before it (in a direct
    chat, the agent's last reply).
    """
    index = said_index(history, text, sender)
    if index is None:
        return None
    return said_at(history, index, text, session_db, agent_name, when)


def said_index(history: Sequence[Message], text: str, sender: str) -> int | None:
    """Where the newest message by ``sender`` with ``text`` is in ``history``, or None."""
    found = (
        i
        for i in range(len(history) - 1, -1, -1)
        if history[i].role == "user" and history[i].sender == sender and history[i].content == text
    )
    return next(found, None)


def said_at(
    history: Sequence[Message],
    index: int,
    text: str,
    session_db: str,
    agent_name: str,
    when: datetime | None = None,
    since: int | None = None,
) -> Said:
    """``history[index]`` as a ``Said`` whose words are ``text`` (an edit's new words keep
    the message's place, context and short id); what was said before ``since`` (µs) is not
    quoted (SPEC §5c: under a closed history, someone there now could not read it)."""
    message = history[index]
    sender = message.sender
    replied: Message | None = None
    for earlier in reversed(history[:index]):
        if earlier.role == "user" and earlier.sender == sender:
            break
        if earlier.role == "user":
            replied = earlier
            break
        if replied is None:
            replied = earlier
    context = None
    if replied is not None and since is not None and replied.ts < since:
        replied = None  # said before someone now here came
    if replied is not None and replied.content.strip() and needs_context(text, replied):
        who = agent_name if replied.role == "assistant" else speaker_name(replied.sender)
        context = (who, replied.content)
    digest = hashlib.sha256(f"{session_db}:{message.n}".encode()).hexdigest()[:8]
    moment = when or datetime.fromtimestamp(message.ts / 1_000_000, tz=UTC)
    return Said(speaker_name(sender), moment, text, context, digest)


_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")


def worth_capturing(text: str) -> bool:
    """A message with no word in it (only emoji or punctuation) is not stored."""
    return bool(tokenize(text[:MAX_MESSAGE_CHARS]))


def only_questions(text: str) -> bool:
    """True when every sentence of ``text`` that has a word in it is a question.

    ``messages`` capture does not store such a message: it tells the agent nothing to
    remember, and stored it crowds out the facts it asks about (measured with
    bench/localchat.py: 20 questions asked in one room after 20 facts were told, each stored
    question took a place in later turns' top 3).
    """
    sentences = [s for s in _SENTENCE.findall(text[:MAX_MESSAGE_CHARS]) if tokenize(s)]
    return bool(sentences) and all(s.rstrip().endswith("?") for s in sentences)


# ---- facts --------------------------------------------------------------------------------


def facts_messages(agent_name: str, said: Said, reply: str, close: Sequence[Hit]) -> list[Any]:
    """The chat request that asks the model for facts: instructions, memories, the turn."""
    existing = "\n".join(f"- [{h.key}]: {_one_line(h.value, 300)}" for h in close) or "(none)"
    lines = []
    if said.replied_to is not None:
        who, text = said.replied_to
        lines.append(f"{who}: {_one_line(text, MAX_CONTEXT_CHARS)}")
    lines.append(f"{said.speaker} ({said.date}): {_one_line(said.text, MAX_MESSAGE_CHARS)}")
    lines.append(f"{agent_name}: {_one_line(reply, MAX_CONTEXT_CHARS)}")
    return [
        {"role": "system", "content": FACTS_PROMPT.format(agent=agent_name)},
        {
            "role": "user",
            "content": "Existing memories:\n"
            + existing
            + "\n\nConversation turn:\n"
            + "\n".join(lines),
        },
    ]


def parse_facts(
    arguments: Sequence[str], said: Said, close: Sequence[Hit]
) -> list[tuple[str, str]]:
    """Validated ``(key, value)`` pairs from the model's tool arguments, at most the cap.

    Every key is put in the speaker's namespace (``fact_key``); one that then matches a close
    memory's key up to case and spacing takes that key's exact spelling (an update, not a
    near-duplicate); a value gets ``(speaker, date)`` at its end; a pair equal to the memory
    it would replace is dropped. ``close`` holds only the speaker's own memories.
    """
    known = {" ".join(h.key.casefold().split()): h for h in close}
    out: dict[str, str] = {}
    for raw in arguments:
        try:
            data = json.loads(raw)
        except ValueError:
            continue
        items = data.get("memories") if isinstance(data, dict) else None
        if not isinstance(items, list):
            continue
        for item in items:
            if len(out) >= MAX_FACTS_PER_TURN:
                break
            if not isinstance(item, dict):
                continue
            key, value = item.get("key"), item.get("value")
            if not isinstance(key, str) or not isinstance(value, str):
                continue
            topic = " ".join(key.split())[:MAX_FACT_KEY_CHARS]
            value = _PROVENANCE.sub("", " ".join(value.split()))[:MAX_FACT_VALUE_CHARS]
            if not topic or not value:
                continue
            key = fact_key(said.speaker, topic)
            hit = known.get(key.casefold())
            if hit is not None:
                key = hit.key
                if _PROVENANCE.sub("", hit.value) == value:
                    continue
            out[key] = f"{value} ({said.speaker}, {said.date})"
    return list(out.items())


async def capture_facts(
    agent: AgentHandle,
    llm: ChatModel,
    said: Said,
    reply: str,
    memory: MemoryScope | None = None,
    row_ids: list[str] | None = None,
) -> list[tuple[str, str]]:
    """Ask the model for facts and store them in the agent's own memory; return them.

    ``memory`` is the agent's memory as heard in the turn's room: the model is shown only
    close memories that room may be told and that the same speaker said. The stored rows'
    ids are added to ``row_ids`` when given."""
    memory = memory if memory is not None else agent.memory
    prefix = "_".join(said.speaker.split()) + "/"
    # the message's own words, as the turn's auto-recall searched them: their vector is the
    # one the turn made (the embedder keeps it), not a second embedding of the message (#48)
    words = focus_query([said.text]) or said.text[:MAX_MESSAGE_CHARS]
    found = await memory.recall(words, None, CLOSE_MEMORIES * 4)
    close = [h for h in found if h.key.startswith(prefix)][:CLOSE_MEMORIES]
    messages = facts_messages(agent.name, said, reply, close)
    answer = await llm.complete(messages, [FACTS_SCHEMA], model=agent.config.model)
    raw = [c.arguments for c in answer.tool_calls if c.name == FACTS_TOOL]
    facts = parse_facts(raw, said, close)
    for key, value in facts:  # vectors in a background batch, as for messages
        row_id = await memory.remember(key, value, [CAPTURE_TAG], vector_later=True)
        if row_ids is not None:
            row_ids.append(row_id)
    return facts


# ---- one turn ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Captured:
    """What capture did with one message: the rows it wrote, and the message's number in the
    session history (None when it was not found there, or nothing was looked for)."""

    rows: tuple[str, ...] = ()
    n: int | None = None


async def capture_turn(
    agent: AgentHandle,
    session: Session,
    llm: ChatModel | None,
    mode: Mode,
    text: str,
    sender: str,
    reply: str,
    when: datetime | None = None,
    memory: MemoryScope | None = None,
) -> int:
    """Capture one answered message; the number of rows written. Never raises a ChazError.

    ``memory``: the agent's memory as heard in the turn's room, so each row records where
    it was said and who heard it (SPEC §5c)."""
    found = await capture_message(agent, session, llm, mode, text, sender, reply, when, memory)
    return len(found.rows)


def _kept(text: str, names: tuple[str, ...]) -> bool:
    """The words rules (#17, #36): they read every clause (60 KB of dots: 4.5 s), off the loop."""
    return worth_keeping(text, names) and not keep_out(text)


async def capture_message(
    agent: AgentHandle,
    session: Session,
    llm: ChatModel | None,
    mode: Mode,
    text: str,
    sender: str,
    reply: str,
    when: datetime | None = None,
    memory: MemoryScope | None = None,
    n: int | None = None,
) -> Captured:
    """``capture_turn``, saying which rows it wrote and where the message is in the session
    history (``off``: only that). ``n``: the message's number in the session history, whose
    words are now ``text`` (an edit); else the newest message by ``sender`` with ``text``."""
    memory = memory if memory is not None else agent.memory
    rows: list[str] = []
    index_n: int | None = None
    try:
        history = await session.history(HISTORY_LOOKBACK if n is None else EDIT_LOOKBACK)
        if n is None:
            index = said_index(history, text, sender)
        else:
            index = next((i for i, m in enumerate(history) if m.n == n), None)
        if index is None or history[index].sender != sender:
            return Captured()
        since = memory.hearing.audience.since if memory.hearing.audience else None
        said = said_at(history, index, text, session.db, agent.name, when, since)
        index_n = history[index].n
        if mode == "off":
            return Captured((), index_n)  # where it is: a redaction or an edit finds it
        if not worth_capturing(text) or not await asyncio.to_thread(_kept, text, (agent.name,)):
            return Captured((), index_n)  # greetings, thanks, requests, "off the record"
        facts = mode == "facts" and llm is not None
        if not facts and only_questions(text):
            return Captured((), index_n)
        if facts and llm is not None:
            await capture_facts(agent, llm, said, reply, memory, rows)
            return Captured(tuple(rows), index_n)
        key, value, tags = message_row(said)
        # The row now, for the next turn's BM25; its vector in a background batch, so
        # capture never holds the session (nor a turn's query) behind the embedder.
        row_id = await memory.remember(
            key, value, tags, embed_as=message_vector_text(said), vector_later=True
        )
        return Captured((row_id,), index_n)
    except ChazError as exc:
        log.warning("capture (%s) for %s failed: %s", mode, agent.name, exc)
        return Captured(tuple(rows), index_n)  # what was stored before it failed


__all__ = [
    "CAPTURE_TAG",
    "FACTS_TOOL",
    "Captured",
    "Mode",
    "Said",
    "capture_facts",
    "capture_message",
    "capture_mode",
    "capture_turn",
    "effective_mode",
    "fact_key",
    "find_said",
    "message_row",
    "message_vector_text",
    "needs_context",
    "only_questions",
    "parse_facts",
    "said_at",
    "said_index",
    "speaker_name",
    "switched_mode",
]

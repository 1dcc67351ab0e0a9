"""What a small embedded model is shown: OpenAI messages as plain turns its template and size
cope with, the recalled memories beside the question, and history trimmed to a budget.
"""

from __future__ import annotations

import re
from typing import Any

from chazbot.agent.recall import HEADING as MEMORY_HEADING
from chazbot.agent.recall import MEMORY_RULE, NOTE
from chazbot.agent.words import as_said_to_them, asks

_CHARS_PER_TOKEN = 3  # deliberately low: history is trimmed before llama.cpp has to refuse it
_TOKENS_PER_MESSAGE = 6

# -- messages ----------------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


MEMORY_INTRO = "Facts I told you:"
"""Replaces the ``## Relevant Memories`` heading for a tiny model, next to the question."""
MEMORY_HINT = (
    "Answer in one short sentence, using the facts I told you. If they do not answer it, say "
    "you don't know."
)
"""Added to the system prompt when memories were found: with the memories beside the question
and this hint, the tiny model answered from them best (bench/localchat.py; figures in
docs/measured.md, "The built-in chat models")."""
BRIEF_HINT = "Answer in one or two short sentences."
"""Added to a built-in model's system prompt when no memories are shown: without it the
0.5B model answered a plain statement with a long unasked-for lecture (docs/measured.md,
"The built-in chat models")."""
_ROW = re.compile(r"^- \[[^\]\n]*\](?: \((?P<label>[^()\n]*)\))?: (?P<value>.*)$", re.MULTILINE)
_SAID_HEAD = re.compile(r"^[^()\n]{1,260} \(\d{4}-\d{2}-\d{2}\): ")


def _is_memory_block(content: Any) -> bool:
    """Whether a message's content is auto-recall's ``## Relevant Memories`` block."""
    return _text(content).strip().startswith(MEMORY_HEADING)


def for_builtin(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a built-in (tiny) model is shown: memories only when the message it answers
    asks something, and a hint to be brief otherwise.

    Shown memories beside a statement ("My dog is called Biscuit."), the 0.5B model recited
    them ("Ann's sister lives in Lyon and her name is Ada.") instead of answering the person
    (bench/localchat.py --capture, the tell replies). Auto-recall still ran and its block
    is in the turn's log; only this model's view of it is narrowed.
    """
    last = next(
        (
            m
            for m in reversed(messages)
            if m.get("role") == "user" and not _is_memory_block(m.get("content"))
        ),
        None,
    )
    if last is not None and asks(_text(last.get("content"))):
        return messages
    kept = [m for m in messages if not _is_memory_block(m.get("content"))]
    return [*kept, {"role": "system", "content": BRIEF_HINT}]


def _memory_note(block: str) -> str:
    """The auto-recall block for a tiny model: a plain intro, rows without their keys, and
    the reader's own rows (labelled "you", or the operator's in the terminal) turned to
    address them ("your dog is Biscuit"), so it speaks their facts as theirs, not its own."""
    body = block.split("\n", 1)[1] if "\n" in block else ""
    body = body.replace(NOTE, "").strip()

    def line(match: re.Match[str]) -> str:
        label, value = match.group("label"), match.group("value")
        if label is None or label.startswith("you,"):
            value = as_said_to_them(_SAID_HEAD.sub("", value))
        return f"- {value}"

    return f"{MEMORY_INTRO}\n{_ROW.sub(line, body).strip()}"


def plain_chat(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """OpenAI messages as plain text turns that a tiny model's template and size can cope with.

    System messages (the agent's prompt) go into one leading system message. The auto-recall
    block (a message starting ``## Relevant Memories``) goes into the last user
    message, before the question, without row keys: measured with bench/localchat.py, a
    135M model answers from memories beside the question and ignores them in the system
    prompt. A tool result becomes a user line ``(tool result) ...``; an assistant tool call
    with no text becomes ``(called remember)``; unknown roles are dropped.
    """
    system: list[str] = []
    notes: list[str] = []
    out: list[dict[str, str]] = []
    for message in messages:
        role = message.get("role")
        text = _text(message.get("content"))
        if role in ("system", "developer", "user") and _is_memory_block(text):
            notes.append(_memory_note(text.strip()))
        elif role in ("system", "developer"):
            # The rule about memories is for models that call tools; a tiny one calls none
            # and its prompt is tuned short (bench/localchat.py).
            text = text.replace(MEMORY_RULE, "").strip()
            if text:
                system.append(text)
        elif role == "user":
            out.append({"role": "user", "content": text})
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            if not text and isinstance(calls, list) and calls:
                names = [
                    str(c.get("function", {}).get("name", "?"))
                    for c in calls
                    if isinstance(c, dict)
                ]
                text = f"(called {', '.join(names)})"
            out.append({"role": "assistant", "content": text})
        elif role == "tool":
            out.append({"role": "user", "content": f"(tool result) {text}"})
    if notes:
        last = next((m for m in reversed(out) if m["role"] == "user"), None)
        note = "\n\n".join(notes)
        if last is None:
            out.append({"role": "user", "content": note})
        else:
            last["content"] = f"{note}\n\n{last['content']}"
    if notes:
        system.append(MEMORY_HINT)
    if system:
        out.insert(0, {"role": "system", "content": " ".join(system)})
    return out


def _estimate_tokens(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) // _CHARS_PER_TOKEN + _TOKENS_PER_MESSAGE for m in messages)


def _droppable(messages: list[dict[str, str]]) -> int | None:
    """Index of the oldest message that may go to save context: not system, not the last."""
    for index, message in enumerate(messages[:-1]):
        if message["role"] != "system":
            return index
    return None


def recent(messages: list[dict[str, str]], keep: int) -> list[dict[str, str]]:
    """System messages and the last ``keep`` other messages."""
    others = [i for i, m in enumerate(messages) if m["role"] != "system"]
    dropped = set(others[:-keep]) if keep > 0 else set(others[:-1])
    return [m for i, m in enumerate(messages) if i not in dropped]


def fit_to_context(messages: list[dict[str, str]], budget_tokens: int) -> list[dict[str, str]]:
    """Drop the oldest turns (never system messages nor the last message) to fit a budget."""
    kept = list(messages)
    while _estimate_tokens(kept) > budget_tokens:
        index = _droppable(kept)
        if index is None:
            break
        del kept[index]
    return kept

"""Log lines are read by the operator: one that tells them to do something names what they
type on the shell (``chazbot reindex``), never a chat command (``/memory reindex``, ``!chaz``)
that only a chat or ``chazbot cmd`` takes (#38).

Every logging call in chazbot/ is read with ``ast``; the text it logs (its string constants,
f-string parts included) must hold no chat command form."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEVELS = {"debug", "info", "warning", "error", "exception", "critical"}
CHAT_COMMAND = re.compile(r"(?<![\w/.])/(?:memory|agent|agents|people|share|web|remind)\b|!chaz")


def logged_texts(source: str) -> list[tuple[int, str]]:
    """(line, text) of every ``log.<level>(...)`` / ``logger.<level>(...)`` call."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in LEVELS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("log", "logger", "logging")
        ):
            text = " ".join(
                part.value
                for arg in node.args
                for part in ast.walk(arg)
                if isinstance(part, ast.Constant) and isinstance(part.value, str)
            )
            found.append((node.lineno, text))
    return found


def test_the_reader_finds_a_chat_command_in_a_log_call() -> None:
    source = 'log.warning("x %s; /memory reindex adds" " them", db)\nlog.info(f"run {a} !chaz web")'
    hits = [line for line, text in logged_texts(source) if CHAT_COMMAND.search(text)]
    assert hits == [1, 2]
    assert not CHAT_COMMAND.search("GET /ui/memory and /metrics; chazbot reindex")


def test_no_log_line_names_a_chat_command() -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for path in sorted((ROOT / "chazbot").rglob("*.py"))
        for line, text in logged_texts(path.read_text(encoding="utf-8"))
        if CHAT_COMMAND.search(text)
    ]
    assert wrong == []

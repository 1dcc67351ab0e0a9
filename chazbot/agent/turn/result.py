"""What a turn gives back: ``TurnResult``."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TurnResult:
    text: str
    ok: bool = True
    tool_calls: list[tuple[str, bool]] = field(default_factory=list)  # (tool, ok)
    recalled: int = 0
    llm_seconds: float = 0.0
    answered_in_words: bool = False  # an intent answered it (nothing for capture to keep)
    withheld: str | None = None  # the model's reply the answer check replaced (never sent)


__all__ = ["TurnResult"]

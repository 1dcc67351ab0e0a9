"""chazbot: a self-hosted Matrix agent bot with signed, shareable, persistent memory."""

from __future__ import annotations

__version__ = "0.1.0"

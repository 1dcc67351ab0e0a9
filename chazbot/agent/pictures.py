"""Pictures people send (#39): what a model that sees gets, and what the others say.

A photo from Matrix arrives as bytes (fetched from the homeserver, decrypted in memory,
bounded by ``media.image_max_mb``) with its caption as the turn's text. A model with
``llm.vision`` gets OpenAI's image content parts beside the caption; the picture is never
stored, and capture keeps the caption only.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

CANNOT_SEE = "(I can't see pictures with the model I run on; I read only your caption.)"
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


@dataclass(frozen=True)
class Picture:
    data: bytes
    mime: str

    def __repr__(self) -> str:  # never a picture's bytes in a log
        return f"Picture({self.mime}, {len(self.data)} bytes)"


def picture_parts(caption: str, pictures: tuple[Picture, ...] | list[Picture] | Any) -> list[Any]:
    """The user message's content: the caption, then each picture as a data URL."""
    parts: list[Any] = [{"type": "text", "text": caption or "(a picture, no caption)"}]
    for picture in pictures:
        url = f"data:{picture.mime};base64,{base64.b64encode(picture.data).decode('ascii')}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


__all__ = ["CANNOT_SEE", "IMAGE_TYPES", "Picture", "picture_parts"]

"""The readable text of an HTML page (``web_fetch``): the title and the words of the body,
without scripts, styles, templates or hidden parts, one block a line. Pure (stdlib parser)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

SKIPPED = frozenset({"script", "style", "template", "noscript", "svg", "head", "iframe", "object"})
BLOCKS = frozenset(
    {
        "p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header",
        "footer", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "dd", "dt", "hr",
        "main", "nav", "aside", "form", "figcaption", "title",
    }
)  # fmt: skip
VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "wbr"})
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self.skipping = 0
        self.in_title = False
        self._hidden: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        if tag in SKIPPED and tag != "head" and tag not in VOID:
            self.skipping += 1
        hidden = any(k == "hidden" or (k == "aria-hidden" and v == "true") for k, v in attrs)
        if hidden and tag not in VOID:
            self.skipping += 1
            self._hidden.append(tag)
        if tag in BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in SKIPPED and tag != "head" and self.skipping:
            self.skipping -= 1
        if self._hidden and self._hidden[-1] == tag and self.skipping:
            self._hidden.pop()
            self.skipping -= 1
        if tag in BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
            return
        if not self.skipping:
            self.parts.append(data)


def html_text(html: str) -> str:
    """The page's title (first line, when it has one) and its text, blank runs folded."""
    parser = _Text()
    try:
        parser.feed(html)
        parser.close()
    except (AssertionError, ValueError):  # a page broken past what the parser forgives
        pass
    lines = [_SPACES.sub(" ", line).strip() for line in "".join(parser.parts).splitlines()]
    body = "\n".join(line for line in lines if line)
    title = _SPACES.sub(" ", "".join(parser.title)).strip()
    return f"{title}\n\n{body}" if title else body


__all__ = ["html_text"]

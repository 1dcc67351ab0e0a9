"""Where a connection's bytes are in HTTP/1.1 request framing, for the connection guard
(``sync.guard``): a head is done at its terminating empty line, not at the first CRLF pair
(issue #34), and a body at its last byte."""

from __future__ import annotations

from typing import Literal

HEAD_MAX_BYTES = 64 * 1024  # aiohttp allows 8 KiB a line but no total

Phase = Literal["head", "body", "idle"]


class RequestFraming:
    """Where a connection's bytes are in HTTP/1.1 framing (RFC 9112): in a request's head,
    in its body (``Content-Length`` bytes, or chunks up to the last one and its trailer), or
    between requests. ``feed`` returns why the stream cannot be followed (``"head too
    large"``), else None.

    A request line may be preceded by empty lines (skipped, but counted in the head's bytes);
    a line ends with LF, a CR before it dropped. What cannot be followed (a bad length, an
    upgrade) is left to aiohttp, which answers 400 and closes: the phase stays "body" and the
    body deadline bounds it.
    """

    def __init__(self, max_head: int = HEAD_MAX_BYTES) -> None:
        self.max_head = max_head
        self.phase: Phase = "head"
        self.requests = 0
        self._line = bytearray()
        self._head_bytes = 0
        self._started = False  # the request line is in
        self._length: int | None = None
        self._chunked = False
        self._lost = False
        self._body: Literal["data", "size", "crlf", "trailer", "until-close"] = "data"
        self._left = 0

    def feed(self, data: bytes) -> str | None:
        i, n = 0, len(data)
        while i < n:
            if self.phase == "idle":
                self._start_head()
            if self.phase == "head":
                i, problem = self._head(data, i)
                if problem:
                    return problem
            elif self._body == "data":
                take = min(self._left, n - i)
                self._left -= take
                i += take
                if self._left == 0:
                    self._body = "crlf" if self._chunked else "data"
                    if not self._chunked:
                        self.phase = "idle"
            else:
                i = self._chunk_line(data, i)
        return None

    def _start_head(self) -> None:
        self.phase = "head"
        self._head_bytes = 0
        self._started = False
        self._length = None
        self._chunked = self._lost = False

    def _head(self, data: bytes, i: int) -> tuple[int, str | None]:
        end = data.find(b"\n", i)
        stop = len(data) if end < 0 else end + 1
        self._head_bytes += stop - i
        if self._head_bytes > self.max_head:
            return stop, "head too large"
        if end < 0:
            self._line += data[i:stop]
            return stop, None
        line = bytes(self._line + data[i:end]).rstrip(b"\r")
        self._line.clear()
        if not self._started:
            self._started = bool(line)  # empty lines before the request line are skipped
        elif not line:
            self._head_done()
        else:
            self._header(line)
        return stop, None

    def _header(self, line: bytes) -> None:
        name, colon, value = line.partition(b":")
        name, value = name.strip().lower(), value.strip()
        if not colon:
            self._lost = True
        elif name == b"content-length":
            length = int(value) if value.isdigit() and len(value) <= 18 else -1
            if length < 0 or (self._length is not None and self._length != length):
                self._lost = True
            self._length = length
        elif name == b"transfer-encoding":
            self._chunked = value.lower().rsplit(b",", 1)[-1].strip() == b"chunked"
            self._lost = self._lost or not self._chunked
        elif name == b"upgrade":
            self._lost = True

    def _head_done(self) -> None:
        self.requests += 1
        self.phase = "body"
        if self._lost:  # aiohttp answers 400 and closes; the body deadline bounds the rest
            self._body, self._left = "until-close", 0
        elif self._chunked:
            self._body = "size"
        elif self._length:
            self._body, self._left = "data", self._length
        else:
            self.phase = "idle"

    def _chunk_line(self, data: bytes, i: int) -> int:
        if self._body == "until-close":
            return len(data)
        end = data.find(b"\n", i)
        if end < 0:
            self._line += data[i:]
            if len(self._line) > self.max_head:  # a chunk line never ends: hold nothing
                self._line.clear()
                self._body = "until-close"
            return len(data)
        line = bytes(self._line + data[i:end]).rstrip(b"\r")
        self._line.clear()
        if self._body == "crlf":
            self._body = "size"
        elif self._body == "size":
            size = line.split(b";", 1)[0].strip()
            try:
                self._left = int(size, 16) if size and len(size) <= 15 else -1
            except ValueError:
                self._left = -1
            if self._left < 0:
                self._body = "until-close"
            else:
                self._body = "data" if self._left else "trailer"
        elif not line:  # the empty line after the last chunk's trailer
            self._body, self.phase = "data", "idle"
        return end + 1

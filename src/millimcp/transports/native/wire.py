"""HTTP/1.1 response bytes for the native front: status lines, heads, chunks, refusals.

Heads are built as one ``bytes`` object (the response line, the headers, the blank line) so
that a whole JSON response leaves in one ``transport.write``. The ``Date`` header is
formatted once a second (:class:`Clock`), not per response.
"""

from __future__ import annotations

import time
from email.utils import formatdate
from typing import Final

from millimcp.errors import InvalidRequest
from millimcp.protocol import encode_error

__all__ = [
    "CHUNK_END",
    "CONTINUE",
    "Clock",
    "chunk",
    "error_response",
    "head",
    "plain_response",
]

REASONS: Final[dict[int, bytes]] = {
    200: b"OK",
    202: b"Accepted",
    204: b"No Content",
    400: b"Bad Request",
    401: b"Unauthorized",
    403: b"Forbidden",
    404: b"Not Found",
    405: b"Method Not Allowed",
    406: b"Not Acceptable",
    408: b"Request Timeout",
    409: b"Conflict",
    413: b"Content Too Large",
    414: b"URI Too Long",
    415: b"Unsupported Media Type",
    422: b"Unprocessable Content",
    429: b"Too Many Requests",
    431: b"Request Header Fields Too Large",
    500: b"Internal Server Error",
    501: b"Not Implemented",
    503: b"Service Unavailable",
    505: b"HTTP Version Not Supported",
}

CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"
CHUNK_END: Final = b"0\r\n\r\n"
_CLOSE: Final = b"connection: close\r\n"
_KEEP: Final = b"connection: keep-alive\r\n"
_STATUS_LINES: Final[dict[int, bytes]] = {
    status: b"HTTP/1.1 %d %s\r\n" % (status, reason) for status, reason in REASONS.items()
}
_JSON: Final = [(b"content-type", b"application/json")]
_TEXT: Final = [(b"content-type", b"text/plain; charset=utf-8")]


class Clock:
    """The ``Date`` header line, formatted at most once a second."""

    __slots__ = ("line", "second")

    def __init__(self) -> None:
        self.second = 0
        self.line = b""
        self.tick()

    def tick(self) -> bytes:
        now = int(time.time())
        if now != self.second:
            self.second = now
            self.line = b"date: " + formatdate(now, usegmt=True).encode() + b"\r\n"
        return self.line


CLOCK: Final = Clock()


def status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    if line is None:
        line = b"HTTP/1.1 %d Status\r\n" % status
    return line


def head(
    status: int,
    headers: list[tuple[bytes, bytes]],
    *,
    close: bool = False,
    keep_alive_10: bool = False,
) -> bytes:
    """The response line and headers, ending with the blank line.

    ``close`` adds ``Connection: close``; ``keep_alive_10`` (an HTTP/1.0 client that asked for
    keep-alive) adds ``Connection: keep-alive``.
    """
    parts = [status_line(status), CLOCK.line]
    parts.extend(b"%s: %s\r\n" % pair for pair in headers)
    if close:
        parts.append(_CLOSE)
    elif keep_alive_10:
        parts.append(_KEEP)
    parts.append(b"\r\n")
    return b"".join(parts)


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body (never the empty last chunk: that is :data:`CHUNK_END`)."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def error_response(
    status: int,
    message: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    close: bool = False,
) -> bytes:
    """A refusal with a JSON-RPC error body that has no id (what the ASGI app sends)."""
    body = encode_error(None, InvalidRequest(message))
    hdrs = [*_JSON, (b"content-length", b"%d" % len(body)), *(headers or ())]
    return head(status, hdrs, close=close) + body


def plain_response(
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    close: bool = False,
) -> bytes:
    hdrs = [*_TEXT, (b"content-length", b"%d" % len(body)), *(headers or ())]
    return head(status, hdrs, close=close) + body

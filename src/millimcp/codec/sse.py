"""Server-Sent Events (text/event-stream): the writer and the incremental parser.

One JSON message per event. The server writes events with :func:`sse_event` (and
:func:`sse_priming`, :data:`SSE_KEEPALIVE`); a client or the lab reads a stream with
:class:`SseParser`.
"""

from __future__ import annotations

from typing import Final

from millimcp.errors import FrameTooLarge

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "SSE_KEEPALIVE", "SseParser", "sse_event", "sse_priming"]

SSE_KEEPALIVE: Final = b":\r\n\r\n"
"""A comment line: keeps intermediaries from closing a quiet stream; clients ignore it."""
DEFAULT_MAX_EVENT_BYTES: Final = 16 * 1024 * 1024
"""The largest event (its data) a parser accepts unless told otherwise."""


def sse_event(data: bytes, event_id: str | None = None) -> bytes:
    """Frame one JSON message as an SSE ``message`` event.

    Compact JSON never contains a raw newline, so the message fits on one ``data:`` line.
    """
    if event_id is None:
        return b"event: message\ndata: " + data + b"\n\n"
    return b"id: " + event_id.encode() + b"\nevent: message\ndata: " + data + b"\n\n"


def sse_priming(event_id: str, retry_ms: int | None = None) -> bytes:
    """An event with an id and empty data: tells the client where to resume from.

    With ``retry_ms``, also how long to wait before reconnecting.
    """
    retry = b"" if retry_ms is None else b"retry: " + str(retry_ms).encode() + b"\n"
    return b"id: " + event_id.encode() + b"\n" + retry + b"data: \n\n"


class SseParser:
    """An incremental ``text/event-stream`` parser: feed bytes, get each event's data.

    Lines end with LF or CRLF. Comments (``:`` lines) and events without data are skipped;
    ``id`` and ``retry`` fields are remembered (:attr:`last_id`, :attr:`retry_ms`), for
    reconnecting with ``Last-Event-ID``. An event (or an unfinished line) longer than
    ``limit`` bytes raises :class:`~millimcp.errors.FrameTooLarge`: nothing is held past it.
    """

    __slots__ = ("_buffer", "_data", "_size", "last_id", "limit", "retry_ms")

    def __init__(self, limit: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.limit = limit
        self.last_id: str | None = None
        self.retry_ms: int | None = None
        self._buffer = b""
        self._data: list[bytes] = []
        self._size = 0

    def __repr__(self) -> str:
        return f"<SseParser last_id={self.last_id!r} buffered={len(self._buffer) + self._size}>"

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of every event that ``chunk`` completes, in order."""
        buffer = self._buffer + chunk if self._buffer else chunk
        events: list[bytes] = []
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            line = buffer[start:end]
            start = end + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if self._data:
                    data = b"\n".join(self._data)
                    if data:  # an empty event (a priming one) dispatches nothing
                        events.append(data)
                    self._data = []
                    self._size = 0
                continue
            if line[0] == 0x3A:  # ":" a comment (keep-alive)
                continue
            name, colon, value = line.partition(b":")
            if colon and value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                self._size += len(value) + 1
                if self._size > self.limit:
                    raise FrameTooLarge(self.limit)
                self._data.append(value)
            elif name == b"id":
                if b"\x00" not in value:
                    self.last_id = value.decode("utf-8", "replace")
            elif name == b"retry" and value.isdigit():
                self.retry_ms = int(value)
            # "event" and unknown fields: every event is a JSON-RPC message
        rest = buffer[start:]
        if len(rest) + self._size > self.limit:
            raise FrameTooLarge(self.limit)
        self._buffer = rest
        return events

"""Server-Sent Events framing (text/event-stream), one JSON message per event."""

from __future__ import annotations

from typing import Final

__all__ = ["SSE_KEEPALIVE", "sse_event", "sse_priming"]

SSE_KEEPALIVE: Final = b":\r\n\r\n"
"""A comment line: keeps intermediaries from closing a quiet stream; clients ignore it."""


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

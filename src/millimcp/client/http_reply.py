"""Reading a Streamable HTTP reply, whatever carries its bytes (aiohttp, or an ASGI app
called in-process): the rules both HTTP links share.

- A ``2xx`` JSON body is the response; a refusal (``>= 300``) is a JSON-RPC error response
  when its body is one (returned, with the status and ``Retry-After``), else
  :class:`~millimcp.errors.RequestRejected`.
- An SSE body is read event by event up to the response to the request; the messages before
  it go to ``on_message`` as they come.
- A body in the ``dev.millimcp/tensor`` framing is split into its JSON message and its
  attachment (a view of the one buffer it was read into).
"""

from __future__ import annotations

import contextlib
import email.utils
import logging
import time
from collections.abc import AsyncIterable, Mapping
from typing import Any, Final

import msgspec

from millimcp.client.link import OnMessage, Reply
from millimcp.codec import SseParser
from millimcp.codec.attachment import ATTACHMENT_MEDIA_TYPE, AttachmentFramingError, split
from millimcp.codec.compress import available
from millimcp.errors import ProtocolError, RequestRejected, TensorFormatError
from millimcp.protocol import Message, decode_message

__all__ = [
    "ACCEPT",
    "ACCEPT_ATTACHMENTS",
    "DEFAULT_MAX_ATTACHMENT_BYTES",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DELETE_TIMEOUT_S",
    "DRAIN_S",
    "GET_RETRIES",
    "RESUMES",
    "RESUME_DELAY_S",
    "base_headers",
    "decode_or_none",
    "find_response",
    "reply_of",
    "retry_after_seconds",
    "split_framed",
]

log: Final = logging.getLogger("millimcp.client")

DEFAULT_MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""The largest reply body or SSE event accepted (after decompression)."""
DEFAULT_MAX_ATTACHMENT_BYTES: Final = 256 * 1024 * 1024
"""The largest framed reply (JSON part and tensors) an HTTP link reads."""
ACCEPT: Final = "application/json, text/event-stream"
"""The ``Accept`` header of every POST."""
ACCEPT_ATTACHMENTS: Final = f"{ACCEPT}, {ATTACHMENT_MEDIA_TYPE}"
"""The ``Accept`` header of a client that declared ``dev.millimcp/tensor``."""
GET_RETRIES: Final = 5
"""Reconnects of the GET stream in a row that may fail before it is given up."""
DELETE_TIMEOUT_S: Final = 2.0
"""How long the ``DELETE`` that ends a session may take on close."""
RESUMES: Final = 3
"""Times a response stream that ended before its response is resumed (GET + Last-Event-ID)."""
RESUME_DELAY_S: Final = 1.0
"""The wait before resuming when the server set no SSE ``retry``."""
DRAIN_S: Final = 1.0
"""How long the rest of a response stream may take to end before its connection is closed."""


def base_headers(tensors: bool, extra: Mapping[str, str] | None) -> dict[str, str]:
    """The headers of every POST of an HTTP link: JSON in, JSON or SSE (or the tensor
    framing) out, ``zstd`` (when ``zstandard`` is installed) or ``gzip``, a ``User-Agent``;
    ``extra`` (the user's) added over them."""
    coding = "zstd, gzip" if available("zstd") else "gzip"
    headers = {
        "Content-Type": "application/json",
        "Accept": ACCEPT_ATTACHMENTS if tensors else ACCEPT,
        "Accept-Encoding": coding,
        **(extra or {}),
    }
    if not any(name.lower() == "user-agent" for name in headers):
        headers["User-Agent"] = "millimcp"
    return headers


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date; None if absent or invalid."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


_new_reply: Final = tuple.__new__
"""``Reply(...)`` without the NamedTuple's Python-level ``__new__`` (every field given)."""


def reply_of(status: int, data: bytes, retry_after: str | None, reason: str) -> Reply:
    """The reply a whole (JSON) body makes: a response, or a refusal's error response.

    Raises :class:`~millimcp.errors.RequestRejected` for a ``2xx`` with no body and for a
    refusal whose body is not a JSON-RPC error (its first 500 bytes are the message).
    """
    if status < 300:
        if not data:
            raise RequestRejected(status, "the server answered a request with no response")
        return _new_reply(Reply, (decode_message(data), status, None, None))
    retry_after_s = retry_after_seconds(retry_after)
    message: Message | None = None
    if data[:1] == b"{":
        with contextlib.suppress(ProtocolError):
            message = decode_message(data)
    if message is None or not message.error:
        text = data[:500].decode("utf-8", "replace") or reason
        raise RequestRejected(status, f"HTTP {status}: {text}", retry_after_s=retry_after_s)
    return Reply(message, status, retry_after_s)


def split_framed(buffer: bytearray, max_message_bytes: int) -> tuple[bytes, memoryview]:
    """(JSON message, attachment) of a framed reply read into ``buffer``; a malformed one
    raises :class:`~millimcp.errors.TensorFormatError`."""
    try:
        return split(buffer, max_message_bytes)
    except AttachmentFramingError as exc:
        raise TensorFormatError(f"a framed reply is malformed: {exc}") from None


async def find_response(
    chunks: AsyncIterable[Any],
    parser: SseParser,
    request_id: int | str,
    on_message: OnMessage,
) -> Message | None:
    """Read an SSE body up to the response to ``request_id`` (the messages before it to
    ``on_message``); None if the body ends first."""
    async for chunk in chunks:
        for data in parser.feed(chunk):
            message = decode_or_none(data)
            if message is None:
                continue
            if message.method is not msgspec.UNSET:
                await on_message(message)
            elif message.id == request_id or message.id is msgspec.UNSET:
                return message
    return None


def decode_or_none(data: bytes) -> Message | None:
    """One message, or None (logged) when it is not JSON-RPC."""
    try:
        return decode_message(data)
    except ProtocolError as exc:
        log.warning("ignoring a malformed message from the server: %s", exc)
        return None

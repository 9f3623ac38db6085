"""Reading request bodies against hostile clients, and refusing them so the client hears it.

Three rules, each one an :class:`~millimcp.transports.http.HttpConfig` setting:

- **No memory ahead of the bytes.** A buffer grows as data arrives; a declared
  ``Content-Length`` is believed only up to :data:`PREALLOCATE` bytes.
- **A budget across connections.** The bytes of bodies read in several chunks are counted
  in one :class:`BodyBudget` per app (``max_body_bytes_in_flight``) from the chunk that
  brings them until the handler returns; past it a request gets 503 with ``Retry-After``.
  A body the server hands over in one chunk is not counted: the HTTP server holds at most
  its read high-water mark (uvicorn: 64 KiB) per connection before the app reads, so those
  are bounded by ``max_connections``.
- **A deadline.** A body read in several chunks must end within ``body_timeout_s``, or
  keep ``body_min_rate`` bytes per second after its first second (a long upload at a fair
  rate is never cut); otherwise 408 and close.

An early refusal (413, 415, 403, 503...) with a body still coming is sent, then the rest
of the body is read and thrown away, up to ``linger_bytes`` and ``linger_s``, before the
response ends: a client that sends its whole body before it reads (Python's ``urllib``
with ``Connection: close``) otherwise gets a connection reset instead of the answer,
because closing a socket with unread data makes the kernel send RST. A client that sent
``Expect: 100-continue`` and has not been told to continue sends no body: it gets the
answer and ``Connection: close`` at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final, NamedTuple, Protocol

from millimcp.codec.compress import DECODABLE, decompress
from millimcp.errors import FrameTooLarge, InvalidRequest, ProtocolError, RequestRejected
from millimcp.observe import TRACE
from millimcp.protocol import encode_error

__all__ = [
    "PREALLOCATE",
    "BodyBudget",
    "Refusal",
    "Undecodable",
    "decoded",
    "error",
    "plain",
    "read_more",
    "read_writable",
    "refuse",
]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

PREALLOCATE: Final = 1024 * 1024
"""The most a declared ``Content-Length`` allocates before its bytes arrive."""
_JSON_HEADERS: Final = [(b"content-type", b"application/json")]


class HttpConfig(Protocol):
    """The settings read here (:class:`millimcp.transports.http.HttpConfig` has them)."""

    @property
    def body_timeout_s(self) -> float: ...
    @property
    def body_min_rate(self) -> int: ...
    @property
    def linger_bytes(self) -> int: ...
    @property
    def linger_s(self) -> float: ...


_CLOSE: Final = (b"connection", b"close")
_RETRY_AFTER: Final = (b"retry-after", b"1")
_ACCEPT_ENCODING: Final = [(b"accept-encoding", ", ".join(DECODABLE).encode())]


class Undecodable(NamedTuple):
    """Why a request body's ``Content-Encoding`` could not be undone: the refusal to send."""

    status: int
    message: str
    headers: list[tuple[bytes, bytes]] | None


def decoded(body: bytes, coding: bytes, limit: int) -> bytes | Undecodable:
    """``body`` with its ``Content-Encoding`` undone, at most ``limit`` bytes of it; or the
    refusal: 413 past the limit, 415 (naming the codings this side decodes) for a coding it
    does not know, 400 for a body that is not what its coding says."""
    try:
        return decompress(body, coding.decode("latin-1"), limit)
    except FrameTooLarge:
        return Undecodable(413, f"Request body larger than {limit} bytes once decoded", None)
    except RequestRejected as exc:
        return Undecodable(exc.status, exc.message, _ACCEPT_ENCODING if exc.status == 415 else None)


class Refusal:
    """Why a body was not read to its end, and whether more of it is still coming."""

    __slots__ = ("message", "pending", "retry_after", "status")

    def __init__(
        self, status: int, message: str, pending: bool, *, retry_after: bool = False
    ) -> None:
        self.status = status
        self.message = message
        self.pending = pending
        self.retry_after = retry_after

    async def send(
        self, receive: Receive, send: Send, request_headers: dict[bytes, bytes], config: HttpConfig
    ) -> None:
        """Deliver it (:func:`refuse`)."""
        await refuse(
            receive,
            send,
            self.status,
            self.message,
            request_headers,
            config=config,
            pending=self.pending,
            retry_after=self.retry_after,
        )


class BodyBudget:
    """Body bytes held across all connections of one app, against one limit."""

    __slots__ = ("held", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> bool:
        """Count ``size`` more bytes, unless that passes the limit (then False)."""
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        self.held -= size


def _over_budget(pending: bool) -> Refusal:
    return Refusal(
        503, "Service Unavailable: too many request bytes in flight", pending, retry_after=True
    )


class _Deadline:
    """When a body read in chunks must be done: ``timeout_s`` or the minimum rate."""

    __slots__ = ("min_rate", "start", "timeout_s")

    def __init__(self, config: HttpConfig) -> None:
        self.start = asyncio.get_running_loop().time()
        self.timeout_s = config.body_timeout_s
        self.min_rate = config.body_min_rate

    def at(self, size: int) -> float:
        """The loop time by which the body must be done, ``size`` bytes into it."""
        allowed = self.timeout_s
        if self.min_rate > 0:
            allowed = max(allowed, 1.0 + size / self.min_rate)
        return self.start + allowed


_TOO_SLOW: Final = "Request Timeout: the body came too slowly"


def _too_large(limit: int, pending: bool) -> Refusal:
    return Refusal(413, f"Request body larger than {limit} bytes", pending)


async def read_more(
    receive: Receive, first: bytes, limit: int, budget: BodyBudget, config: HttpConfig
) -> bytes | Refusal:
    """The rest of a body sent in several chunks (``first`` came with more to follow),
    counted in ``budget``: the caller gives ``len(result)`` back once done with it; after a
    :class:`Refusal` (413 past ``limit``, 503 past the budget, 408 too slow) nothing stays
    counted. A client that leaves gets ``b""``.
    """
    size = len(first)
    if size > limit:
        return _too_large(limit, True)
    if not budget.take(size):
        return _over_budget(True)
    chunks = [first]
    deadline = _Deadline(config)
    refusal: Refusal | None = None
    try:
        async with asyncio.timeout_at(deadline.at(size)) as timer:
            more = True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    budget.give(size)
                    return b""
                chunk = message.get("body", b"")
                more = message.get("more_body", False)
                if size + len(chunk) > limit:
                    refusal = _too_large(limit, more)
                    break
                if not budget.take(len(chunk)):
                    refusal = _over_budget(more)
                    break
                size += len(chunk)
                chunks.append(chunk)
                timer.reschedule(deadline.at(size))
    except TimeoutError:
        refusal = Refusal(408, _TOO_SLOW, True)
    if refusal is not None:
        budget.give(size)
        return refusal
    return b"".join(chunks)


async def read_writable(
    receive: Receive, limit: int, declared: int | None, budget: BodyBudget, config: HttpConfig
) -> bytearray | Refusal:
    """The whole body in one writable buffer (views of it can back tensors), counted in
    ``budget`` like :func:`read_more` (the caller gives ``len(result)`` back).

    The buffer takes at most :data:`PREALLOCATE` bytes from a declared ``Content-Length``
    and grows as chunks arrive past that. Refuses as :func:`read_more` does; a client that
    leaves gets an empty buffer.
    """
    body = bytearray(min(declared or 0, PREALLOCATE))
    size = 0
    deadline = _Deadline(config)
    refusal: Refusal | None = None
    try:
        async with asyncio.timeout_at(deadline.at(0)) as timer:
            more = True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    budget.give(size)
                    return bytearray()
                chunk = message.get("body", b"")
                more = message.get("more_body", False)
                end = size + len(chunk)
                if end > limit:
                    refusal = _too_large(limit, more)
                    break
                if not budget.take(len(chunk)):
                    refusal = _over_budget(more)
                    break
                if end <= len(body):
                    body[size:end] = chunk
                elif size == len(body):
                    body += chunk
                else:
                    body[size:] = chunk
                size = end
                timer.reschedule(deadline.at(size))
    except TimeoutError:
        refusal = Refusal(408, _TOO_SLOW, True)
    if refusal is not None:
        budget.give(size)
        return refusal
    if size < len(body):
        del body[size:]
    return body


def body_pending(headers: dict[bytes, bytes]) -> bool:
    """Whether a request announces a body (that nobody has read yet)."""
    declared = headers.get(b"content-length")
    if declared is not None:
        return declared.strip() not in (b"0", b"")
    return headers.get(b"transfer-encoding") is not None


async def refuse(
    receive: Receive,
    send: Send,
    status: int,
    message: str,
    request_headers: dict[bytes, bytes],
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    config: HttpConfig,
    pending: bool | None = None,
    retry_after: bool = False,
) -> None:
    """Answer an early refusal and deliver it: the rest of the body is read and dropped
    (``linger_bytes``/``linger_s``) before the response ends. ``pending``: whether more of
    the body is coming, once the app has read part of it (``None``: nothing read yet; the
    headers tell)."""
    extra = [*(headers or [])]
    if retry_after:
        extra.append(_RETRY_AFTER)
    started = pending is not None
    if not (pending if started else body_pending(request_headers)):
        await error(send, status, message, extra)
        return
    expecting = request_headers.get(b"expect", b"").lower() == b"100-continue"
    if (expecting and not started) or status == 408:  # no body comes, or it comes too slowly
        await error(send, status, message, [*extra, _CLOSE])
        return
    declared = request_headers.get(b"content-length", b"")
    if declared.isdigit() and int(declared) > config.linger_bytes:
        extra.append(_CLOSE)  # more than we will read: the connection ends after this
    if TRACE.active:
        TRACE.event("rejected", (str(status),))
    body = _error_body(message)
    hdrs = [*_JSON_HEADERS, (b"content-length", b"%d" % len(body)), *extra]
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": body, "more_body": True})
    await linger(receive, config)
    await send({"type": "http.response.body", "body": b""})


async def linger(receive: Receive, config: HttpConfig) -> bool:
    """Read and drop what is left of a body, within the linger bounds; whether it ended."""
    left = config.linger_bytes
    try:
        async with asyncio.timeout(config.linger_s):
            while left >= 0:
                message = await receive()
                if message["type"] == "http.disconnect" or not message.get("more_body", False):
                    return True
                left -= len(message.get("body", b""))
    except TimeoutError:
        pass
    return False


def _error_body(message: str) -> bytes:
    exc: ProtocolError = InvalidRequest(message)
    return encode_error(None, exc)


async def plain(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    hdrs = [(b"content-type", b"text/plain; charset=utf-8"), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": body})


async def error(
    send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """An HTTP refusal with a JSON-RPC error body that has no id."""
    if TRACE.active:
        TRACE.event("rejected", (str(status),))
    body = _error_body(message)
    hdrs = [*_JSON_HEADERS, *headers] if headers else _JSON_HEADERS
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": body})

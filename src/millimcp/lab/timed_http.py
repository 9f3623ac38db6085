"""An instrumented HTTP/1.1 connection for ``millimcp profile``: every step timed.

One :class:`TimedConnection` is one TCP (or TLS) connection to an MCP endpoint, opened in
timed steps (DNS, TCP connect, TLS handshake) and reused for request after request
(keep-alive). It is an :class:`asyncio.Protocol`: the time each chunk of a response arrives
is taken in ``data_received``, before any parsing, so "first byte" and "last byte" are when
the event loop saw them, not when a reader coroutine woke up.

A reply is a JSON body (``Content-Length`` or chunked) or an SSE stream read up to the
event that answers the request (its first byte and last byte are that event's); the rest of
the stream is drained so the connection can be reused. The bytes are framed by the lab's
HTTP/1.1 reader (:mod:`millimcp.lab.http1`). Bodies are capped at ``max_message_bytes``; a
response head at 64 KiB.

Nothing here knows MCP beyond the response event of an SSE stream matching a request id.
"""

from __future__ import annotations

import asyncio
import socket
import ssl as ssl_module
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast
from urllib.parse import urlsplit

import msgspec

from millimcp.errors import ConnectionLost, MissingExtra, NotSent, ProtocolError, RequestRejected
from millimcp.lab.http1 import (
    Event,
    EventReceived,
    ResponseHead,
    ResponseReader,
    ResponseReceived,
    StreamStarted,
)
from millimcp.protocol import decode_message

__all__ = [
    "Endpoint",
    "Exchange",
    "ExchangeReader",
    "TimedConnection",
    "default_max_message_bytes",
    "open_timed",
]

clock: Final = time.perf_counter_ns
_DRAIN_AFTER_EVENT_S: Final = 2.0
"""How long the rest of an SSE stream may take after its response event before the
connection is given up (a server that keeps the stream open)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the requests go: parsed once from the URL."""

    url: str
    host: str
    port: int
    path: str
    tls: bool
    authority: str
    """The ``Host`` header."""

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        host = parts.hostname
        shown = f"[{host}]" if ":" in host else host
        default = port == (443 if tls else 80)
        return cls(url, host, port, path, tls, shown if default else f"{shown}:{port}")


@dataclass(slots=True)
class Exchange:
    """One response as it arrived: its head, its message bytes and when they came."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    """Names lower-cased; repeated headers joined with ``", "``."""
    body: bytes = b""
    """The JSON body, still encoded (``Content-Encoding``), or the SSE response event's data."""
    first_byte_ns: int = 0
    last_byte_ns: int = 0
    sse: bool = False
    events_before: int = 0
    """SSE: messages the server sent ahead of the response (notifications, requests)."""


class TimedConnection(asyncio.Protocol):
    """One HTTP/1.1 connection, a request at a time, with arrival times of the replies."""

    def __init__(self, endpoint: Endpoint, max_message_bytes: int) -> None:
        self.endpoint = endpoint
        self.max_message_bytes = max_message_bytes
        self.transport: asyncio.Transport | None = None
        self.reusable = True
        """False once the server said ``Connection: close`` or the stream could not be
        drained: the next request needs a new connection."""
        self._waiter: asyncio.Future[Exchange] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._write_paused = False
        self._resume: asyncio.Future[None] | None = None
        self._lost: BaseException | None = None
        self._reader: ExchangeReader | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        now = clock()
        reader = self._reader
        if reader is None:
            return  # nothing asked: bytes after a drained response (ignored)
        try:
            reader.feed(data, now)
        except Exception as exc:
            self._fail(exc)
            return
        self._settle(reader)

    def _settle(self, reader: ExchangeReader) -> None:
        """Hand the response on as soon as its message is in, and free the connection once
        the whole response is read."""
        waiter = self._waiter
        if reader.exchange_ready and waiter is not None and not waiter.done():
            waiter.set_result(reader.exchange)
        if reader.finished:
            self._reader = None
            if self._drained is not None and not self._drained.done():
                self._drained.set_result(None)

    def eof_received(self) -> bool | None:
        reader = self._reader
        if reader is not None:
            try:
                reader.feed_eof(clock())
            except Exception as exc:
                self._fail(exc)
                return None
            self._settle(reader)
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self._lost = exc or ConnectionLost("the server closed the connection")
        self._fail(self._lost)
        if self._resume is not None and not self._resume.done():
            self._resume.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._resume is not None and not self._resume.done():
            self._resume.set_result(None)

    # -- requests -------------------------------------------------------------------------

    def head(self, method: str, headers: dict[str, str], length: int) -> bytes:
        """The request head for a body of ``length`` bytes."""
        endpoint = self.endpoint
        lines = [f"{method} {endpoint.path} HTTP/1.1", f"Host: {endpoint.authority}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines.append(f"Content-Length: {length}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def write(
        self, data: bytes, *, request_id: int | str | None = None
    ) -> asyncio.Future[Exchange]:
        """Send ``data`` (a whole request) and expect one response; returns the future of
        that response (``request_id`` picks the answer out of an SSE stream)."""
        transport = self.transport
        if transport is None or transport.is_closing() or self._lost is not None:
            raise ConnectionLost("the connection is closed")
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        self._drained = loop.create_future()
        self._reader = ExchangeReader(request_id, self.max_message_bytes)
        transport.write(data)
        return self._waiter

    async def drain(self) -> bool:
        """Wait until the transport's write buffer is below its high-water mark; whether
        that took a wait (the kernel did not take the whole request at once)."""
        waited = self._write_paused
        if waited:
            self._resume = asyncio.get_running_loop().create_future()
            await self._resume
        if self._lost is not None:
            raise ConnectionLost(f"the connection broke while sending: {self._lost!r}")
        return waited

    async def finish(self, exchange: Exchange) -> None:
        """Wait for the rest of the response (an SSE stream's tail) so the connection can
        carry the next request; give the connection up if it does not end in time."""
        if exchange.headers.get("connection", "").lower() == "close":
            self.reusable = False
        drained = self._drained
        if drained is None or drained.done():
            return
        try:
            async with asyncio.timeout(_DRAIN_AFTER_EVENT_S):
                await drained
        except TimeoutError:
            self.reusable = False
            self.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: BaseException) -> None:
        for future in (self._waiter, self._drained):
            if future is not None and not future.done():
                future.set_exception(exc)
                future.exception()  # retrieved: a drained future nobody awaits stays quiet


async def open_timed(
    endpoint: Endpoint,
    *,
    ssl: ssl_module.SSLContext | None = None,
    max_message_bytes: int | None = None,
    connect_timeout: float = 10.0,
) -> tuple[TimedConnection, dict[str, int]]:
    """A new connection and how long its steps took (ns): ``dns``, ``connect`` and, for
    https, ``tls``. Bodies are capped at ``max_message_bytes`` (default: the Client's)."""
    if max_message_bytes is None:
        max_message_bytes = default_max_message_bytes()
    loop = asyncio.get_running_loop()
    steps: dict[str, int] = {}
    try:
        async with asyncio.timeout(connect_timeout):
            t0 = clock()
            infos = await loop.getaddrinfo(
                endpoint.host, endpoint.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
            )
            t1 = clock()
            steps["dns"] = t1 - t0
            sock = await _connect_any(loop, infos)
            protocol = TimedConnection(endpoint, max_message_bytes)
            if endpoint.tls:
                t2 = clock()
                steps["connect"] = t2 - t1
                context = ssl if ssl is not None else ssl_module.create_default_context()
                await loop.create_connection(
                    lambda: protocol, sock=sock, ssl=context, server_hostname=endpoint.host
                )
                steps["tls"] = clock() - t2
            else:
                await loop.create_connection(lambda: protocol, sock=sock)
                steps["connect"] = clock() - t1
    except TimeoutError as exc:
        raise NotSent(f"could not connect to {endpoint.url} in {connect_timeout} s") from exc
    except OSError as exc:
        raise NotSent(f"could not connect to {endpoint.url}: {exc}") from exc
    return protocol, steps


def default_max_message_bytes() -> int:
    """The millimcp Client's cap on a message, so the profile reads what the Client would."""
    try:
        from millimcp.client.http_link import DEFAULT_MAX_MESSAGE_BYTES
    except ImportError as exc:  # aiohttp: the client extra, part of the lab's
        raise MissingExtra("lab", "profiling an HTTP target", exc.name or "aiohttp") from exc
    return DEFAULT_MAX_MESSAGE_BYTES


async def _connect_any(
    loop: asyncio.AbstractEventLoop, infos: Sequence[tuple[Any, ...]]
) -> socket.socket:
    """A connected, non-blocking TCP_NODELAY socket to the first address that answers."""
    error: OSError | None = None
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    raise error or OSError("no address to connect to")


class ExchangeReader:
    """One response to one request, read from the connection's bytes
    (:class:`~millimcp.lab.http1.ResponseReader`) into an :class:`Exchange`: a JSON body, or
    the event of an SSE stream that answers ``request_id`` (the stream's later events are read
    for framing only)."""

    def __init__(self, request_id: int | str | None, limit: int) -> None:
        self.request_id = request_id
        self.reader = ResponseReader(limit)
        self.exchange = Exchange()
        self.exchange_ready = False
        """The response message is complete (the body, or the SSE response event)."""
        self.finished = False
        """The whole HTTP response has been read."""

    def feed(self, data: bytes, now: int) -> None:
        """Bytes that arrived at ``now``."""
        self._take(self.reader.feed(data, now))

    def feed_eof(self, now: int) -> None:
        """The connection ended at ``now`` (completes a body framed by the connection's end;
        raises :class:`~millimcp.errors.ConnectionLost` inside any other)."""
        self._take(self.reader.feed_eof(now))

    def _take(self, events: list[Event]) -> None:
        exchange = self.exchange
        for event in events:
            if isinstance(event, EventReceived):
                if self.exchange_ready:
                    continue
                if self._is_response(event.data):
                    exchange.body = event.data
                    exchange.first_byte_ns = event.first_byte_ns
                    exchange.last_byte_ns = event.last_byte_ns
                    self.exchange_ready = True
                    self.reader.skip_events()  # the tail of the stream: drained, not kept
                else:
                    exchange.events_before += 1
            elif isinstance(event, ResponseReceived):
                self._head(event.head, event.first_byte_ns)
                exchange.body = event.body
                exchange.last_byte_ns = event.last_byte_ns
                self.exchange_ready = self.finished = True
            elif isinstance(event, StreamStarted):
                self._head(event.head, event.first_byte_ns)
                exchange.sse = True
            else:
                self.finished = True
                if not self.exchange_ready:
                    exchange.last_byte_ns = event.last_byte_ns
                    if exchange.status >= 300:
                        raise RequestRejected(
                            exchange.status, f"HTTP {exchange.status}: a stream without a response"
                        )
                    raise ConnectionLost("the response stream ended before the response")

    def _head(self, head: ResponseHead, first_byte_ns: int) -> None:
        self.exchange.status = head.status
        self.exchange.headers = head.headers
        self.exchange.first_byte_ns = first_byte_ns

    def _is_response(self, event: bytes) -> bool:
        try:
            message = decode_message(event)
        except ProtocolError:
            return False
        if message.method is not msgspec.UNSET:
            return False  # a request or notification the server sent first
        return message.id == self.request_id or message.id is msgspec.UNSET

"""One HTTP/1.1 client connection: an :class:`asyncio.Protocol` fed to httptools' response
parser (llhttp, the parser uvicorn uses), one exchange at a time.

The owner writes a request (:meth:`Connection.send`), awaits its head (:meth:`head`), then
reads the body whole (:meth:`body`) or chunk by chunk (:meth:`chunks`, for SSE). A body of
the tensor framing with a ``Content-Length`` is copied straight into one preallocated
buffer (:attr:`Connection.sink`), never joined from chunks. A streamed body is flow
controlled: past :data:`_HIGH_WATER` unread bytes the socket stops being read.

Errors: a connection that breaks, or a response that does not parse, fails the exchange with
:class:`~millimcp.errors.ConnectionLost`; a body past the cap given to :meth:`send` fails it
with :class:`~millimcp.errors.FrameTooLarge`. Either way the connection is closed and
:attr:`reusable` stays False: only a connection whose whole response was read, and whose
server allows keep-alive, goes back to a pool.
"""

from __future__ import annotations

import asyncio
import collections
import select
import socket
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final, cast

import httptools

from millimcp.codec.attachment import ATTACHMENT_MEDIA_TYPE
from millimcp.errors import ConnectionLost, FrameTooLarge, NotSent

__all__ = ["Connection"]

_HIGH_WATER: Final = 1 << 20
"""Unread bytes of a streamed body above which the socket is no longer read."""


class Connection(asyncio.Protocol):
    """A keep-alive HTTP/1.1 connection (made by :meth:`asyncio.loop.create_connection`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        """The transport is gone (or going): never reused."""
        self.reusable = False
        """The last response was read whole and the server keeps the connection alive."""
        self.idle_since = 0.0
        """When the connection went back to its pool (loop time)."""
        self.exchanges = 0
        """Responses whose head arrived on this connection."""
        self.status = 0
        self._reason = b""
        self.headers: dict[str, str] = {}
        """The response's headers, names in lower case (repeated ones joined by ``", "``)."""
        self.sink: bytearray | None = None
        """A framed body's buffer (its ``Content-Length`` in size), filled as bytes arrive."""
        self._filled = 0
        self._limit = 0
        self._framed_limit = 0
        self._size = 0
        self._unread = 0
        self._chunks: collections.deque[bytes] = collections.deque()
        self._complete = False
        self._active = False
        self._error: BaseException | None = None
        self._head: asyncio.Future[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused_reading = False
        self._drain: asyncio.Future[None] | None = None
        self._fd = -1

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._fd = sock.fileno()
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if not self._active:  # bytes nobody asked for: the server is confused
            self._fail(ConnectionLost("the server sent bytes outside any exchange"))
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(ConnectionLost("the server switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(ConnectionLost(f"a malformed HTTP response: {exc}"))

    def eof_received(self) -> bool | None:
        return None  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if not self._active or self._complete:
            self._wake_drain()
            return
        if self._head is not None and self._head.done() and self._reads_to_close():
            self._complete = True  # a body delimited by the end of the connection
            self._wake()
        else:
            detail = f": {exc!r}" if exc is not None else ""
            self._fail(ConnectionLost(f"the connection closed before the response ended{detail}"))
        self._wake_drain()

    def pause_writing(self) -> None:
        if self._drain is None:
            self._drain = self._loop.create_future()

    def resume_writing(self) -> None:
        self._wake_drain()

    # -- httptools callbacks -----------------------------------------------------------------

    def on_status(self, reason: bytes) -> None:
        self._reason += reason  # decoded when read (:attr:`reason`): most replies are 200

    def on_header(self, name: bytes, value: bytes) -> None:
        headers = self.headers
        key = name.lower().decode("latin-1")  # a token: llhttp refuses anything but ASCII
        if key in headers:
            headers[key] = f"{headers[key]}, {value.decode('latin-1')}"
        else:
            headers[key] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # an interim response (100 Continue): wait for the real one
            self.headers = {}
            self._reason = b""
            return
        self.status = status
        self.exchanges += 1
        headers = self.headers
        kind = headers.get("content-type")
        length = headers.get("content-length")
        if kind is not None:
            if kind.startswith(ATTACHMENT_MEDIA_TYPE):
                self._limit = self._framed_limit
                if length is not None and length.isdigit() and int(length) <= self._limit:
                    self.sink = bytearray(int(length))
            elif kind.startswith("text/event-stream"):
                self._limit = 0  # a stream: each event is capped by its reader, not the whole
        if self._limit and length is not None and length.isdigit() and int(length) > self._limit:
            self._fail(FrameTooLarge(self._limit))
        head = self._head
        if head is not None and not head.done():
            head.set_result(None)

    def on_body(self, body: bytes) -> None:
        if self._error is not None:
            return
        self._size += len(body)
        if self._limit and self._size > self._limit:
            self._fail(FrameTooLarge(self._limit))
            return
        sink = self.sink
        if sink is not None:
            end = self._filled + len(body)
            if end > len(sink):
                self._fail(ConnectionLost("the reply ran past its Content-Length"))
                return
            sink[self._filled : end] = body
            self._filled = end
            return
        self._chunks.append(body)
        self._unread += len(body)
        if not self._limit and self._unread > _HIGH_WATER:
            self._pause()
        waiter = self._waiter  # _wake(), inline
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def on_message_complete(self) -> None:
        if self.status == 0 or self._error is not None:  # an interim response's end
            return
        self._complete = True
        self.reusable = self._parser.should_keep_alive() and not self.closed
        waiter = self._waiter  # _wake(), inline
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- the owner's side --------------------------------------------------------------------

    def send(self, parts: Sequence[Any], *, limit: int, framed_limit: int) -> asyncio.Future[None]:
        """Write one request (its head and body as buffers) and expect its response: a body
        of at most ``limit`` bytes (``framed_limit`` for the tensor framing). Returns the
        future of the response's head: await it (or :meth:`head`), then :meth:`check_head`."""
        transport = self.transport
        if transport is None or self.closed or transport.is_closing():
            raise NotSent("the connection closed before the request was written")
        self.status = 0
        self._reason = b""
        self.headers = {}
        self.sink = None
        self._filled = self._size = self._unread = 0
        self._chunks.clear()
        self._limit = limit
        self._framed_limit = framed_limit
        self._complete = self.reusable = False
        self._error = None
        self._active = True
        head = self._head = self._loop.create_future()
        for part in parts:  # not writelines: before Python 3.12 it joins them (a copy)
            transport.write(part)
        return head

    @property
    def draining(self) -> bool:
        """The transport's write buffer is above its high-water mark (await :meth:`drained`)."""
        return self._drain is not None

    async def drained(self) -> None:
        """Return once the transport's write buffer is below its high-water mark."""
        drain = self._drain
        if drain is not None:
            await drain
            if self._error is not None:
                raise self._error

    async def head(self) -> None:
        """Wait for the response's status and headers."""
        head = self._head
        assert head is not None
        if not head.done():
            self._waiter = head
            try:
                await head
            finally:
                self._waiter = None
        self.check_head()

    def check_head(self) -> None:
        """Raise what failed the exchange before its head arrived (once the head future is
        done)."""
        if self._error is not None and self.status == 0:
            raise self._error

    async def body(self) -> bytes:
        """The whole body (not decoded)."""
        while not self._complete:
            await self._wait()
        return self.whole_body()

    def whole_body(self) -> bytes:
        """The whole body once :attr:`complete` (no wait: the common case, a reply that
        came in one read)."""
        if self._error is not None:
            raise self._error
        self._active = False
        chunks = self._chunks
        if len(chunks) == 1:
            return chunks.popleft()
        data = b"".join(chunks)
        chunks.clear()
        return data

    async def framed(self) -> bytearray:
        """A framed body in one buffer: :attr:`sink` when its size was known, else joined."""
        while not self._complete:
            await self._wait()
        if self._error is not None:
            raise self._error
        self._active = False
        sink = self.sink
        if sink is not None:
            if self._filled != len(sink):
                raise ConnectionLost("the reply ended before its Content-Length")
            return sink
        buffer = bytearray()
        for chunk in self._chunks:
            buffer += chunk
        self._chunks.clear()
        return buffer

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's chunks as they arrive."""
        chunks = self._chunks
        while True:
            while chunks:
                chunk = chunks.popleft()
                self._unread -= len(chunk)
                yield chunk
            if self._paused_reading:
                self._resume()
            if self._complete:
                self._active = False
                return
            await self._wait()

    def stale(self) -> bool:
        """True when the idle connection cannot carry a request: closed, or its socket is
        readable (the server's close, or bytes nobody asked for) though the loop has not read
        it yet (it was busy). One ``poll`` system call."""
        if self.closed or self.transport is None or self.transport.is_closing():
            return True
        if self._fd < 0:
            return False
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        return bool(poller.poll(0))

    def discard(self) -> None:
        """Forget the unread rest of a response that arrived whole."""
        if self._complete:
            self._chunks.clear()
            self._unread = 0
            self._active = False

    def close(self) -> None:
        """Close the connection (the server sees the disconnect); idempotent."""
        self.closed = True
        self.reusable = False
        self._active = False
        if self.transport is not None:
            self.transport.close()

    @property
    def reason(self) -> str:
        """The status line's reason phrase."""
        return self._reason.decode("latin-1")

    @property
    def complete(self) -> bool:
        """The whole response arrived (read or not)."""
        return self._complete

    # -- inside ------------------------------------------------------------------------------

    async def _wait(self) -> None:
        if self._error is not None:
            raise self._error
        waiter = self._waiter = self._loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None
        if self._error is not None:
            raise self._error

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_drain(self) -> None:
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self.close()
        head = self._head
        if head is not None and not head.done():
            head.set_result(None)
        self._wake()

    def _reads_to_close(self) -> bool:
        """The body has neither a length nor chunked framing: it ends with the connection."""
        if "content-length" in self.headers:
            return False
        return "chunked" not in self.headers.get("transfer-encoding", "").lower()

    def _pause(self) -> None:
        if not self._paused_reading and self.transport is not None:
            self._paused_reading = True
            self.transport.pause_reading()

    def _resume(self) -> None:
        if self._paused_reading and self.transport is not None and not self.closed:
            self._paused_reading = False
            self.transport.resume_reading()

"""One HTTP/1.1 connection of the native front: an ``asyncio.Protocol`` fed to llhttp.

``httptools.HttpRequestParser`` calls back as the bytes arrive; a request is judged once its
headers are complete (:meth:`NativeFront.judge`: path, Host/Origin/Content-Type, declared
size, draining), its body is collected as chunks, and complete requests are answered one after
the other, in the order they came (pipelining). A refusal decided before the body arrived is
answered at once and followed by a lingering close: the rest of the body is read and
discarded (``linger_bytes``, ``linger_s``) so that the client reads the answer before the
connection closes.

Deadlines, one timer per connection: ``keepalive_timeout_s`` while idle, ``header_timeout_s``
from a request's first byte to the end of its headers (408), the body deadline and minimum
rate (``body_timeout_s``, ``body_min_rate``, 408), and ``keepalive_timeout_s`` again for a
client that stops reading its responses (the connection is aborted). Write backpressure:
while the transport's buffer is above its high-water mark the connection stops reading and
the answering exchange waits for it to drain.

Draining (:meth:`HttpConnection.shutdown`), an idle kept-alive connection is not closed at
once: a client may be writing its next request into it at that very moment, and a request
that meets a closed socket is lost without a trace the client could tell from a call that ran.
It is closed once idle for :data:`DRAIN_IDLE_S` (or ``keepalive_timeout_s`` if shorter); a
request that comes before then gets the draining 503 (``Connection: close``, the call did not
run), which the client retries elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Final, Protocol

import msgspec

from millimcp.transports.http import HttpConfig
from millimcp.transports.native.buffers import collect
from millimcp.transports.native.exchange import NativeExchange
from millimcp.transports.native.wire import CONTINUE, error_response

__all__ = ["Front", "HttpConnection", "Request", "refusal_closes"]

MAX_URL_BYTES: Final = 8 * 1024
"""A longer request target gets 414 (uvicorn's h11 limit on the whole head is 64 KiB)."""
MAX_HEAD_BYTES: Final = 64 * 1024
"""A longer header block gets 431."""
MAX_PIPELINED: Final = 16
"""Requests queued behind the one being answered before the connection stops reading."""

DRAIN_IDLE_S: Final = 2.0
"""While draining, an idle connection is closed once idle this long: longer than the idle age
past which millimcp's client polls a pooled connection before it reuses it
(:attr:`millimcp.client.native.pool.Pool.check_after_s`, 1 s), so that the client sees the
close instead of writing into it."""

_IDLE, _HEAD, _BODY, _BUSY, _LINGER = range(5)
_NEVER: Final = float("inf")
_PAUSE_QUEUE: Final = 1
_PAUSE_WRITE: Final = 2


class _Stop(Exception):
    """Raised in a parser callback to stop parsing (the request is refused)."""


class Request(msgspec.Struct, eq=False):
    """One request as parsed: head, body chunks, and the front's verdict.

    A struct, not a plain class: one is made per request and msgspec builds it in C (its
    defaults too) where ``__init__`` would run seventeen assignments in Python."""

    url: bytes = b""
    headers: list[tuple[bytes, bytes]] = msgspec.field(default_factory=list)
    fields: dict[bytes, bytes] = msgspec.field(default_factory=dict)
    """The headers as a dict (the last of a repeated name wins, as in ASGI apps)."""
    method: str = "GET"
    path: str = ""
    http10: bool = False
    keep_alive: bool = True
    chunks: list[bytes] = msgspec.field(default_factory=list)
    body: bytearray | None = None
    """Where a framed request's body is collected as it comes (set by the front's
    ``judge``): one writable buffer, each chunk copied in and let go at once
    (:mod:`.buffers`)."""
    size: int = 0
    limit: int = 0
    complete: bool = False
    expect: bool = False
    kind: int = 0
    refusal: bytes | None = None
    """The whole response of a refused request (sent, then the connection closes)."""
    owner: Callable[[list[tuple[bytes, bytes]]], None] | None = None
    """Called with the headers of a response that may open a session (a protected
    endpoint binds the session to its principal: :mod:`.guarded`)."""


class Front(Protocol):
    """What a connection needs of the front it belongs to (:mod:`.front`)."""

    config: HttpConfig
    loop: asyncio.AbstractEventLoop
    httptools: Any
    connections: set[HttpConnection]
    held: int
    draining: bool
    emptied: asyncio.Event

    def judge(self, request: Request) -> None: ...

    def serve(self, conn: HttpConnection, request: Request) -> Coroutine[Any, Any, None]: ...

    def log_failure(self, exc: BaseException | None) -> None: ...


class HttpConnection(asyncio.Protocol):
    """See the module docstring."""

    def __init__(self, front: Front) -> None:
        self.front = front
        self.config = front.config
        self.loop = front.loop
        self.parser: Any = front.httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.queue: deque[Request] = deque()
        self.parsing: Request | None = None
        self.current: Request | None = None
        self.exchange: NativeExchange | None = None
        self.write_paused = False
        self.lost = False
        self.lingering = False
        self.discarded = 0
        self._pauses = 0
        self._drain: asyncio.Future[None] | None = None
        self._closed: asyncio.Future[None] | None = None
        self.deadline = _NEVER
        """When the current state's deadline passes (``loop.time()``); see :meth:`expired`."""
        self._headers: list[tuple[bytes, bytes]] = []
        """The headers of the request being parsed (its ``headers``)."""
        self._head_bytes = 0
        """The size of its header block so far (431 past :data:`MAX_HEAD_BYTES`)."""
        self._state = _IDLE
        self._body_start = 0.0
        self._idle_since = 0.0

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's are not subclasses
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        front = self.front
        front.connections.add(self)
        if len(front.connections) > self.config.max_connections:
            self._refuse_now(
                error_response(
                    503,
                    "Service Unavailable: too many connections",
                    [(b"retry-after", b"1")],
                    close=True,
                )
            )
            return
        self._arm(_IDLE)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        front = self.front
        front.connections.discard(self)
        if front.draining and not front.connections:
            front.emptied.set()
        self.deadline = _NEVER
        for request in self.queue:
            self.front.held -= request.size
        self.queue.clear()
        if self.parsing is not None and not self.parsing.complete:
            self.front.held -= self.parsing.size
            self.parsing = None
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)
        if self.exchange is not None:
            self.exchange.stop_keepalive()

    def eof_received(self) -> bool | None:
        # A client that half-closes has gone, as far as HTTP/1.1 knows (uvicorn's reading
        # too): the connection closes and the handler in flight sees the disconnect.
        return None

    def pause_writing(self) -> None:
        self.write_paused = True
        self._pause(_PAUSE_WRITE)

    def resume_writing(self) -> None:
        self.write_paused = False
        self._resume(_PAUSE_WRITE)
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            self.discarded += len(data)
            if self.discarded > self.config.linger_bytes:
                self.close()
            return
        try:
            self.parser.feed_data(data)
        except _Stop:
            pass
        except self.front.httptools.HttpParserUpgrade:
            request = self.queue[-1] if self.queue else None
            if request is not None:
                request.keep_alive = False  # no protocol switch here: answer, then close
            self._pause(_PAUSE_QUEUE)
        except self.front.httptools.HttpParserError as exc:
            cause = exc.__context__
            if not isinstance(cause, _Stop):
                self._bad_request(f"Bad Request: {exc}")
        self._kick()

    # -- parser callbacks ---------------------------------------------------------------

    def on_message_begin(self) -> None:
        # No deadline set here, nor when the headers are complete: a request that arrives
        # whole within one read is never timed, and one that does not is armed by _kick at
        # the end of that same read (header deadline, then body deadline).
        request = self.parsing = Request()
        self._headers = request.headers
        self._head_bytes = 0

    def on_url(self, url: bytes) -> None:
        request = self.parsing
        assert request is not None
        request.url += url
        if len(request.url) > MAX_URL_BYTES:
            self._refuse_parsing(414, "URI Too Long")

    def on_header(self, name: bytes, value: bytes) -> None:
        # Called once per header: the parsing request's list and running size are kept on
        # the connection (set by on_message_begin), one attribute away.
        size = self._head_bytes + len(name) + len(value) + 4
        self._head_bytes = size
        if size > MAX_HEAD_BYTES:
            self._refuse_parsing(431, "Request Header Fields Too Large")
        self._headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        request = self.parsing
        assert request is not None
        parser = self.parser
        request.method = parser.get_method().decode("latin-1")
        version = parser.get_http_version()
        request.http10 = version == "1.0"
        request.keep_alive = version == "1.1" and parser.should_keep_alive()
        if version not in ("1.0", "1.1"):
            self._refuse_parsing(505, "HTTP Version Not Supported")
        self.front.judge(request)
        self.queue.append(request)
        if request.refusal is not None:
            if _has_body(request.headers):
                raise _Stop  # the rest is discarded by the lingering close
            return
        if request.expect and self.current is None and len(self.queue) == 1:
            request.expect = False
            self.write(CONTINUE)
        if len(self.queue) > MAX_PIPELINED:
            self._pause(_PAUSE_QUEUE)

    def on_body(self, body: bytes) -> None:
        request = self.parsing
        assert request is not None
        if request.refusal is not None:
            return
        request.size += len(body)
        self.front.held += len(body)
        if request.size > request.limit:
            request.refusal = error_response(
                413, f"Request body larger than {request.limit} bytes", close=True
            )
            raise _Stop
        if self.front.held > self.config.max_body_bytes_in_flight:
            request.refusal = error_response(
                503,
                "Service Unavailable: too many request bytes in flight",
                [(b"retry-after", b"1")],
                close=True,
            )
            raise _Stop
        collected = request.body
        if collected is not None:
            collect(collected, request.size, body)
        else:
            request.chunks.append(body)

    def on_message_complete(self) -> None:
        request = self.parsing
        assert request is not None
        request.complete = True
        self.parsing = None
        if self._state in (_HEAD, _BODY):
            self._arm(_BUSY)

    # -- answering ----------------------------------------------------------------------

    def _kick(self) -> None:
        """Answer the first queued request when nothing is being answered."""
        if self.current is not None or self.lost or self.lingering:
            return
        if self.transport is None or self.transport.is_closing():
            return
        queue = self.queue
        while queue:
            request = queue[0]
            if request.refusal is not None:
                queue.popleft()
                self.front.held -= request.size
                closing = b"\r\nconnection: close\r\n\r\n" in request.refusal
                if not closing:
                    self.write(request.refusal)
                    continue
                self._refuse_now(request.refusal)
                return
            if not request.complete:
                if request.expect:
                    request.expect = False
                    self.write(CONTINUE)
                if self._state != _BODY:
                    self._arm(_BODY)
                return
            queue.popleft()
            self.current = request
            self._arm(_BUSY)
            task = self.loop.create_task(self.front.serve(self, request))
            task.add_done_callback(self._answered)
            if self._pauses & _PAUSE_QUEUE and len(queue) <= MAX_PIPELINED // 2:
                self._resume(_PAUSE_QUEUE)
            return
        if self.parsing is None:
            if self.front.draining:
                self.close()
            else:
                self._arm(_IDLE)
        elif self._state != _HEAD:
            self._arm(_HEAD)

    def _answered(self, task: asyncio.Task[None]) -> None:
        request = self.current
        self.current = None
        exchange = self.exchange
        self.exchange = None
        if request is not None:
            self.front.held -= request.size
        if self.lost:
            return
        failed = task.cancelled() or task.exception() is not None
        if failed and not task.cancelled():
            self.front.log_failure(task.exception())
        if (
            failed
            or request is None
            or not request.keep_alive
            or self.front.draining
            or (exchange is not None and (exchange.close or not exchange.finished))
        ):
            self.close()
            return
        self._kick()

    def write(self, data: bytes) -> None:
        transport = self.transport
        if not self.lost and transport is not None and not transport.is_closing():
            transport.write(data)

    async def drain(self) -> None:
        """Wait until the write buffer is under its low-water mark (or the client left);
        a client that reads nothing for ``keepalive_timeout_s`` is disconnected."""
        if self.lost or not self.write_paused:
            return
        if self._drain is None or self._drain.done():
            self._drain = self.loop.create_future()
        stalled = self.loop.call_later(self.config.keepalive_timeout_s, self.abort)
        try:
            await self._drain
        finally:
            stalled.cancel()

    async def wait_closed(self) -> None:
        if self.lost:
            return
        if self._closed is None:
            self._closed = self.loop.create_future()
        await asyncio.shield(self._closed)

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def shutdown(self) -> None:
        """Draining: an idle connection closes once idle for :data:`DRAIN_IDLE_S` (now, if it
        already was), a busy one after its current answer."""
        if self.current is None and not self.queue and self.parsing is None:
            closes = self._idle_since + min(self.config.keepalive_timeout_s, DRAIN_IDLE_S)
            if closes <= self.loop.time():
                self.close()
            else:
                self.deadline = min(self.deadline, closes)

    # -- refusals and timers ------------------------------------------------------------

    def _refuse_parsing(self, status: int, text: str) -> None:
        request = self.parsing
        assert request is not None
        request.refusal = error_response(status, text, close=True)
        self.queue.append(request)
        raise _Stop

    def _bad_request(self, text: str) -> None:
        request = Request()
        request.refusal = error_response(400, text, close=True)
        request.keep_alive = False
        request.headers = [(b"transfer-encoding", b"?")]  # lingering close
        failed = self.parsing
        if failed is not None:  # the request being parsed is replaced by the 400
            self.front.held -= failed.size
            failed.size = 0
            if failed in self.queue:
                self.queue.remove(failed)
        self.parsing = None
        self.queue.append(request)

    def _refuse_now(self, response: bytes) -> None:
        """Send a refusal, half-close, and discard what still comes for a bounded time."""
        self.write(response)
        self.lingering = True
        for request in self.queue:
            self.front.held -= request.size
            request.size = 0
        self.queue.clear()
        self.parsing = None
        transport = self.transport
        assert transport is not None
        if transport.can_write_eof():
            with contextlib.suppress(OSError, RuntimeError):
                transport.write_eof()
        self._resume(_PAUSE_QUEUE | _PAUSE_WRITE)
        self._arm(_LINGER)

    def _arm(self, state: int) -> None:
        """Enter ``state`` and set its deadline (the front's sweep checks it, no timer)."""
        self._state = state
        config = self.config
        if state == _BUSY:
            self.deadline = _NEVER
            return
        now = self.loop.time()
        if state == _IDLE:
            self._idle_since = now
            idle_s = config.keepalive_timeout_s
            if self.front.draining:
                idle_s = min(idle_s, DRAIN_IDLE_S)
            self.deadline = now + idle_s
        elif state == _HEAD:
            self.deadline = now + config.header_timeout_s
        elif state == _BODY:
            self._body_start = now
            self.deadline = now + min(1.0, config.body_timeout_s)
        else:
            self.deadline = now + config.linger_s

    def expired(self, now: float) -> None:
        """The deadline passed (called by the front's sweep)."""
        self.deadline = _NEVER
        state = self._state
        if state in (_IDLE, _LINGER):
            self.close()
            return
        if state == _BODY:
            request = self.queue[0] if self.queue else self.parsing
            elapsed = now - self._body_start
            rate = self.config.body_min_rate
            if request is not None and not request.complete:
                kept = rate > 0 and request.size >= rate * elapsed
                if kept or (rate <= 0 and elapsed < self.config.body_timeout_s):
                    self.deadline = now + 1.0  # check the rate again in a second
                    return
            elif request is not None:
                return
        elif state == _BUSY:
            return
        if self.current is None:
            self._refuse_now(error_response(408, "Request Timeout", close=True))
        else:
            self.close()

    def _pause(self, reason: int) -> None:
        if not self._pauses and self.transport is not None:
            self.transport.pause_reading()
        self._pauses |= reason

    def _resume(self, reason: int) -> None:
        if not self._pauses:
            return
        self._pauses &= ~reason
        if not self._pauses and self.transport is not None and not self.lost:
            self.transport.resume_reading()


def _has_body(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a body follows these headers (chunked, or a ``Content-Length`` not 0)."""
    for name, value in headers:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


def refusal_closes(request: Request) -> bool:
    """Whether a refusal of ``request`` closes the connection: the client does not keep it
    alive, or a body follows that the refusal will not read. Asked only when refusing."""
    return not request.keep_alive or _has_body(request.headers)

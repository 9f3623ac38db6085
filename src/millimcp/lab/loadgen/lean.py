"""The lean generator: pre-serialized ``tools/call`` requests on raw keep-alive HTTP/1.1.

The request the millimcp Client sent once (:class:`~millimcp.lab.target.CallTemplate`) is
resent as bytes with only the JSON-RPC id spliced in. Each connection is an asyncio
``Protocol`` with one request in flight; its responses are framed by the lab's HTTP/1.1
reader (:mod:`millimcp.lab.http1`): ``Content-Length``, chunked, or the connection's end. A
``text/event-stream`` reply is read to the event that carries the response, then drained to
its end (its later events read for framing only), so the connection is reused. The hot path
is a buffer scan, one typed msgspec decode of the envelope and one ``transport.write``.

Replies are classified by :func:`classify`: ``http_<status>``, ``jsonrpc_<code>``,
``tool_error`` (``isError: true``), ``protocol`` (a reply that is not a JSON-RPC response);
the loop adds ``timeout`` and ``connection``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import ssl as ssl_module
import time
from collections.abc import Callable
from typing import Any, Final, cast

import msgspec

from millimcp.errors import ConnectionLost, FrameTooLarge, ResponseFramingError
from millimcp.lab.http1 import (
    Event,
    EventReceived,
    ResponseReader,
    ResponseReceived,
    StreamStarted,
)
from millimcp.lab.loadgen.loop import Loop, Plan, Ready, Slot, measure
from millimcp.lab.recording import LoadReport, Recorder, TickReport
from millimcp.lab.results import TOOL_ERROR
from millimcp.lab.target import CallTemplate
from millimcp.protocol.jsonrpc import ErrorObject

__all__ = ["classify", "parse_response", "prepare_lean", "run_lean"]

_MAX_BODY: Final = 64 * 1024 * 1024
_RECONNECT_PAUSE_S: Final = 0.05
_SWEEP_S: Final = 0.1


# -- framing and classification ---------------------------------------------------------------


def parse_response(buf: bytes) -> tuple[int, bytes, int] | None:
    """Frame one complete HTTP/1.1 response at the start of ``buf`` (a one-shot read).

    Returns ``(status, body, bytes consumed)``, or None while ``buf`` holds only part of it.
    The body must be framed by ``Content-Length`` or chunked encoding (else
    :class:`~millimcp.errors.ResponseFramingError`); an event stream is returned as its raw
    body.
    """
    reader = ResponseReader(_MAX_BODY, until_close=False, streams=False)
    for event in reader.feed(buf, 0):
        if type(event) is ResponseReceived:
            return event.head.status, event.body, len(buf) - reader.buffered
    return None


class _CallResult(msgspec.Struct):
    is_error: Any = msgspec.field(default=False, name="isError")


class _Envelope(msgspec.Struct):
    """The lean path's view of a ``tools/call`` reply: one typed decode, nothing kept but
    what classifies it (the protocol's own decode keeps ``result`` raw and needs a second
    pass for ``isError``). Its error object is the protocol's :class:`ErrorObject`."""

    id: Any = None
    method: Any = None
    result: _CallResult | None = None
    error: ErrorObject | None = None


_ENVELOPE: Final = msgspec.json.Decoder(_Envelope)


def _kind(status: int, message: _Envelope) -> str | None:
    if message.error is not None:
        return f"jsonrpc_{message.error.code}"
    if status >= 300:
        return f"http_{status}"
    if message.result is None:
        return "protocol"
    if message.result.is_error is True:
        return TOOL_ERROR
    return None


def classify(status: int, body: bytes) -> str | None:
    """The error kind of a ``tools/call`` reply (None: a successful result).

    A JSON-RPC error is ``jsonrpc_<code>`` whatever the HTTP status; another status >= 300 is
    ``http_<status>``; a result with ``isError: true`` is ``tool_error``; anything that is not
    a JSON-RPC response is ``protocol``.
    """
    try:
        message = _ENVELOPE.decode(body)
    except msgspec.DecodeError:
        return f"http_{status}" if status >= 300 else "protocol"
    return _kind(status, message)


# -- one connection ---------------------------------------------------------------------------


class _Connection(asyncio.Protocol, Slot):
    """One keep-alive connection carrying one call at a time."""

    __slots__ = (
        "answered",
        "closing",
        "engine",
        "reader",
        "request_id",
        "sent_at",
        "status",
        "streaming",
        "t0",
        "transport",
    )

    def __init__(self, engine: _LeanLoop) -> None:
        self.engine = engine
        self.transport: asyncio.Transport | None = None
        self.reader = ResponseReader(_MAX_BODY)
        self.t0 = -1  # -1: idle
        self.sent_at = 0
        self.request_id = 0
        self.status = 0
        self.streaming = False
        """An event stream is being read (answered or not)."""
        self.answered = False
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def start(self, t0: int) -> None:
        engine = self.engine
        self.t0 = t0
        request_id = next(engine.ids)
        self.request_id = request_id
        digits = b"%d" % request_id
        self.sent_at = time.perf_counter_ns()
        assert self.transport is not None
        self.transport.write(engine.request_format % (engine.fixed_length + len(digits), digits))

    def data_received(self, data: bytes) -> None:
        try:
            events = self.reader.feed(data, 0)
        except (ResponseFramingError, FrameTooLarge) as exc:
            self._broken("protocol", exc)
            return
        self._take(events)

    def eof_received(self) -> bool | None:
        """The server closed its side: a body framed by the connection's end is complete."""
        self.closing = True
        try:
            events = self.reader.feed_eof(0)
        except ConnectionLost:
            return None  # inside a response: connection_lost counts it
        self._take(events)
        return None

    def _take(self, events: list[Event]) -> None:
        for event in events:
            if type(event) is ResponseReceived:
                if event.head.close:
                    self.closing = True
                self.engine.complete(self, classify(event.head.status, event.body))
            elif type(event) is EventReceived:
                if not self.answered:
                    self._answer(event.data)
            elif type(event) is StreamStarted:
                self.status = event.head.status
                self.streaming = True
                self.answered = False
                if event.head.close:
                    self.closing = True
            else:  # StreamEnded
                self.streaming = False
                if self.answered:
                    self.engine.release(self)
                else:
                    self.engine.complete(self, "protocol")

    def _answer(self, data: bytes) -> None:
        """An event of the reply's stream: the response, or something sent before it."""
        try:
            message = _ENVELOPE.decode(data)
        except msgspec.DecodeError:
            return
        if message.method is None and message.id == self.request_id:
            self.answered = True
            self.reader.skip_events()  # the rest of the stream: drained, not parsed
            self.engine.record(self, _kind(self.status, message))

    def _broken(self, kind: str, exc: BaseException | None) -> None:
        transport, self.transport = self.transport, None
        if transport is not None:
            transport.abort()
        self.engine.lost(self, kind)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            self.transport = None
            self.engine.lost(self, "connection")

    def close(self) -> None:
        transport, self.transport = self.transport, None
        if transport is not None:
            transport.close()


# -- the loop over connections ----------------------------------------------------------------


class _LeanLoop(Loop):
    """The closed or open loop over keep-alive connections."""

    def __init__(
        self,
        plan: Plan,
        recorder: Recorder,
        template: CallTemplate,
        id_base: int,
        ssl: ssl_module.SSLContext | None,
    ) -> None:
        super().__init__(plan, recorder)
        self.template = template
        self.ssl = ssl
        self.ids = itertools.count(id_base)
        prefix = template.request_prefix()
        self.request_format = (
            prefix.replace(b"%", b"%%")
            + b"%d\r\n\r\n"
            + template.body_head.replace(b"%", b"%%")
            + b"%s"
            + template.body_tail.replace(b"%", b"%%")
        )
        self.fixed_length = len(template.body_head) + len(template.body_tail)
        self.connections: set[_Connection] = set()
        self.opened = 0
        self._reconnects: set[asyncio.Task[None]] = set()

    async def open_connection(self) -> _Connection:
        template = self.template
        _, connection = await self.loop.create_connection(
            lambda: _Connection(self),
            template.host,
            template.port,
            ssl=self.ssl,
            server_hostname=template.host if self.ssl is not None else None,
        )
        self.opened += 1
        self.connections.add(connection)
        return connection

    def record(self, connection: _Connection, kind: str | None) -> None:
        """The response to ``connection``'s call arrived (the connection may still be busy
        draining an event stream)."""
        t0, connection.t0 = connection.t0, -1
        if t0 < 0:
            return
        now = time.perf_counter_ns()
        self.in_flight -= 1
        if t0 >= self.window_ns:
            if kind is None:
                self.recorder.batch.append(now - t0)
            else:
                self.recorder.tick_errors[kind] += 1

    def complete(self, connection: _Connection, kind: str | None) -> None:
        """A whole response arrived on ``connection``: record it, start the next call."""
        now = time.perf_counter_ns()
        t0, connection.t0 = connection.t0, -1
        if t0 < 0:  # a response nobody asked for: the server is confused
            connection._broken("protocol", None)
            return
        self.in_flight -= 1
        if t0 >= self.window_ns:
            if kind is None:
                self.recorder.batch.append(now - t0)
            else:
                self.recorder.tick_errors[kind] += 1
        if connection.closing:
            self.release(connection)
        elif self.closed_loop and not self.stopping and self.plan.requests is None:
            self.in_flight += 1  # the common case of ready(): send again at once
            connection.start(now)
        else:
            self.ready(connection, now)

    def release(self, connection: _Connection) -> None:
        """``connection`` is free for the next call."""
        if connection.closing:
            connection.close()
            self.connections.discard(connection)
            self._replace()
            return
        self.ready(connection, time.perf_counter_ns())

    def lost(self, connection: _Connection, kind: str) -> None:
        self.connections.discard(connection)
        with contextlib.suppress(ValueError):
            self.idle.remove(connection)
        t0, connection.t0 = connection.t0, -1
        if t0 >= 0:
            self.failed(t0, kind)
        if not (self.stopping and self.closed_loop):
            self._replace()
        self._check_drained()

    def _replace(self) -> None:
        task = self.loop.create_task(self._reconnect())
        self._reconnects.add(task)
        task.add_done_callback(self._reconnects.discard)

    async def _reconnect(self) -> None:
        while not self.drained.is_set():
            try:
                connection = await self.open_connection()
            except OSError:
                if time.perf_counter_ns() >= self.window_ns:
                    self.recorder.tick_errors["connection"] += 1
                await asyncio.sleep(_RECONNECT_PAUSE_S)
                continue
            self.ready(connection, time.perf_counter_ns())
            return

    async def sweep(self) -> None:
        """Fail calls older than the timeout (their connection is closed and replaced), and
        replace a connection whose answered event stream stays open that long."""
        timeout = self.plan.timeout_s
        if timeout is None:
            return
        limit = int(timeout * 1e9)
        while True:
            await asyncio.sleep(min(_SWEEP_S, timeout / 4))
            now = time.perf_counter_ns()
            for connection in list(self.connections):
                if now - connection.sent_at <= limit:
                    continue
                if connection.t0 >= 0:
                    connection._broken("timeout", None)
                elif connection.streaming:  # answered, but the stream never ends
                    connection._broken("timeout", None)  # replaced; the call already counted

    async def close(self) -> None:
        for task in list(self._reconnects):
            task.cancel()
        for task in list(self._reconnects):
            with contextlib.suppress(BaseException):
                await task
        for connection in list(self.connections):
            connection.close()
        self.connections.clear()
        await asyncio.sleep(0)


async def prepare_lean(
    template: CallTemplate,
    plan: Plan,
    on_tick: Callable[[TickReport], None],
    *,
    id_base: int = 1_000_000_000,
    ssl: ssl_module.SSLContext | None = None,
) -> Ready:
    """Open ``plan.concurrency`` connections; :attr:`Ready.go` runs the plan on them."""
    recorder = Recorder()
    engine = _LeanLoop(plan, recorder, template, id_base, ssl)
    try:
        slots: list[Slot] = list(
            await asyncio.gather(*(engine.open_connection() for _ in range(plan.concurrency)))
        )
    except BaseException:
        await engine.close()
        raise

    async def go(start_ns: int) -> LoadReport:
        sweeper = asyncio.get_running_loop().create_task(engine.sweep())
        try:
            window_s, cpu_s = await measure(engine, slots, start_ns, on_tick)
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            await engine.close()
        return recorder.report(window_s=window_s, cpu_s=cpu_s, connections=engine.opened)

    return Ready(go, engine.close)


async def run_lean(
    template: CallTemplate,
    plan: Plan,
    on_tick: Callable[[TickReport], None],
    *,
    id_base: int = 1_000_000_000,
    ssl: ssl_module.SSLContext | None = None,
) -> LoadReport:
    """Connect, then run ``plan`` at once (a single-process run)."""
    ready = await prepare_lean(template, plan, on_tick, id_base=id_base, ssl=ssl)
    report: LoadReport = await ready.go(time.perf_counter_ns())
    return report

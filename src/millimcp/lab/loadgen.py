"""The load generator: closed and open loops of one tool call, cheap enough to measure servers.

Two ways to make a call:

- **lean** (HTTP): the request the millimcp Client sent once
  (:class:`~millimcp.lab.target.CallTemplate`) is resent as pre-serialized bytes with only
  the JSON-RPC id spliced in, over raw keep-alive HTTP/1.1 connections: each an asyncio
  ``Protocol`` with one request in flight, responses framed by ``Content-Length`` or chunked
  encoding; a ``text/event-stream`` reply is read to the event that carries the response
  (then drained to its end, so the connection is reused). The hot path is a buffer scan, one
  typed msgspec decode of the envelope and one ``transport.write``.
- **full**: :meth:`millimcp.Client.call_tool` (stdio targets; ``--client full`` on HTTP), to
  measure with a realistic client's cost.

Two loops:

- **closed**: each of ``concurrency`` slots (connections, or Client workers) sends its next
  call as soon as the previous one is answered; latency runs from the send. A server stall
  delays only the calls in flight and the ones never sent are not measured at all, so the
  percentiles hide it (coordinated omission).
- **open**: calls are due on a fixed schedule (``rate`` per second); a due call goes out on an
  idle slot or waits in a queue, and its latency runs from the time it was *due*, so queueing
  behind a stall is counted.

Only calls sent (closed) or due (open) after the warmup count; after the window no new call
starts, and those in flight or queued are waited for (up to the timeout). Errors are counted
by kind: ``http_<status>``, ``jsonrpc_<code>``, ``tool_error`` (``isError: true``),
``timeout``, ``connection``, ``protocol`` (a reply that is not a JSON-RPC response).

``python -m millimcp.lab.loadgen`` runs one process of a multi-process run (``--processes``):
a JSON spec on stdin, ``ready``, a start time, then tick lines and a final report on stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import math
import os
import ssl as ssl_module
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

import msgspec

from millimcp.lab.recording import LoadReport, Recorder, TickReport
from millimcp.lab.target import CallTemplate, Target

__all__ = [
    "ChildSpec",
    "Plan",
    "ResponseFramingError",
    "classify",
    "parse_response",
    "run_full",
    "run_lean",
]

_HEADER_END: Final = b"\r\n\r\n"
_CONTENT_LENGTH: Final = b"\r\ncontent-length:"
_CONTENT_TYPE: Final = b"\r\ncontent-type:"
_CHUNKED: Final = b"\r\ntransfer-encoding: chunked"
_CLOSE: Final = b"\r\nconnection: close"
_EVENT_STREAM: Final = b"text/event-stream"
_LENGTH_AT: Final = len(_CONTENT_LENGTH)
_MAX_HEAD: Final = 64 * 1024
_MAX_BODY: Final = 64 * 1024 * 1024
_RECONNECT_PAUSE_S: Final = 0.05
_SWEEP_S: Final = 0.1
_DRAIN_GRACE_S: Final = 1.0


class ResponseFramingError(Exception):
    """The server sent something this minimal HTTP/1.1 reader refuses to frame."""


# -- plans ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plan:
    """One process's share of a run.

    ``start_ns`` is the ``time.perf_counter_ns()`` at which the warmup begins (all processes
    of a run agree on it); the measured window opens ``warmup_s`` later and lasts
    ``duration_s``, or until ``requests`` measured calls are sent (closed) or due (open).
    Open loop: this process's calls are due ``rate`` times per second, the first ``phase_s``
    after ``start_ns`` (of P processes sharing a total rate R, each gets R / P and process k
    starts k / R late: together they make one schedule of R per second).
    """

    mode: Literal["closed", "open"]
    concurrency: int
    duration_s: float | None = 10.0
    requests: int | None = None
    warmup_s: float = 0.0
    rate: float | None = None
    phase_s: float = 0.0
    timeout_s: float | None = 30.0
    tick_s: float = 1.0


# -- HTTP framing and classification ----------------------------------------------------------


def _header(head: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` (``b"\\r\\nname:"``) in a lower-cased head."""
    i = head.find(name)
    if i < 0:
        return None
    j = head.find(b"\r\n", i + len(name))
    return head[i + len(name) : j if j >= 0 else None].strip()


def _status(head: bytes) -> int:
    try:
        return int(head[9:12])
    except ValueError:
        raise ResponseFramingError(f"bad status line: {bytes(head[:40])!r}") from None


def parse_response(buf: bytes) -> tuple[int, bytes, int] | None:
    """Frame one complete HTTP/1.1 response at the start of ``buf``.

    Returns ``(status, body, bytes consumed)``, or None while ``buf`` holds only part of it.
    The body is framed by ``Content-Length`` or chunked encoding (trailers are not expected).
    """
    end = buf.find(_HEADER_END)
    if end < 0:
        if len(buf) > _MAX_HEAD:
            raise ResponseFramingError("response head too large")
        return None
    head = buf[:end].lower()
    status = _status(head)
    start = end + 4
    length = _header(head, _CONTENT_LENGTH)
    if length is not None:
        stop = start + int(length)
        return None if len(buf) < stop else (status, buf[start:stop], stop)
    if _CHUNKED in head:
        chunks = _Chunked()
        body, done, rest = chunks.feed(buf[start:])
        return (status, body, len(buf) - len(rest)) if done else None
    if status in (204, 304) or 100 <= status < 200:
        return status, b"", start
    raise ResponseFramingError("response has neither Content-Length nor chunked framing")


class _Chunked:
    """An incremental decoder of chunked transfer encoding."""

    __slots__ = ("_buf", "_left", "_parts", "done")

    def __init__(self) -> None:
        self._buf = b""
        self._left = -1  # -1: a size line is next; n >= 0: n data bytes, then CRLF
        self._parts: list[bytes] = []
        self.done = False

    def feed(self, data: bytes) -> tuple[bytes, bool, bytes]:
        """(the data decoded so far and not yet returned, finished?, bytes after the end)."""
        buf = self._buf + data if self._buf else data
        pos = 0
        parts = self._parts
        while True:
            if self._left < 0:
                line_start = pos
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                line = buf[pos:eol].split(b";", 1)[0].strip()
                try:
                    size = int(line, 16)
                except ValueError:
                    raise ResponseFramingError(f"bad chunk size {bytes(line[:20])!r}") from None
                pos = eol + 2
                if size == 0:
                    end = buf.find(b"\r\n", pos)  # the empty line after (no trailers)
                    if end < 0:
                        pos = line_start  # parse the last size line again with its CRLF
                        break
                    self.done = True
                    self._buf = b""
                    self._parts = []
                    return b"".join(parts), True, buf[end + 2 :]
                self._left = size
            if len(buf) - pos < self._left + 2:
                if self._left and len(buf) > pos:
                    take = min(self._left, len(buf) - pos)
                    parts.append(buf[pos : pos + take])
                    self._left -= take
                    pos += take
                break
            parts.append(buf[pos : pos + self._left])
            pos += self._left + 2
            self._left = -1
        self._buf = buf[pos:]
        if len(self._buf) > _MAX_HEAD and self._left < 0:
            raise ResponseFramingError("chunk size line too long")
        out = b"".join(parts)
        self._parts = []
        return out, False, b""


class _Error(msgspec.Struct):
    code: int = 0


class _CallResult(msgspec.Struct):
    is_error: Any = msgspec.field(default=False, name="isError")


class _Envelope(msgspec.Struct):
    id: Any = None
    method: Any = None
    result: _CallResult | None = None
    error: _Error | None = None


_ENVELOPE: Final = msgspec.json.Decoder(_Envelope)


def _kind(status: int, message: _Envelope) -> str | None:
    if message.error is not None:
        return f"jsonrpc_{message.error.code}"
    if status >= 300:
        return f"http_{status}"
    if message.result is None:
        return "protocol"
    if message.result.is_error is True:
        return "tool_error"
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


# -- the loop -----------------------------------------------------------------------------


class _Slot:
    """Something that can carry one call at a time (a connection, a Client worker)."""

    __slots__ = ()

    def start(self, t0: int) -> None:
        raise NotImplementedError


class _Loop:
    """Closed or open scheduling over slots, shared by the lean and full generators."""

    def __init__(self, plan: Plan, recorder: Recorder) -> None:
        self.plan = plan
        self.recorder = recorder
        self.loop = asyncio.get_running_loop()
        self.closed_loop = plan.mode == "closed"
        self.idle: list[_Slot] = []
        self.queue: deque[int] = deque()
        self.in_flight = 0
        self.stopping = False
        self.drained = asyncio.Event()
        self.start_ns = 0
        self.window_ns = 0
        self.window_end_ns: int | None = None
        self.sent = 0  # measured calls started (closed) or due (open)
        self._due = 0
        self._arrivals = 0
        self._first_due = 0
        self._interval_ns = 0.0
        self._timers: dict[str, asyncio.TimerHandle] = {}

    # the schedule

    def begin(self, slots: list[_Slot], start_ns: int) -> None:
        plan = self.plan
        self.start_ns = start_ns
        self.window_ns = start_ns + int(plan.warmup_s * 1e9)
        if plan.duration_s is not None:
            self.window_end_ns = self.window_ns + int(plan.duration_s * 1e9)
        now = time.perf_counter_ns()
        if self.closed_loop:
            if self.window_end_ns is not None:
                self._later("stop", self.window_end_ns - now, self._stop)
            for slot in slots:
                self.ready(slot, time.perf_counter_ns())
            return
        self.idle.extend(slots)
        if not plan.rate or plan.rate <= 0:
            raise ValueError("an open loop needs a rate above 0")
        self._interval_ns = 1e9 / plan.rate
        self._first_due = start_ns + int(plan.phase_s * 1e9)
        warm = max(0, math.ceil((self.window_ns - self._first_due) / self._interval_ns))
        if plan.requests is not None:
            self._arrivals = warm + plan.requests
        else:
            assert self.window_end_ns is not None
            self._arrivals = max(
                0, math.ceil((self.window_end_ns - self._first_due) / self._interval_ns)
            )
        self._later("arrive", self._first_due - now, self._arrive)

    def _later(self, name: str, delay_ns: int | float, callback: Callable[[], None]) -> None:
        self._timers[name] = self.loop.call_later(max(0.0, delay_ns / 1e9), callback)

    def _arrive(self) -> None:
        now = time.perf_counter_ns()
        window = self.window_ns
        while self._due < self._arrivals:
            due = self._first_due + int(self._due * self._interval_ns)
            if due > now:
                self._later("arrive", due - now, self._arrive)
                return
            self._due += 1
            if due >= window:
                self.sent += 1
            if self.idle:
                self._send(self.idle.pop(), due)
            else:
                self.queue.append(due)
        self._stop()

    def _stop(self) -> None:
        self.stopping = True
        self._check_drained()

    def _check_drained(self) -> None:
        if self.stopping and self.in_flight == 0 and not self.queue:
            self.drained.set()

    def _send(self, slot: _Slot, t0: int) -> None:
        self.in_flight += 1
        slot.start(t0)

    # slots report back

    def finished(self, slot: _Slot, t0: int, kind: str | None) -> None:
        """``slot``'s call that was due/sent at ``t0`` ended (``kind`` None: success)."""
        now = time.perf_counter_ns()
        self.in_flight -= 1
        if t0 >= self.window_ns:
            if kind is None:
                self.recorder.batch.append(now - t0)
            else:
                self.recorder.tick_errors[kind] += 1
        self.ready(slot, now)

    def failed(self, t0: int, kind: str) -> None:
        """A call ended without its slot (the slot is gone: a broken connection)."""
        self.in_flight -= 1
        if t0 >= self.window_ns:
            self.recorder.tick_errors[kind] += 1
        self._check_drained()

    def ready(self, slot: _Slot, now: int) -> None:
        """``slot`` can carry a call: the next one, or it waits."""
        if self.closed_loop:
            if not self.stopping:
                if now >= self.window_ns:
                    self.sent += 1
                    if self.plan.requests is not None and self.sent >= self.plan.requests:
                        self.stopping = True
                self._send(slot, now)
                return
        elif self.queue:
            self._send(slot, self.queue.popleft())
            return
        self.idle.append(slot)
        self._check_drained()

    async def run(self, on_tick: Callable[[TickReport], None]) -> float:
        """Tick until drained (or the drain limit passed); the window's length in seconds."""
        plan = self.plan
        tick_ns = int(plan.tick_s * 1e9)
        limit_ns = int(((plan.timeout_s or 30.0) + _DRAIN_GRACE_S) * 1e9)
        stopped_at: int | None = None
        second = 0
        while not self.drained.is_set():
            next_tick = self.window_ns + (second + 1) * tick_ns
            wait_s = (next_tick - time.perf_counter_ns()) / 1e9
            if wait_s > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.drained.wait(), wait_s)
            now = time.perf_counter_ns()
            if now >= next_tick:
                on_tick(self.recorder.tick(second))
                second += 1
            if self.stopping and stopped_at is None:
                stopped_at = now
            if stopped_at is not None and now - stopped_at > limit_ns:
                break
        end = time.perf_counter_ns()
        for timer in self._timers.values():
            timer.cancel()
        last = second
        if self.window_end_ns is not None:  # the drain's stragglers join the window's last tick
            last = min(
                second, max(0, math.ceil((self.window_end_ns - self.window_ns) / tick_ns) - 1)
            )
        on_tick(self.recorder.tick(last))
        if self.window_end_ns is not None:
            return (self.window_end_ns - self.window_ns) / 1e9
        return max(0.0, (end - self.window_ns) / 1e9)

    def abandon(self) -> None:
        """Count what never finished (after the drain limit) as timeouts."""
        window = self.window_ns
        for t0 in self.queue:
            if t0 >= window:
                self.recorder.errors["timeout"] += 1
        self.queue.clear()


# -- lean: raw keep-alive HTTP/1.1 --------------------------------------------------------


class _Stream:
    """Reading one ``text/event-stream`` reply to the event carrying the response."""

    __slots__ = ("answered", "chunked", "left", "parser", "status")

    def __init__(self, status: int, head: bytes) -> None:
        from millimcp.codec import SseParser

        self.status = status
        self.parser = SseParser(_MAX_BODY)
        length = _header(head, _CONTENT_LENGTH)
        self.left = int(length) if length is not None else -1
        self.chunked = _Chunked() if length is None and _CHUNKED in head else None
        self.answered = False


class _Connection(asyncio.Protocol, _Slot):
    __slots__ = (
        "buf",
        "closing",
        "engine",
        "request_id",
        "sent_at",
        "stream",
        "t0",
        "transport",
    )

    def __init__(self, engine: _LeanLoop) -> None:
        self.engine = engine
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.t0 = -1  # -1: idle
        self.sent_at = 0
        self.request_id = 0
        self.stream: _Stream | None = None
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            import socket

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
            if self.stream is not None:
                self._read_stream(data)
            else:
                self._read(data)
        except (ResponseFramingError, ValueError) as exc:
            self._broken("protocol", exc)

    def _read(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        end = buf.find(_HEADER_END)
        if end < 0:
            if len(buf) > _MAX_HEAD:
                raise ResponseFramingError("response head too large")
            self.buf = buf
            return
        head = buf[:end].lower()
        status = _status(head)
        start = end + 4
        if _CLOSE in head:
            self.closing = True
        if _EVENT_STREAM in head:
            content_type = _header(head, _CONTENT_TYPE)
            if content_type is not None and content_type.startswith(_EVENT_STREAM):
                self.buf = b""
                self.stream = _Stream(status, head)
                self._read_stream(buf[start:])
                return
        i = head.find(_CONTENT_LENGTH)
        if i >= 0:
            i += _LENGTH_AT
            j = head.find(b"\r\n", i)
            stop = start + int(head[i : j if j >= 0 else None])
            if len(buf) < stop:
                if stop > _MAX_BODY:
                    raise ResponseFramingError("response body too large")
                self.buf = buf
                return
            body = buf[start:stop]
        elif _CHUNKED in head:
            parsed = parse_response(buf)
            if parsed is None:
                self.buf = buf
                return
            body, stop = parsed[1], parsed[2]
        elif status in (204, 304):
            body, stop = b"", start
        else:
            raise ResponseFramingError("response has neither Content-Length nor chunked framing")
        self.buf = buf[stop:]
        self.engine.complete(self, classify(status, body))

    def _read_stream(self, data: bytes) -> None:
        stream = self.stream
        assert stream is not None
        finished = False
        if stream.chunked is not None:
            data, finished, _ = stream.chunked.feed(data)
        elif stream.left >= 0:
            data, stream.left = data[: stream.left], stream.left - len(data)
            finished = stream.left <= 0
        for event in stream.parser.feed(data) if data else ():
            if stream.answered:
                continue
            try:
                message = _ENVELOPE.decode(event)
            except msgspec.DecodeError:
                continue
            if message.method is None and message.id == self.request_id:
                stream.answered = True
                self.engine.record(self, _kind(stream.status, message))
        if finished:
            self.stream = None
            self.buf = b""
            if stream.answered:
                self.engine.release(self)
            else:
                self._done("protocol")

    def _done(self, kind: str | None) -> None:
        self.engine.complete(self, kind)

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


class _LeanLoop(_Loop):
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
                elif connection.stream is not None:  # answered, but the stream never ends
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


@dataclass(slots=True)
class Ready:
    """A generator that is connected and waits for its start time."""

    go: Callable[[int], Any]
    """``await ready.go(start_ns)``: run the plan from ``start_ns``; returns the report."""
    close: Callable[[], Any]


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
        slots: list[_Slot] = list(
            await asyncio.gather(*(engine.open_connection() for _ in range(plan.concurrency)))
        )
    except BaseException:
        await engine.close()
        raise

    async def go(start_ns: int) -> LoadReport:
        sweeper = asyncio.get_running_loop().create_task(engine.sweep())
        try:
            window_s, cpu_s = await _measure(engine, slots, start_ns, on_tick)
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            await engine.close()
        return recorder.report(window_s=window_s, cpu_s=cpu_s, connections=engine.opened)

    return Ready(go, engine.close)


async def _measure(
    engine: _Loop, slots: list[_Slot], start_ns: int, on_tick: Callable[[TickReport], None]
) -> tuple[float, float]:
    """Run the plan with the collector paused (the hot path allocates little); returns the
    window's length and this process's CPU seconds over it."""
    gc.collect()
    gc.disable()
    cpu0 = time.process_time()
    try:
        engine.begin(slots, start_ns)
        window_s = await engine.run(on_tick)
    finally:
        gc.enable()
    cpu_s = time.process_time() - cpu0
    if engine.in_flight or engine.queue:
        engine.abandon()
        engine.recorder.errors["timeout"] += max(0, engine.in_flight)
    return window_s, cpu_s


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


# -- full: the millimcp Client -------------------------------------------------------------


class _Worker(_Slot):
    __slots__ = ("engine",)

    def __init__(self, engine: _FullLoop) -> None:
        self.engine = engine

    def start(self, t0: int) -> None:
        self.engine.spawn(self, t0)


class _FullLoop(_Loop):
    def __init__(
        self,
        plan: Plan,
        recorder: Recorder,
        client: Any,
        tool: str,
        arguments: Mapping[str, Any] | None,
    ) -> None:
        super().__init__(plan, recorder)
        self.client = client
        self.tool = tool
        self.arguments = arguments
        self.tasks: set[asyncio.Task[None]] = set()

    def spawn(self, worker: _Worker, t0: int) -> None:
        task = self.loop.create_task(self._call(worker, t0))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _call(self, worker: _Worker, t0: int) -> None:
        kind = await call_kind(self.client, self.tool, self.arguments, self.plan.timeout_s)
        self.finished(worker, t0, kind)

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        for task in list(self.tasks):
            with contextlib.suppress(BaseException):
                await task


async def call_kind(
    client: Any, tool: str, arguments: Mapping[str, Any] | None, timeout_s: float | None
) -> str | None:
    """Call ``tool`` through a :class:`millimcp.Client`; the error kind, or None."""
    from millimcp.errors import (
        CallTimeout,
        ConnectionLost,
        MillimcpError,
        NotSent,
        ProtocolError,
        RequestRejected,
    )

    try:
        result = await client.call_tool(tool, arguments, timeout=timeout_s)
    except CallTimeout:
        return "timeout"
    except ProtocolError as exc:
        return f"jsonrpc_{exc.code}"
    except RequestRejected as exc:
        return f"http_{exc.status}"
    except (NotSent, ConnectionLost, OSError):
        return "connection"
    except MillimcpError:
        return "protocol"
    return "tool_error" if result.is_error else None


async def prepare_full(
    client: Any,
    tool: str,
    arguments: Mapping[str, Any] | None,
    plan: Plan,
    on_tick: Callable[[TickReport], None],
) -> Ready:
    """``plan.concurrency`` workers calling through an open Client."""
    recorder = Recorder()
    engine = _FullLoop(plan, recorder, client, tool, arguments)
    slots: list[_Slot] = [_Worker(engine) for _ in range(plan.concurrency)]

    async def go(start_ns: int) -> LoadReport:
        try:
            window_s, cpu_s = await _measure(engine, slots, start_ns, on_tick)
        finally:
            await engine.close()
        return recorder.report(window_s=window_s, cpu_s=cpu_s)

    return Ready(go, engine.close)


async def run_full(
    client: Any,
    tool: str,
    arguments: Mapping[str, Any] | None,
    plan: Plan,
    on_tick: Callable[[TickReport], None],
) -> LoadReport:
    """Run ``plan`` at once through an open Client (a single-process run)."""
    ready = await prepare_full(client, tool, arguments, plan, on_tick)
    report: LoadReport = await ready.go(time.perf_counter_ns())
    return report


# -- one process of a multi-process run ---------------------------------------------------


class ChildSpec(msgspec.Struct, kw_only=True):
    """What the parent tells a child process (one JSON line on its stdin)."""

    plan: Plan
    tool: str
    arguments: dict[str, Any] | None
    id_base: int
    template: CallTemplate | None = None
    """Lean: the request to resend. Full: None, and the child opens its own Client."""
    target: Target | None = None
    era: Literal["auto", "modern", "handshake"] = "auto"


def _emit(line: dict[str, Any]) -> None:
    sys.stdout.buffer.write(msgspec.json.encode(line) + b"\n")
    sys.stdout.buffer.flush()


async def _child(spec: ChildSpec) -> None:
    from millimcp.lab.target import connect, ssl_context

    def on_tick(tick: TickReport) -> None:
        _emit({"tick": tick})

    async with contextlib.AsyncExitStack() as stack:
        if spec.template is not None:
            context = ssl_context(spec.target) if spec.target is not None else None
            ready = await prepare_lean(
                spec.template, spec.plan, on_tick, id_base=spec.id_base, ssl=context
            )
        else:
            assert spec.target is not None
            connection = await stack.enter_async_context(
                connect(
                    spec.target,
                    era=spec.era,
                    call_timeout=spec.plan.timeout_s,
                    max_in_flight=spec.plan.concurrency,
                )
            )
            ready = await prepare_full(
                connection.client, spec.tool, spec.arguments, spec.plan, on_tick
            )
        _emit({"ready": True})
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        start_at = float(msgspec.json.decode(line)["start_at"])
        start_ns = time.perf_counter_ns() + int((start_at - time.time()) * 1e9)
        report = await ready.go(start_ns)
        _emit({"report": report})


def run_event_loop(main: Any) -> Any:
    """Run a coroutine on uvloop when it is installed (cheaper per call), else asyncio."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def child_main() -> int:
    line = sys.stdin.readline()
    spec = msgspec.json.decode(line, type=ChildSpec)
    try:
        run_event_loop(_child(spec))
    except Exception as exc:
        _emit({"failed": f"{type(exc).__name__}: {exc}"})
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(child_main())

"""A deliberately cheap closed-loop HTTP/1.1 load generator for one pre-serialized request.

Each connection is a bare asyncio ``Protocol`` with exactly one request in flight: the next
request is written from ``data_received`` as soon as the previous response is complete, so
the hot path is a buffer scan, a few byte comparisons and one ``transport.write`` of bytes
built once up front. Responses are framed by ``Content-Length`` or chunked encoding only, by
the lab's framing (``millimcp.lab.loadgen.parse_response``, shared with ``millimcp bench``).
``millimcp bench`` is the general tool (open loop, eras, SSE, several processes); this module
keeps the benchmarks' narrower closed loop, whose windows are sampled by a callback.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from millimcp.lab.loadgen import ResponseFramingError, parse_response
from millimcp.protocol.types import META_CLIENT_INFO
from millimcp.testing import MODERN_VERSION, modern_request

PROTOCOL_VERSION = MODERN_VERSION
ECHO_TEXT = "hello"

_BAD_MARKERS = (b'"isError":true', b'"error":{')


ProtocolError = ResponseFramingError
"""The server sent something the minimal HTTP parser refuses to frame."""


BENCH_CLIENT_META: dict[str, object] = {META_CLIENT_INFO: {"name": "bench", "version": "1.0.0"}}
"""What the benchmark clients add to a modern request's ``_meta``: who they are."""


def http1_request(host: str, port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    """A keep-alive HTTP/1.1 POST of ``body`` as raw bytes: ``headers``, then Content-Length."""
    fields = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{fields}"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("ascii") + body


def build_request(host: str, port: int, path: str, text: str = ECHO_TEXT) -> bytes:
    """One keep-alive ``tools/call`` POST in the 2026-07-28 per-request envelope, as raw bytes."""
    params = {"name": "echo", "arguments": {"text": text}, "_meta": BENCH_CLIENT_META}
    body, headers = modern_request("tools/call", params)
    return http1_request(host, port, path, body, headers)


def response_ok(status: int, body: bytes, marker: bytes) -> bool:
    """The cheap per-response check: HTTP 200, the echoed text present, no error shapes."""
    return status == 200 and marker in body and not any(bad in body for bad in _BAD_MARKERS)


@dataclass
class LoadResult:
    """What one measured window saw, from the client side."""

    calls: int
    errors: int
    wall_s: float
    latencies_ns: list[int]
    client_cpu_s: float
    sampled: dict[str, float]  # after - before, per key of the ``sample`` snapshots
    warmup_calls: int
    warmup_errors: int
    error_samples: list[str] = field(default_factory=list)


class _State:
    __slots__ = (
        "drained",
        "error_samples",
        "errors",
        "in_flight",
        "latencies",
        "marker",
        "measuring",
        "next_request",
        "ok",
        "request",
        "running",
    )

    def __init__(
        self, request: bytes, marker: bytes, next_request: Callable[[], bytes] | None = None
    ) -> None:
        self.request = request
        self.next_request = next_request
        self.marker = marker
        self.running = True
        self.measuring = False
        self.ok = 0
        self.errors = 0
        self.in_flight = 0
        self.drained = asyncio.Event()
        self.latencies: list[int] = []
        self.error_samples: list[str] = []

    def finished_one(self) -> None:
        self.in_flight -= 1
        if not self.running and self.in_flight == 0:
            self.drained.set()

    def stop(self) -> None:
        self.running = False
        if self.in_flight == 0:
            self.drained.set()

    def record_error(self, detail: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(detail)


class _Connection(asyncio.Protocol):
    __slots__ = ("buf", "pending", "state", "t0", "transport")

    def __init__(self, state: _State) -> None:
        self.state = state
        self.buf = b""
        self.t0 = 0
        self.pending = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self) -> None:
        assert self.transport is not None
        self.pending = True
        self.state.in_flight += 1
        next_request = self.state.next_request
        request = self.state.request if next_request is None else next_request()
        self.t0 = time.perf_counter_ns()
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
        state = self.state
        buf = self.buf + data if self.buf else data
        try:
            parsed = parse_response(buf)
        except (ProtocolError, ValueError) as exc:
            state.record_error(f"unparseable response: {exc}")
            self._abort()
            return
        if parsed is None:
            self.buf = buf
            return
        status, body, consumed = parsed
        self.buf = buf[consumed:]
        self.pending = False
        state.finished_one()
        if response_ok(status, body, state.marker):
            state.ok += 1
            if state.measuring:
                state.latencies.append(now - self.t0)
        else:
            state.record_error(f"HTTP {status}: {body[:300]!r}")
        if state.running:
            self.send()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.state.running:
            self.state.record_error(f"connection lost mid-run: {exc!r}")
        if self.pending:
            self.pending = False
            self.state.finished_one()
        self.transport = None

    def _abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def run_load(
    *,
    host: str,
    port: int,
    request: bytes,
    marker: bytes,
    connections: int,
    warmup_s: float,
    duration_s: float,
    sample: Callable[[], dict[str, float]],
    next_request: Callable[[], bytes] | None = None,
) -> LoadResult:
    """Drive ``connections`` closed-loop connections: ``warmup_s`` unmeasured, then ``duration_s``.

    ``sample`` (e.g. the server's CPU counters) is called at both edges of the measured window.
    ``next_request``, when given, makes each request's bytes instead of resending ``request``
    (e.g. a fresh JSON-RPC id per call, as a session requires).
    """
    loop = asyncio.get_running_loop()
    state = _State(request, marker, next_request)
    conns: list[_Connection] = []
    for _ in range(connections):
        _, proto = await loop.create_connection(lambda: _Connection(state), host, port)
        conns.append(proto)
    for conn in conns:
        conn.send()

    await asyncio.sleep(warmup_s)

    gc.collect()
    gc.disable()  # the window allocates only ints and short bytes; keep collector pauses out
    try:
        before = sample()
        client0 = time.process_time()
        ok0, errors0 = state.ok, state.errors
        t0 = time.perf_counter()
        state.measuring = True
        await asyncio.sleep(duration_s)
        state.measuring = False
        t1 = time.perf_counter()
        ok1, errors1 = state.ok, state.errors
        client1 = time.process_time()
        after = sample()
    finally:
        gc.enable()

    state.stop()
    with contextlib.suppress(TimeoutError):  # let in-flight calls finish before closing
        await asyncio.wait_for(state.drained.wait(), 2.0)
    for conn in conns:
        conn.close()
    await asyncio.sleep(0)

    return LoadResult(
        calls=ok1 - ok0,
        errors=errors1 - errors0,
        wall_s=t1 - t0,
        latencies_ns=state.latencies,
        client_cpu_s=client1 - client0,
        sampled={key: after[key] - before[key] for key in before},
        warmup_calls=ok0,
        warmup_errors=errors0,
        error_samples=state.error_samples,
    )


def probe(host: str, port: int, request: bytes, timeout_s: float = 10.0) -> tuple[int, bytes]:
    """Send one request on a fresh blocking socket; return ``(status, body)``."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(request)
        buf = b""
        while True:
            parsed = parse_response(buf)
            if parsed is not None:
                return parsed[0], parsed[1]
            chunk = sock.recv(65536)
            if not chunk:
                raise ProtocolError(f"connection closed after {len(buf)} bytes: {buf[:300]!r}")
            buf += chunk

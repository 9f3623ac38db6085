"""The client's own work per ``tools/call``, in-process: ``Client.over_http`` at its defaults
(the native link, ``era="auto"``) over a fake network that answers from canned bytes.

No server runs and no socket is opened: the event loop (uvloop) is given a
``create_connection`` that hands the client's :class:`asyncio.Protocol` a loopback transport,
which reads each request written to it (head, ``Content-Length``, the JSON-RPC id) and
answers it on the next loop iteration with the bytes uvicorn sends for millimcp's echo
server (``server/discover`` and ``tools/call``). Everything the client does per call runs
(pipeline, deadline, gate, retries, envelope, link, pool, connection, httptools, decoding);
only the kernel and the server are gone, so the count is deterministic. It is the
``client`` target of ``benchmarks/instructions.py`` (``make perf``), and a profiling
harness::

    .venv/bin/python benchmarks/client_loopback.py --calls 20000 --profile
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

import uvloop

ECHO = "hello"
HEAD = (
    b"HTTP/1.1 200 OK\r\ndate: Wed, 02 Dec 2026 06:32:53 GMT\r\nserver: uvicorn\r\n"
    b"content-type: application/json\r\ncontent-length: %d\r\n\r\n"
)
RESULTS = {
    b"server/discover": (
        b'{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":'
        b'{"name":"bench","version":"1.0.0"}},"ttlMs":60000,"cacheScope":"public",'
        b'"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true},'
        b'"logging":{}}}'
    ),
    b"tools/call": (
        b'{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":'
        b'{"name":"bench","version":"1.0.0"}},"content":[{"type":"text","text":"hello"}]}'
    ),
}


def _canned(result: bytes) -> tuple[bytes, bytes]:
    """The reply to a request as the bytes before and after its id: the id is padded to
    :data:`ID_WIDTH` (JSON allows the spaces), so the ``Content-Length`` is known ahead."""
    body = b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (b"%s", result)
    before, after = body.split(b"%s")
    return HEAD % (len(body) - 2 + ID_WIDTH) + before, after


ID_WIDTH = 12
REPLIES = {method: _canned(result) for method, result in RESULTS.items()}


class LoopbackTransport(asyncio.Transport):
    """Answers every whole request written to it, one loop iteration later (as cheaply as
    it can: its work is counted with the client's)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol: asyncio.Protocol) -> None:
        super().__init__()
        self._loop = loop
        self._protocol = protocol
        self._buffer = b""
        self._closing = False

    def write(self, data: Any) -> None:
        buffer = self._buffer + bytes(data) if self._buffer else bytes(data)
        while buffer:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                break
            start = buffer.find(b"Content-Length: ", 0, end) + 16
            stop = end + 4 + int(buffer[start : buffer.index(b"\r", start)])
            if len(buffer) < stop:
                break
            at = buffer.index(b'"id":', end) + 5
            request_id = buffer[at : buffer.index(b",", at)]
            call = buffer.find(b"Mcp-Method: tools/call\r", 0, end) >= 0
            before, after = REPLIES[b"tools/call" if call else b"server/discover"]
            reply = before + request_id.rjust(ID_WIDTH) + after
            self._loop.call_soon(self._protocol.data_received, reply)
            buffer = buffer[stop:]
        self._buffer = buffer

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._loop.call_soon(self._protocol.connection_lost, None)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


class LoopbackLoop(uvloop.Loop):
    """uvloop, whose connections are :class:`LoopbackTransport`\\ s."""

    async def create_connection(  # type: ignore[override]
        self, protocol_factory: Callable[[], asyncio.Protocol], *args: Any, **kwargs: Any
    ) -> tuple[asyncio.Transport, asyncio.Protocol]:
        protocol = protocol_factory()
        transport = LoopbackTransport(self, protocol)
        protocol.connection_made(transport)
        return transport, protocol


async def drive(calls: int, in_flight: int) -> None:
    """``calls`` echo calls, ``in_flight`` at a time, over one client; checks every answer."""
    from millimcp import Client

    async with Client.over_http("http://127.0.0.1:8000/mcp") as client:
        left = calls

        async def loop() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                result = await client.call_tool("echo", {"text": ECHO})
                if result.is_error or result.text != ECHO:
                    raise SystemExit(f"unexpected answer: {result!r}")

        await asyncio.gather(*(loop() for _ in range(in_flight)))


def run(calls: int, in_flight: int) -> None:
    with asyncio.Runner(loop_factory=LoopbackLoop) as runner:
        runner.run(drive(calls, in_flight))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--profile", action="store_true", help="print a cProfile by own time")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    run(200, args.in_flight)  # imports and first calls out of the way
    profiler = cProfile.Profile(time.process_time) if args.profile else None
    t0 = time.process_time()
    if profiler is not None:
        profiler.enable()
    run(args.calls, args.in_flight)
    if profiler is not None:
        profiler.disable()
    cpu = time.process_time() - t0
    per_call = cpu / args.calls * 1e6
    print(f"{args.calls} calls, {args.in_flight} in flight: {per_call:.1f} µs CPU/call")
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())

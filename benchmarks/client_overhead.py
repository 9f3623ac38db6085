"""Client CPU per trivial ``tools/call``: the official SDK vs millimcp's client vs raw loops.

One millimcp server (``servers/millimcp_echo.py`` under uvicorn, httptools, uvloop) is pinned
to ``--server-cpu`` for the whole invocation. Each measurement is a fresh client subprocess
pinned to ``--client-cpu`` that calls ``echo("hello")`` with a fixed number of calls in flight
(concurrent tasks over one client; for the raw streams loop, one connection per task): a
warm-up, then a measured window. Inside the window the worker reads its own user+sys CPU
(``resource.getrusage``: every thread of the client process), counts completed calls and
records each call's latency. Clients and concurrency levels alternate run by run; medians over
runs are reported, with the client CPU per call as ratios against the raw aiohttp loop and
against the official client at the same concurrency.

Clients:

- ``official``: ``mcp.Client(url)`` from ``mcp`` 2.3.0 at its defaults (``mode="auto"``: it
  probes ``server/discover`` and lands in the 2026-07-28 era; Streamable HTTP over httpx2).
- ``millimcp``: ``millimcp.Client.over_http(url)`` at its defaults (``era="auto"``, the native
  HTTP/1.1 link on asyncio.Protocol + httptools).
- ``millimcp-aiohttp``: the same over the aiohttp link (``http="aiohttp"``).
- ``aiohttp``: one ``aiohttp.ClientSession`` posting the same pre-serialized 2026-07-28 body
  with the MCP headers, reading the body and checking it cheaply. The floor for an aiohttp
  client.
- ``streams``: hand-written HTTP/1.1 keep-alive requests over ``asyncio.open_connection``,
  responses framed by ``Content-Length``. The floor for any asyncio client.

    .venv/bin/python benchmarks/client_overhead.py --runs 3
    .venv/bin/python benchmarks/client_overhead.py --profile millimcp --in-flight 32
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from harness import (
    HOST,
    ServerProcess,
    calibrate,
    child_env,
    environment,
    json_safe,
    packages_line,
    percentile_ms,
    pinned,
    proc_cpu_s,
    proc_status,
    serving,
    uvicorn_command,
)
from loadgen import ECHO_TEXT, ProtocolError, build_request, response_ok

SCRIPT = Path(__file__).resolve()
PATH = "/mcp"
SERVER_MODULE = "millimcp_echo"
EXTRA_PACKAGES = ("aiohttp", "httpx2", "anyio", "pydantic")
BASELINE = "aiohttp"
RESULT_PREFIX = "RESULT "
WINDOW_LINE = "WINDOW"

Call = Callable[[], Awaitable[bool]]
"""One ``tools/call``: True when the answer is a success carrying the echoed text."""


@dataclass(frozen=True)
class ClientSpec:
    name: str
    description: str


CLIENTS: dict[str, ClientSpec] = {
    c.name: c
    for c in (
        ClientSpec("official", "mcp 2.3.0 Client(url), defaults: mode='auto' (discover, modern)"),
        ClientSpec("millimcp", "millimcp Client.over_http(url), defaults: era='auto', native link"),
        ClientSpec("millimcp-aiohttp", "millimcp Client.over_http(url, http='aiohttp')"),
        ClientSpec("aiohttp", "raw aiohttp ClientSession, pre-serialized body and headers"),
        ClientSpec("streams", "raw asyncio streams, hand-written HTTP/1.1, one connection/task"),
        ClientSpec("lean", "millimcp's client core over StreamsLink (benchmark only, no aiohttp)"),
    )
}


# --------------------------------------------------------------------------- the clients
# Each opener checks one answer in depth, then yields one ``Call`` per task (the same one when
# the tasks share a client) and a function that says, after the run, what it negotiated.


@contextlib.asynccontextmanager
async def open_official(
    url: str, in_flight: int
) -> AsyncIterator[tuple[list[Call], Callable[[], str]]]:
    from mcp import Client  # the official SDK (mcp 2.3.0)

    async with Client(url) as client:
        first = await client.call_tool("echo", {"text": ECHO_TEXT})
        text = getattr(first.content[0], "text", None) if first.content else None
        if first.is_error or text != ECHO_TEXT:
            raise RuntimeError(f"unexpected first answer: {first!r}")

        async def call() -> bool:
            result = await client.call_tool("echo", {"text": ECHO_TEXT})
            return not result.is_error

        version = getattr(client.session, "protocol_version", None)
        yield [call] * in_flight, lambda: f"protocol {version}"


@contextlib.asynccontextmanager
async def open_millimcp(
    url: str, in_flight: int, http: Any = None
) -> AsyncIterator[tuple[list[Call], Callable[[], str]]]:
    from millimcp import Client

    async with Client.over_http(url, http=http) as client:
        first = await client.call_tool("echo", {"text": ECHO_TEXT})
        text = getattr(first.content[0], "text", None) if first.content else None
        if first.is_error or text != ECHO_TEXT:
            raise RuntimeError(f"unexpected first answer: {first!r}")

        async def call() -> bool:
            result = await client.call_tool("echo", {"text": ECHO_TEXT})
            return not result.is_error

        yield (
            [call] * in_flight,
            lambda: f"era {client.era}, {client.protocol_version}, {client.stats}",
        )


def split_request(request: bytes) -> tuple[dict[str, str], bytes]:
    """The MCP headers and body of :func:`loadgen.build_request`'s bytes (one source of truth)."""
    head, _, body = request.partition(b"\r\n\r\n")
    headers: dict[str, str] = {}
    for line in head.decode("ascii").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.lower() not in ("host", "content-length"):
            headers[name] = value.strip()
    return headers, body


@contextlib.asynccontextmanager
async def open_aiohttp(
    url: str, in_flight: int
) -> AsyncIterator[tuple[list[Call], Callable[[], str]]]:
    import aiohttp

    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    headers, body = split_request(build_request(HOST, port, PATH))
    marker = f'"{ECHO_TEXT}"'.encode()
    connector = aiohttp.TCPConnector(limit=in_flight)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def call() -> bool:
            async with session.post(url, data=body, headers=headers) as response:
                data = await response.read()
                return response_ok(response.status, data, marker)

        if not await call():
            raise RuntimeError("the first answer was not a success")
        yield [call] * in_flight, lambda: f"aiohttp {aiohttp.__version__}, limit={in_flight}"


class StreamConnection:
    """One kept-alive connection: write the request bytes, frame the answer by Content-Length."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes):
        self.reader = reader
        self.writer = writer
        self.request = request
        self.marker = f'"{ECHO_TEXT}"'.encode()

    async def call(self) -> bool:
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lower = head.lower()
        start = lower.find(b"\r\ncontent-length:")
        if start < 0:
            raise ProtocolError(f"no Content-Length: {head[:300]!r}")
        start += 17
        length = int(lower[start : lower.index(b"\r\n", start)])
        body = await self.reader.readexactly(length)
        return response_ok(int(head[9:12]), body, self.marker)


@contextlib.asynccontextmanager
async def open_streams(
    url: str, in_flight: int
) -> AsyncIterator[tuple[list[Call], Callable[[], str]]]:
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    request = build_request(HOST, port, PATH)
    conns: list[StreamConnection] = []
    try:
        for _ in range(in_flight):
            reader, writer = await asyncio.open_connection(HOST, port)
            conns.append(StreamConnection(reader, writer, request))
        if not await conns[0].call():
            raise RuntimeError("the first answer was not a success")
        yield [c.call for c in conns], lambda: f"{in_flight} connections"
    finally:
        for conn in conns:
            conn.writer.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                await conn.writer.wait_closed()


class StreamsLink:
    """A benchmark-only :class:`millimcp.client.link.Link`: HTTP/1.1 keep-alive over asyncio
    streams, replies framed by ``Content-Length`` (JSON only: no SSE, no compression, no
    session, no server-to-client messages). Under millimcp's client core it shows what the core
    would cost over a transport as lean as the ``streams`` loop."""

    kind = "http"
    session_id = None

    def __init__(self, url: str) -> None:
        from millimcp.client.link import Reply
        from millimcp.protocol import decode_message

        self.reply, self.decode = Reply, decode_message
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or HOST, parts.port or 80
        self.prefix = (
            f"POST {parts.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        ).encode()
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        idle, self.idle = self.idle, []
        for _, writer in idle:
            writer.close()

    async def request(
        self,
        request_id: int | str,
        body: bytes,
        *,
        headers: Any,
        on_message: Any,
        attachment: Any = None,
    ) -> Any:
        status, data = await self._exchange(body, headers)
        return self.reply(self.decode(data), status)

    async def send(self, body: bytes, *, headers: Any) -> None:
        await self._exchange(body, headers)

    async def _exchange(self, body: bytes, headers: Any) -> tuple[int, bytes]:
        conn = self.idle.pop() if self.idle else await asyncio.open_connection(self.host, self.port)
        reader, writer = conn
        try:
            extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
            writer.write(
                b"%s%sContent-Length: %d\r\n\r\n%s" % (self.prefix, extra.encode(), len(body), body)
            )
            head = await reader.readuntil(b"\r\n\r\n")
            lower = head.lower()
            start = lower.find(b"\r\ncontent-length:")
            if start < 0:
                raise ProtocolError(f"no Content-Length: {head[:300]!r}")
            start += 17
            data = await reader.readexactly(int(lower[start : lower.index(b"\r\n", start)]))
        except BaseException:
            writer.close()  # a cancelled or broken exchange never goes back to the pool
            raise
        self.idle.append(conn)
        return int(head[9:12]), data

    async def unsolicited(self) -> AsyncIterator[Any]:
        return
        yield

    def reset_session(self) -> None:
        return None


@contextlib.asynccontextmanager
async def open_lean(
    url: str, in_flight: int
) -> AsyncIterator[tuple[list[Call], Callable[[], str]]]:
    from millimcp import Client

    async with Client(StreamsLink(url), key=url) as client:  # type: ignore[arg-type]
        first = await client.call_tool("echo", {"text": ECHO_TEXT})
        text = getattr(first.content[0], "text", None) if first.content else None
        if first.is_error or text != ECHO_TEXT:
            raise RuntimeError(f"unexpected first answer: {first!r}")

        async def call() -> bool:
            result = await client.call_tool("echo", {"text": ECHO_TEXT})
            return not result.is_error

        yield [call] * in_flight, lambda: f"era {client.era}, {client.protocol_version}"


def open_millimcp_aiohttp(
    url: str, in_flight: int
) -> contextlib.AbstractAsyncContextManager[tuple[list[Call], Callable[[], str]]]:
    return open_millimcp(url, in_flight, http="aiohttp")


OPENERS: dict[str, Callable[[str, int], contextlib.AbstractAsyncContextManager[Any]]] = {
    "official": open_official,
    "millimcp": open_millimcp,
    "millimcp-aiohttp": open_millimcp_aiohttp,
    "aiohttp": open_aiohttp,
    "streams": open_streams,
    "lean": open_lean,
}


# --------------------------------------------------------------------------- the worker


@dataclass
class WorkerResult:
    calls: int
    errors: int
    warmup_calls: int
    wall_s: float
    user_s: float
    sys_s: float
    server_cpu_s: float
    p50_ms: float
    p99_ms: float
    negotiated: str
    error_samples: list[str] = field(default_factory=list)


class _Load:
    __slots__ = ("error_samples", "errors", "latencies", "measuring", "ok", "running")

    def __init__(self) -> None:
        self.running = True
        self.measuring = False
        self.ok = 0
        self.errors = 0
        self.latencies: list[int] = []
        self.error_samples: list[str] = []

    def failed(self, detail: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(detail)


async def _loop(call: Call, load: _Load) -> None:
    clock = time.perf_counter_ns
    while load.running:
        t0 = clock()
        try:
            ok = await call()
        except Exception as exc:  # every failure is counted and reported, none ends the run
            load.failed(f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(0.01)
            continue
        if ok:
            load.ok += 1
            if load.measuring:
                load.latencies.append(clock() - t0)
        else:
            load.failed("an answer that is not the echoed text")


def _cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # the whole process: every thread
    return usage.ru_utime, usage.ru_stime


async def fixed_calls(args: argparse.Namespace) -> WorkerResult:
    """``--calls N``: exactly N calls over the tasks, no window (for instruction counts)."""
    url = f"http://{HOST}:{args.port}{PATH}"
    left = args.calls
    errors = 0

    async def loop(call: Call) -> None:
        nonlocal left, errors
        while left > 0:
            left -= 1
            if not await call():
                errors += 1

    async with OPENERS[args.worker](url, args.in_flight) as (calls, describe):
        await asyncio.gather(*(loop(call) for call in calls))
        negotiated = describe()
    nan = float("nan")
    return WorkerResult(args.calls, errors, 0, nan, nan, nan, nan, nan, nan, negotiated)


async def drive(args: argparse.Namespace) -> WorkerResult:
    if args.calls is not None:
        return await fixed_calls(args)
    url = f"http://{HOST}:{args.port}{PATH}"
    load = _Load()
    async with OPENERS[args.worker](url, args.in_flight) as (calls, describe):
        tasks = [asyncio.create_task(_loop(call, load)) for call in calls]
        await asyncio.sleep(args.warmup)
        gc.collect()  # the collector stays on: what a client allocates is part of its cost
        profiler = _start_profile(args.profile_out)
        server0 = sum(proc_cpu_s(args.server_pid))
        user0, sys0 = _cpu()
        ok0, errors0 = load.ok, load.errors
        t0 = time.perf_counter()
        load.measuring = True
        print(WINDOW_LINE, flush=True)  # a profiler may attach now
        await asyncio.sleep(args.duration)
        load.measuring = False
        t1 = time.perf_counter()
        user1, sys1 = _cpu()
        ok1, errors1 = load.ok, load.errors
        server1 = sum(proc_cpu_s(args.server_pid))
        _stop_profile(profiler, args.profile_out)
        load.running = False
        _done, pending = await asyncio.wait(tasks, timeout=10)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        negotiated = describe()
    lat = sorted(load.latencies)
    return WorkerResult(
        calls=ok1 - ok0,
        errors=errors1 - errors0,
        warmup_calls=ok0,
        wall_s=t1 - t0,
        user_s=user1 - user0,
        sys_s=sys1 - sys0,
        server_cpu_s=server1 - server0,
        p50_ms=percentile_ms(lat, 0.50),
        p99_ms=percentile_ms(lat, 0.99),
        negotiated=negotiated,
        error_samples=load.error_samples + ([f"{errors0} during warm-up"] if errors0 else []),
    )


def _start_profile(path: str | None) -> Any:
    if path is None:
        return None
    import cProfile

    profiler = cProfile.Profile(time.process_time)  # CPU time: waits for the server cost 0
    profiler.enable()
    return profiler


def _stop_profile(profiler: Any, path: str | None) -> None:
    if profiler is not None and path is not None:
        profiler.disable()
        profiler.dump_stats(path)


def worker_main(args: argparse.Namespace) -> int:
    if args.loop == "uvloop":
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    else:
        runner = asyncio.Runner()
    with runner:
        result = runner.run(drive(args))
    print(RESULT_PREFIX + json.dumps(json_safe(asdict(result)), allow_nan=False), flush=True)
    return 0


# --------------------------------------------------------------------------- the parent


@dataclass
class RunResult:
    run: int
    calls: int
    errors: int
    calls_per_s: float
    p50_ms: float
    p99_ms: float
    client_cpu_us_per_call: float
    client_busy: float  # client CPU / wall: near 100% means the client is the limit
    client_sys_share: float
    server_cpu_us_per_call: float
    server_busy: float  # near 100% means the server is the limit
    calibration_ns: float
    negotiated: str
    error_samples: list[str] = field(default_factory=list)


@dataclass
class Report:
    client: str
    in_flight: int
    description: str
    status: str = "ok"  # ok | failed | skipped
    reason: str = ""
    runs: list[RunResult] = field(default_factory=list)
    median: dict[str, float] = field(default_factory=dict)
    cpu_vs_aiohttp: float | None = None
    paired_vs_aiohttp: float | None = None
    """Median over rounds of (this client's CPU per call / aiohttp's in the same round)."""
    cpu_vs_official: float | None = None
    cpu_vs_streams: float | None = None


def worker_command(
    args: argparse.Namespace,
    client: str,
    in_flight: int,
    server: ServerProcess,
    profile_out: Path | None = None,
    calls: int | None = None,
) -> list[str]:
    command = [
        sys.executable,
        str(SCRIPT),
        "--worker",
        client,
        "--port",
        str(server.port),
        "--server-pid",
        str(server.pid),
        "--in-flight",
        str(in_flight),
        "--warmup",
        str(args.warmup),
        "--duration",
        str(args.duration),
        "--loop",
        args.loop,
    ]
    if profile_out is not None:
        command += ["--profile-out", str(profile_out)]
    if calls is not None:
        command += ["--calls", str(calls)]
    return command


def run_worker(
    command: list[str], cpu: int, timeout_s: float, on_window: Callable[[int], None] | None = None
) -> WorkerResult:
    """Run one client worker pinned to ``cpu``; ``on_window(pid)`` when its window opens."""
    deadline = time.monotonic() + timeout_s
    with (
        tempfile.TemporaryFile("w+") as errors,
        subprocess.Popen(
            command,
            env={**child_env(), "PYTHONHASHSEED": "0"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            preexec_fn=pinned(cpu),
        ) as proc,
    ):
        assert proc.stdout is not None
        result: str | None = None
        try:
            for line in proc.stdout:  # the worker prints two lines: WINDOW, then RESULT
                if line.strip() == WINDOW_LINE and on_window is not None:
                    on_window(proc.pid)
                elif line.startswith(RESULT_PREFIX):
                    result = line[len(RESULT_PREFIX) :]
            proc.wait(max(1.0, deadline - time.monotonic()))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if proc.returncode != 0 or result is None:
            errors.seek(0)
            tail = "\n".join(errors.read().strip().splitlines()[-12:])
            raise RuntimeError(f"client worker exited with {proc.returncode}:\n{tail}")
    return WorkerResult(**json.loads(result))


def one_run(
    args: argparse.Namespace, client: str, in_flight: int, run: int, server: ServerProcess
) -> RunResult:
    calibration = calibrate(args.client_cpu, args.client_cpu)
    timeout_s = args.warmup + args.duration + 120
    w = run_worker(worker_command(args, client, in_flight, server), args.client_cpu, timeout_s)
    if server.proc.poll() is not None:
        raise RuntimeError(f"server died during the run:\n{server.log_tail()}")
    calls = w.calls or float("nan")
    cpu = w.user_s + w.sys_s
    return RunResult(
        run=run,
        calls=w.calls,
        errors=w.errors,
        calls_per_s=w.calls / w.wall_s,
        p50_ms=w.p50_ms,
        p99_ms=w.p99_ms,
        client_cpu_us_per_call=cpu / calls * 1e6,
        client_busy=cpu / w.wall_s,
        client_sys_share=w.sys_s / cpu if cpu else 0.0,
        server_cpu_us_per_call=w.server_cpu_s / calls * 1e6,
        server_busy=w.server_cpu_s / w.wall_s,
        calibration_ns=calibration,
        negotiated=w.negotiated,
        error_samples=w.error_samples,
    )


MEDIANS = (
    "calls_per_s",
    "p50_ms",
    "p99_ms",
    "client_cpu_us_per_call",
    "client_busy",
    "client_sys_share",
    "server_cpu_us_per_call",
    "server_busy",
    "calibration_ns",
)


def summarize(reports: list[Report]) -> None:
    for rep in reports:
        if rep.runs:
            rep.median = {k: statistics.median(getattr(r, k) for r in rep.runs) for k in MEDIANS}
    ok = {(r.client, r.in_flight): r for r in reports if r.runs and r.status == "ok"}
    for (_, in_flight), rep in ok.items():
        cpu = rep.median["client_cpu_us_per_call"]
        for base, attr in (
            ("aiohttp", "cpu_vs_aiohttp"),
            ("official", "cpu_vs_official"),
            ("streams", "cpu_vs_streams"),
        ):
            if (base_rep := ok.get((base, in_flight))) is not None:
                setattr(rep, attr, cpu / base_rep.median["client_cpu_us_per_call"])
        if (floor_rep := ok.get((BASELINE, in_flight))) is not None:
            floor = {r.run: r.client_cpu_us_per_call for r in floor_rep.runs}
            pairs = [r.client_cpu_us_per_call / floor[r.run] for r in rep.runs if r.run in floor]
            if pairs:
                rep.paired_vs_aiohttp = statistics.median(pairs)


def run_line(rep: Report, r: RunResult) -> str:
    return (
        f"run {r.run} {rep.client:<8} x{rep.in_flight:<3} {r.calls_per_s:8,.0f} calls/s"
        f" {r.client_cpu_us_per_call:7.1f} µs/call  p50 {r.p50_ms:6.2f} ms"
        f"  p99 {r.p99_ms:6.2f} ms  errors {r.errors}"
        f" | client busy {r.client_busy:4.0%} (sys {r.client_sys_share:3.0%}),"
        f" server busy {r.server_busy:4.0%}; core {r.calibration_ns:.0f} ns/iter"
    )


def _fmt(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def print_table(reports: list[Report]) -> None:
    columns = (
        ("client", 9),
        ("in flight", 9),
        ("calls/s", 8),
        ("p50 ms", 7),
        ("p99 ms", 7),
        ("CPU µs/call", 11),
        ("x aiohttp", 9),
        ("paired", 6),
        ("x official", 10),
        ("x streams", 9),
        ("busy", 5),
        ("server busy", 11),
    )
    header = " ".join(
        f"{name:<{w}}" if i == 0 else f"{name:>{w}}" for i, (name, w) in enumerate(columns)
    )
    print("Summary: medians over runs; CPU µs/call is the client process's own user+sys CPU;")
    print("'x aiohttp', 'x official', 'x streams': ratios of client CPU per call at the same")
    print("concurrency; 'paired': median of per-round ratios to aiohttp")
    print(header + "  status")
    print("-" * (len(header) + 8))
    for rep in reports:
        m = rep.median
        cells = (
            rep.client,
            str(rep.in_flight),
            _fmt(m.get("calls_per_s"), ",.0f"),
            _fmt(m.get("p50_ms"), ".3f"),
            _fmt(m.get("p99_ms"), ".3f"),
            _fmt(m.get("client_cpu_us_per_call"), ".1f"),
            _fmt(rep.cpu_vs_aiohttp, ".2f"),
            _fmt(rep.paired_vs_aiohttp, ".2f"),
            _fmt(rep.cpu_vs_official, ".3f"),
            _fmt(rep.cpu_vs_streams, ".2f"),
            _fmt(m.get("client_busy"), ".0%"),
            _fmt(m.get("server_busy"), ".0%"),
        )
        row = " ".join(
            f"{cell:<{w}}" if i == 0 else f"{cell:>{w}}"
            for i, (cell, (_, w)) in enumerate(zip(cells, columns, strict=True))
        )
        status = f"{rep.status}: {rep.reason}" if rep.reason else rep.status
        print(f"{row}  {status[:70]}")


def print_targets(reports: list[Report]) -> None:
    """The issue's targets, at the highest concurrency measured."""
    ok = {(r.client, r.in_flight): r for r in reports if r.runs and r.status == "ok"}
    top = max((n for _, n in ok), default=None)
    if top is None:
        return
    mine = ok.get(("millimcp", top))
    if mine is None:
        return
    m = mine.median["client_cpu_us_per_call"]
    print(f"\nAt {top} in flight, millimcp's client CPU per call (native link):")
    if mine.cpu_vs_streams is not None:
        verdict = "met" if mine.cpu_vs_streams <= 2 else "NOT met"
        print(f"  {mine.cpu_vs_streams:.2f}x the raw streams loop (target <= 2x: {verdict})")
    if (official := ok.get(("official", top))) is not None:
        less = official.median["client_cpu_us_per_call"] / m
        verdict = "met" if less >= 15 else "NOT met"
        print(f"  {less:.1f}x less than the official client (target >= 15x: {verdict})")
    if mine.cpu_vs_aiohttp is not None:
        print(f"  {mine.cpu_vs_aiohttp:.2f}x the raw aiohttp loop")
    if (over_aiohttp := ok.get(("millimcp-aiohttp", top))) is not None:
        print(
            f"  {over_aiohttp.median['client_cpu_us_per_call'] / m:.2f}x less CPU than the same"
            " client over the aiohttp link"
        )
    if (lean := ok.get(("lean", top))) is not None and lean.cpu_vs_streams is not None:
        print(
            f"  over a lean transport (client 'lean'): {lean.cpu_vs_streams:.2f}x the raw streams"
            f" loop, {m / lean.median['client_cpu_us_per_call']:.2f}x less CPU than over aiohttp"
        )


# --------------------------------------------------------------------------- profiling
# Two profilers, both counting CPU only (a wait for the server costs nothing): py-spy when it
# is installed (sampling, from outside, a few percent of overhead; C code is charged to the
# Python function that called it), else cProfile on a CPU clock inside the worker (exact
# counts, but its per-event cost inflates code made of many small calls).

_GROUPS = (
    ("/millimcp/", "millimcp"),
    ("/aiohttp/", "aiohttp"),
    ("/multidict/", "aiohttp (multidict, yarl)"),
    ("/yarl/", "aiohttp (multidict, yarl)"),
    ("/mcp/", "mcp SDK"),
    ("/mcp_types/", "mcp SDK"),
    ("/httpx2/", "httpx2/httpcore"),
    ("/httpcore", "httpx2/httpcore"),
    ("/anyio/", "anyio"),
    ("/pydantic", "pydantic"),
    ("/msgspec/", "msgspec"),
    ("/asyncio/", "asyncio (Python)"),
    ("/client_overhead.py", "benchmark harness"),
    ("/loadgen.py", "benchmark harness"),
)
_C_GROUPS = (
    ("run_until_complete", "event loop (C)"),
    ("run_forever", "event loop (C)"),
    ("uvloop", "event loop (C)"),
    ("_asyncio", "event loop (C)"),
    ("aiohttp", "aiohttp"),
    ("multidict", "aiohttp (multidict, yarl)"),
    ("yarl", "aiohttp (multidict, yarl)"),
    ("msgspec", "msgspec"),
    ("pydantic_core", "pydantic"),
)
LOOP_FRAMES = ("Runner.run", "run", "run_until_complete", "run_forever")


def classify(filename: str, function: str) -> str:
    """Which package a profiled function belongs to ('~' is cProfile's file for C code)."""
    if filename == "~":
        return next((label for key, label in _C_GROUPS if key in function), "other C builtins")
    path = "/" + filename.replace("\\", "/")
    if function.startswith("StreamsLink."):
        return "StreamsLink (lean transport)"
    if function in LOOP_FRAMES:  # py-spy: the loop's own C work (socket reads, epoll, callbacks)
        return "event loop (C)"
    return next((label for key, label in _GROUPS if key in path), "other Python")


def pyspy_profile(path: Path) -> dict[tuple[str, str], float]:
    """Own samples per (file, function) from ``py-spy record --format raw`` (leaf frames)."""
    own: dict[tuple[str, str], float] = {}
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        leaf = stack.rsplit(";", 1)[-1]  # "function (file:line)"
        function, _, where = leaf.rpartition(" (")
        filename = where.rstrip(")").rsplit(":", 1)[0]
        key = (filename, function or leaf)
        own[key] = own.get(key, 0.0) + int(count)
    return own


def cprofile_profile(path: Path) -> dict[tuple[str, str], float]:
    """Own CPU seconds per (file, function) from a cProfile dump."""
    import pstats

    entries: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    own: dict[tuple[str, str], float] = {}
    for (filename, _line, function), (_cc, _nc, tottime, _ct, _callers) in entries.items():
        own[filename, function] = own.get((filename, function), 0.0) + tottime
    return own


def print_profile(own: dict[tuple[str, str], float], us_per_call: float, top: int) -> None:
    """Shares of own time by package and by function, scaled to the unprofiled CPU per call."""
    total = sum(own.values()) or float("nan")
    by_group: dict[str, float] = {}
    for (filename, function), value in own.items():
        group = classify(filename, function)
        by_group[group] = by_group.get(group, 0.0) + value
    print(f"Own time by package (share; x {us_per_call:.1f} µs/call measured without profiler):")
    for group, value in sorted(by_group.items(), key=lambda kv: -kv[1]):
        share = value / total
        print(f"  {group:<28} {share:7.1%}  ~{share * us_per_call:7.1f} µs/call")
    print(f"\nTop {top} functions by own time:")
    for (filename, function), value in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        share = value / total
        where = function if filename == "~" else f"{function} ({filename})"
        group = classify(filename, function)
        print(f"  {share:6.1%} ~{share * us_per_call:6.1f} µs  [{group}] {where}")


def find_pyspy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def profile_main(args: argparse.Namespace) -> int:
    client, in_flight = args.profile, args.in_flight_levels[-1]
    pyspy = None if args.profiler == "cprofile" else find_pyspy()
    if args.profiler == "py-spy" and pyspy is None:
        print("py-spy is not installed (pip install py-spy)")
        return 2
    suffix = "pyspy.txt" if pyspy else "pstats"
    out = (
        Path(args.profile_save or tempfile.gettempdir())
        / f"client_overhead-{client}-{in_flight}.{suffix}"
    )
    timeout_s = args.warmup + args.duration + 120
    server = ServerProcess("millimcp", uvicorn_command(SERVER_MODULE), args.server_cpu)
    with serving(server):
        plain = run_worker(
            worker_command(args, client, in_flight, server), args.client_cpu, timeout_s
        )
        if pyspy is not None:
            seconds = max(1, int(args.duration) - 1)  # inside the window, after attaching

            def attach(pid: int) -> None:
                subprocess.run(
                    [
                        pyspy,
                        "record",
                        "--pid",
                        str(pid),
                        "--duration",
                        str(seconds),
                        "--rate",
                        "1000",
                        "--format",
                        "raw",
                        "--output",
                        str(out),
                    ],
                    capture_output=True,
                    check=True,
                    timeout=seconds + 60,
                )

            profiled = run_worker(
                worker_command(args, client, in_flight, server), args.client_cpu, timeout_s, attach
            )
            own = pyspy_profile(out)
        else:
            profiled = run_worker(
                worker_command(args, client, in_flight, server, out), args.client_cpu, timeout_s
            )
            own = cprofile_profile(out)
    us_plain = (plain.user_s + plain.sys_s) / max(plain.calls, 1) * 1e6
    us_profiled = (profiled.user_s + profiled.sys_s) / max(profiled.calls, 1) * 1e6
    print(
        f"{client} at {in_flight} in flight: {us_plain:.1f} µs CPU/call and"
        f" {plain.calls / plain.wall_s:,.0f} calls/s without the profiler;"
        f" {us_profiled:.1f} µs CPU/call under {'py-spy' if pyspy else 'cProfile'}"
    )
    print_profile(own, us_plain, args.top)
    print(f"\nsaved {out}")
    return 0


# --------------------------------------------------------------------------- instructions
# CPU time on a shared 2-core VM drifts by 2x within minutes; instruction counts do not. Each
# client worker runs under callgrind at two call counts against the same server, and the
# difference per call is the client's own work (interpreter start, imports and connection
# set-up cancel out). The kernel's share (syscalls, loopback TCP) is not counted.


def callgrind_instructions(command: list[str], cpu: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        run_worker(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command],
            cpu,
            timeout_s=3600,
        )
        match = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
        if match is None:
            raise RuntimeError(f"no summary line in {out}")
        return int(match.group(1))


def instructions_main(args: argparse.Namespace) -> int:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)")
        return 2
    high, low = args.instructions, max(1, args.instructions // 4)
    print(
        f"client_overhead --instructions: {', '.join(args.clients)} at {args.in_flight} in"
        f" flight; callgrind, ({high:,} - {low:,} calls) per client; {args.loop}"
    )
    per_call: dict[tuple[str, int], float] = {}
    server = ServerProcess("millimcp", uvicorn_command(SERVER_MODULE), args.server_cpu)
    with serving(server):
        for name in args.clients:
            if (reason := check_import(name)) is not None:
                print(f"skipping {name}: {reason}")
                continue
            for level in args.in_flight_levels:
                counts = [
                    callgrind_instructions(
                        worker_command(args, name, level, server, calls=n), args.client_cpu
                    )
                    for n in (low, high)
                ]
                per_call[name, level] = (counts[1] - counts[0]) / (high - low)
                print(f"  {name:<9} x{level:<3} {per_call[name, level]:12,.0f} instructions/call")
    print("\nclient instructions per tools/call (user space), and ratios at the same concurrency")
    print(
        f"{'client':<9} {'in flight':>9} {'instr/call':>12} {'x aiohttp':>9} {'x official':>10}"
        f" {'x streams':>9}"
    )
    for (name, level), count in per_call.items():
        ratios = [
            _fmt(count / per_call[base, level] if (base, level) in per_call else None, fmt)
            for base, fmt in (("aiohttp", ".2f"), ("official", ".3f"), ("streams", ".2f"))
        ]
        print(f"{name:<9} {level:>9} {count:>12,.0f} {ratios[0]:>9} {ratios[1]:>10} {ratios[2]:>9}")
    return 0


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--clients",
        default=",".join(CLIENTS),
        help=f"comma-separated subset of {', '.join(CLIENTS)} (default: all)",
    )
    parser.add_argument(
        "--in-flight",
        default="1,32",
        help="comma-separated concurrency levels: calls in flight (default 1,32)",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per client and level (default 3)")
    parser.add_argument(
        "--duration", type=float, default=3.0, help="measured seconds per run (default 3)"
    )
    parser.add_argument(
        "--warmup", type=float, default=1.0, help="unmeasured warm-up seconds per run (default 1)"
    )
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="event loop of every client worker (default uvloop)",
    )
    parser.add_argument(
        "--server-cpu", type=int, default=0, help="CPU the server is pinned to (default 0)"
    )
    parser.add_argument(
        "--client-cpu", type=int, default=1, help="CPU the clients are pinned to (default 1)"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write results as JSON")
    parser.add_argument(
        "--instructions",
        type=int,
        metavar="CALLS",
        help="instead of timing: count each client's instructions per call under callgrind"
        " (CALLS and CALLS/4 calls; deterministic, unlike CPU time on a shared VM)",
    )
    parser.add_argument(
        "--profile",
        choices=tuple(CLIENTS),
        help="instead of the benchmark: profile one client over the measured window"
        " at the last --in-flight level, and print where its time goes",
    )
    parser.add_argument(
        "--profiler",
        choices=("auto", "py-spy", "cprofile"),
        default="auto",
        help="auto: py-spy when installed (sampling, CPU only), else cProfile on a CPU clock",
    )
    parser.add_argument("--top", type=int, default=30, help="functions listed by --profile")
    parser.add_argument(
        "--profile-save", metavar="DIR", help="folder for the raw profile (default: temp dir)"
    )
    # the worker's side (internal)
    parser.add_argument("--worker", choices=tuple(CLIENTS), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        args.in_flight = int(args.in_flight)
        return args
    names = [n.strip() for n in args.clients.split(",") if n.strip()]
    unknown = [n for n in names if n not in CLIENTS]
    if unknown or not names:
        parser.error(f"unknown client(s) {unknown}; choose from {', '.join(CLIENTS)}")
    args.clients = list(dict.fromkeys(names))
    try:
        args.in_flight_levels = [int(n) for n in args.in_flight.split(",") if n.strip()]
    except ValueError:
        parser.error("--in-flight takes comma-separated integers")
    if not args.in_flight_levels or min(args.in_flight_levels) < 1:
        parser.error("--in-flight levels must be >= 1")
    if args.server_cpu == args.client_cpu:
        parser.error("--server-cpu and --client-cpu must differ")
    args.connections = max(args.in_flight_levels)  # for environment()
    args.import_repeats = 0
    return args


def check_import(client: str) -> str | None:
    module = {
        "official": "mcp",
        "millimcp": "millimcp",
        "millimcp-aiohttp": "millimcp",
        "aiohttp": "aiohttp",
    }.get(client)
    if module is None:
        return None
    probe = (
        "import millimcp; millimcp.Client.over_http" if module == "millimcp" else f"import {module}"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], env=child_env(), capture_output=True, text=True, check=False
    )
    if proc.returncode == 0:
        return None
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {proc.returncode}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        return worker_main(args)
    available = os.sched_getaffinity(0)
    if not {args.server_cpu, args.client_cpu} <= available:
        print(f"CPUs {args.server_cpu} and {args.client_cpu} must both be in {sorted(available)}")
        return 2
    os.sched_setaffinity(0, {args.client_cpu})
    if args.profile is not None:
        return profile_main(args)
    if args.instructions is not None:
        return instructions_main(args)

    env = environment(args)
    for name in EXTRA_PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            env["packages"][name] = metadata.version(name)
    env["config"].update(in_flight=args.in_flight_levels, loop=args.loop, clients=args.clients)
    print(
        f"client_overhead: {', '.join(args.clients)} at {args.in_flight} in flight; {args.runs}"
        f" runs x ({args.warmup:g} s warm-up + {args.duration:g} s); {args.loop} in every client;"
        f" server on CPU {args.server_cpu}, clients on CPU {args.client_cpu};"
        f" loadavg {env['loadavg_at_start'][0]:.2f}"
    )
    print(packages_line(env))

    reports: dict[tuple[str, int], Report] = {}
    units: list[tuple[str, int]] = []
    for name in args.clients:
        reason = check_import(name)
        for level in args.in_flight_levels:
            rep = reports[name, level] = Report(name, level, CLIENTS[name].description)
            if reason is not None:
                rep.status, rep.reason = "skipped", f"import failed: {reason}"
            else:
                units.append((name, level))
        if reason is not None:
            print(f"skipping {name}: {reason}")

    server = ServerProcess("millimcp", uvicorn_command(SERVER_MODULE), args.server_cpu)
    with serving(server):
        allowed = proc_status(server.pid, "Cpus_allowed_list")
        print(
            f"server: millimcp {SERVER_MODULE}:app under uvicorn, pid {server.pid}, CPU {allowed}"
        )
        for run in range(1, args.runs + 1):
            shift = (run - 1) % max(len(units), 1)
            for name, level in units[shift:] + units[:shift]:  # rotate the order run by run
                rep = reports[name, level]
                try:
                    result = one_run(args, name, level, run, server)
                except Exception as exc:
                    rep.status, rep.reason = "failed", (str(exc) or repr(exc)).splitlines()[0]
                    print(f"run {run} {name:<8} x{level:<3} FAILED: {exc}")
                    continue
                rep.runs.append(result)
                if result.errors:
                    rep.status, rep.reason = "failed", f"{result.errors} bad answers"
                print(run_line(rep, result))
    print()

    ordered = list(reports.values())
    summarize(ordered)
    for rep in ordered:
        if rep.runs:
            print(f"{rep.client} x{rep.in_flight}: {rep.description}; {rep.runs[0].negotiated}")
        for sample in (s for r in rep.runs for s in r.error_samples[:3]):
            print(f"  error: {sample}")
    print()
    print_table(ordered)
    print_targets(ordered)

    if args.json is not None:
        payload = {"environment": env, "reports": [asdict(rep) for rep in ordered]}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(json_safe(payload), indent=2, allow_nan=False) + "\n")
        print(f"\nwrote {args.json}")
    return 1 if any(rep.status == "failed" for rep in ordered) else 0


if __name__ == "__main__":
    sys.exit(main())

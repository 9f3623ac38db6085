"""Handshake-era HTTP cost per ``tools/call`` beside the modern era's, at 32 calls in flight.

Each round starts one millimcp server (``python -m millimcp serve millimcp_echo:server``:
uvicorn, httptools, uvloop) pinned to ``--server-cpu`` and measures two windows against that
same process: the **modern era** (the 2026-07-28 per-request envelope, no session) and the
**handshake era** (``initialize`` once, ``notifications/initialized``, then every
``tools/call`` carries the ``Mcp-Session-Id``, ``MCP-Protocol-Version: 2025-11-25`` and no
``_meta``). The order of the two windows alternates round by round. Then, as the reference,
the official SDK's stateful Streamable HTTP app (``servers/official_session_echo.py`` under
uvicorn) gets the same two windows. The load generator is ``loadgen.run_load`` (32 kept-alive
connections, one call in flight on each), pinned to ``--client-cpu``; one session is shared by
all connections. Server CPU per call comes from ``/proc/PID/stat`` over each window.

    .venv/bin/python benchmarks/handshake_http.py --runs 5 --duration 4
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import itertools
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from harness import (
    HOST,
    REPO_ROOT,
    SERVERS_DIR,
    ServerProcess,
    calibrate,
    child_env,
    cpu_counters,
    environment,
    json_safe,
    new_runner,
    percentile_ms,
    serving,
    uvicorn_command,
)
from loadgen import BENCH_CLIENT_META, ECHO_TEXT, PROTOCOL_VERSION, run_load

from millimcp.lab.loadgen import parse_response
from millimcp.testing import modern_meta

HANDSHAKE_VERSION = "2025-11-25"
PATH = "/mcp"


@dataclass(frozen=True)
class Server:
    name: str
    description: str
    command: tuple[str, ...]  # ``{port}`` is filled in


SERVERS = {
    "millimcp": Server(
        "millimcp",
        "python -m millimcp serve millimcp_echo:server (uvicorn, httptools, uvloop)",
        ("-m", "millimcp", "serve", "millimcp_echo:server", "--port", "{port}"),
    ),
    "official": Server(
        "official",
        "mcp 2.3.0 MCPServer.streamable_http_app(json_response=True), stateful, under uvicorn",
        uvicorn_command("official_session_echo"),
    ),
}
ERAS = ("modern", "handshake")


# --------------------------------------------------------------------------- HTTP plumbing


def http_request(port: int, body: bytes, headers: dict[str, str]) -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return (
        f"POST {PATH} HTTP/1.1\r\nHost: {HOST}:{port}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"{head}Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def exchange(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh socket: status, response headers (lower-case names), body."""
    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(request)
        buf = b""
        while (parsed := parse_response(buf)) is None:
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError(f"connection closed: {buf[:300]!r}")
            buf += chunk
    status, body, _ = parsed
    lines = buf[: buf.find(b"\r\n\r\n")].decode("latin-1").split("\r\n")[1:]
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)}
    return status, headers, body


PLACEHOLDER_ID = b"9999999999"  # ten digits, like every id the counter below makes


def call_parts(era: str, session_id: str | None = None) -> tuple[bytes, dict[str, str]]:
    """The era's ``tools/call`` body and headers, its id a placeholder (``PLACEHOLDER_ID``)."""
    params: dict[str, object] = {"name": "echo", "arguments": {"text": ECHO_TEXT}}
    if era == "modern":
        params["_meta"] = modern_meta(BENCH_CLIENT_META)
        headers = {
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": "echo",
        }
    else:
        assert session_id is not None
        headers = {"MCP-Protocol-Version": HANDSHAKE_VERSION, "Mcp-Session-Id": session_id}
    body = msgspec.json.encode(
        {"jsonrpc": "2.0", "id": int(PLACEHOLDER_ID), "method": "tools/call", "params": params}
    )
    return body, headers


def call_request(port: int, era: str, session_id: str | None = None) -> bytes:
    """The era's ``tools/call`` POST, its id a placeholder that ``fresh_ids`` replaces."""
    return http_request(port, *call_parts(era, session_id))


def fresh_ids(template: bytes) -> Callable[[], bytes]:
    """Each call's bytes with a new id: ids are never reused within a session (and a
    server that routes answers by id, like the official SDK, needs them distinct)."""
    prefix, suffix = template.split(PLACEHOLDER_ID)
    ids = itertools.count(1_000_000_000)
    return lambda: prefix + b"%d" % next(ids) + suffix


def open_session(port: int) -> str:
    """``initialize`` + ``notifications/initialized``; the session id."""
    init = msgspec.json.encode(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1.0.0"},
            },
        }
    )
    status, headers, body = exchange(port, http_request(port, init, {}))
    session_id = headers.get("mcp-session-id")
    if status != 200 or not session_id:
        raise RuntimeError(f"initialize: HTTP {status} {headers} {body[:300]!r}")
    note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    headers = {"MCP-Protocol-Version": HANDSHAKE_VERSION, "Mcp-Session-Id": session_id}
    status, _, body = exchange(port, http_request(port, note, headers))
    if status != 202:
        raise RuntimeError(f"notifications/initialized: HTTP {status} {body[:300]!r}")
    return session_id


def check_echo(status: int, body: bytes) -> None:
    try:
        msg = msgspec.json.decode(body)
        ok = status == 200 and msg["result"]["content"][0]["text"] == ECHO_TEXT
        ok = ok and not msg["result"].get("isError")
    except (msgspec.DecodeError, KeyError, IndexError, TypeError):
        ok = False
    if not ok:
        raise RuntimeError(f"not the echo result: HTTP {status} {body[:400]!r}")


# --------------------------------------------------------------------------- one round


@dataclass
class Window:
    run: int
    calls: int
    errors: int
    calls_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    server_cpu_us_per_call: float
    server_busy: float
    foreign_load: float
    calibration_ns: float
    error_samples: list[str] = field(default_factory=list)


@dataclass
class Report:
    name: str  # "<server>-<era>"
    description: str
    status: str = "ok"
    reason: str = ""
    windows: list[Window] = field(default_factory=list)
    median: dict[str, float] = field(default_factory=dict)


def measure(
    proc: ServerProcess,
    request: bytes,
    run: int,
    args: argparse.Namespace,
    runner: asyncio.Runner,
) -> Window:
    calibration = calibrate(args.server_cpu, args.client_cpu)
    load = runner.run(
        run_load(
            host=HOST,
            port=proc.port,
            request=request,
            marker=f'"{ECHO_TEXT}"'.encode(),
            connections=args.connections,
            warmup_s=args.warmup,
            duration_s=args.duration,
            sample=lambda: cpu_counters(proc.proc.pid, args.server_cpu),
            next_request=fresh_ids(request),
        )
    )
    if proc.proc.poll() is not None:
        raise RuntimeError(f"server died:\n{proc.log_tail()}")
    lat = sorted(load.latencies_ns)
    cpu = load.sampled["server_cpu"]
    calls = load.calls or float("nan")
    return Window(
        run=run,
        calls=load.calls,
        errors=load.errors + load.warmup_errors,
        calls_per_s=load.calls / load.wall_s,
        p50_ms=percentile_ms(lat, 0.50),
        p95_ms=percentile_ms(lat, 0.95),
        p99_ms=percentile_ms(lat, 0.99),
        server_cpu_us_per_call=cpu / calls * 1e6,
        server_busy=cpu / load.wall_s,
        foreign_load=max(0.0, load.sampled["cpu_busy"] - cpu) / load.wall_s,
        calibration_ns=calibration,
        error_samples=load.error_samples,
    )


def one_round(
    server: Server,
    run: int,
    args: argparse.Namespace,
    runner: asyncio.Runner,
    reports: dict[str, Report],
) -> None:
    process = ServerProcess(server.name, server.command, args.server_cpu, cwd=SERVERS_DIR)
    with serving(process) as proc:
        requests = {"modern": call_request(proc.port, "modern")}
        requests["handshake"] = call_request(proc.port, "handshake", open_session(proc.port))
        for request in requests.values():
            status, _, body = exchange(proc.port, request)
            check_echo(status, body)
        eras = ERAS if run % 2 else ERAS[::-1]  # alternate which era runs first
        for era in eras:
            rep = reports[f"{server.name}-{era}"]
            window = measure(proc, requests[era], run, args, runner)
            rep.windows.append(window)
            if window.errors:
                rep.status, rep.reason = "failed", f"{window.errors} bad responses"
                for sample in window.error_samples[:3]:
                    print(f"    {sample}")
            print(
                f"run {run} {rep.name:<19} {window.calls_per_s:8,.0f} calls/s"
                f" {window.server_cpu_us_per_call:7.1f} µs/call  p50 {window.p50_ms:6.2f} ms"
                f"  p99 {window.p99_ms:6.2f} ms  busy {window.server_busy:4.0%}"
                f"  other {window.foreign_load:3.0%}  core {window.calibration_ns:.0f} ns/iter"
                f"  errors {window.errors}",
                flush=True,
            )


# --------------------------------------------------------------------------- instructions

APPS = {"millimcp": "millimcp_echo", "official": "official_session_echo"}
INIT_BODY = msgspec.json.encode(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1.0.0"},
        },
    }
)


async def drive_app(app: Any, era: str, calls: int) -> None:
    """In-process, no sockets: start the ASGI app's lifespan, open the era, make ``calls``
    ``tools/call`` requests with fresh ids, check the last answer, shut down."""
    lifespan: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started, stopped = asyncio.Event(), asyncio.Event()

    async def lifespan_send(message: dict[str, Any]) -> None:
        (started if message["type"].startswith("lifespan.startup") else stopped).set()

    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    lifespan_task = asyncio.ensure_future(app(scope, lifespan.get, lifespan_send))
    await lifespan.put({"type": "lifespan.startup"})
    await asyncio.wait_for(started.wait(), 30)

    def http_scope(headers: dict[str, str], length: int) -> dict[str, Any]:
        raw = [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            *((k.lower().encode(), v.encode()) for k, v in headers.items()),
            (b"content-length", str(length).encode()),
        ]
        return {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": PATH,
            "raw_path": PATH.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": raw,
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }

    body = b""
    status = 0
    reply_headers: dict[bytes, bytes] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, reply_headers
        if message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
        elif message["type"] == "http.response.start":
            status, reply_headers = message["status"], dict(message.get("headers", []))

    session_id = None
    if era == "handshake":
        body = INIT_BODY
        await app(http_scope({}, len(body)), receive, send)
        session_id = reply_headers[b"mcp-session-id"].decode()
        hs = {"MCP-Protocol-Version": HANDSHAKE_VERSION, "Mcp-Session-Id": session_id}
        body = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        await app(http_scope(hs, len(body)), receive, send)
    template, headers = call_parts(era, session_id)
    prefix, suffix = template.split(PLACEHOLDER_ID)
    scope = http_scope(headers, len(template))  # every id has ten digits, like the placeholder
    for request_id in range(1_000_000_000, 1_000_000_000 + calls):
        body = prefix + b"%d" % request_id + suffix
        chunks.clear()
        await app(dict(scope), receive, send)
    check_echo(status, b"".join(chunks))
    await lifespan.put({"type": "lifespan.shutdown"})
    await asyncio.wait_for(stopped.wait(), 30)
    await lifespan_task


def child(server: str, era: str, calls: int) -> None:
    sys.path.insert(0, str(SERVERS_DIR))
    module = importlib.import_module(APPS[server])
    import uvloop

    uvloop.run(drive_app(module.app, era, calls))


def instructions(server: str, era: str, calls: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
                "--child",
                f"{server},{era}",
                "--calls",
                str(calls),
            ],
            check=True,
            env={**child_env(), "PYTHONHASHSEED": "0"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        match = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
        if match is None:
            raise RuntimeError(f"no summary line in {out}")
        return int(match.group(1))


def count_instructions(args: argparse.Namespace) -> int:
    """Each era's instructions per call, in-process (the framework's work, no HTTP server):
    the difference between two call counts, so start-up and the handshake cancel out."""
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    low, high = args.calls // 4, args.calls
    for server in args.servers:
        per_call = {}
        for era in ERAS:
            a = instructions(server, era, low)
            b = instructions(server, era, high)
            per_call[era] = (b - a) / (high - low)
            print(f"{server:<9} {era:<10} {per_call[era]:12,.0f} instructions per call", flush=True)
        ratio = per_call["handshake"] / per_call["modern"]
        print(f"{server:<9} handshake / modern = {ratio:.3f}", flush=True)
    return 0


# --------------------------------------------------------------------------- reporting

MEDIANS = (
    "calls_per_s",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "server_cpu_us_per_call",
    "server_busy",
    "foreign_load",
    "calibration_ns",
)


def paired(a: Report, b: Report, key: str) -> float | None:
    """Median over rounds of a's ``key`` / b's, windows of the same round (same process)."""
    other = {w.run: getattr(w, key) for w in b.windows}
    ratios = [getattr(w, key) / other[w.run] for w in a.windows if other.get(w.run)]
    return statistics.median(ratios) if ratios else None


def print_summary(reports: dict[str, Report]) -> dict[str, float | None]:
    for rep in reports.values():
        if rep.windows:
            rep.median = {k: statistics.median(getattr(w, k) for w in rep.windows) for k in MEDIANS}
    print(f"{'target':<20}{'calls/s':>9}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}", end="")
    print(f"{'CPU µs/call':>12}{'busy':>6}  status")
    for rep in reports.values():
        m = rep.median
        if not m:
            print(f"{rep.name:<20}  {rep.status}: {rep.reason}")
            continue
        print(
            f"{rep.name:<20}{m['calls_per_s']:9,.0f}{m['p50_ms']:8.2f}{m['p95_ms']:8.2f}"
            f"{m['p99_ms']:8.2f}{m['server_cpu_us_per_call']:12.1f}{m['server_busy']:6.0%}"
            f"  {rep.status}{': ' + rep.reason if rep.reason else ''}"
        )
    ratios: dict[str, float | None] = {}
    print("\nPaired ratios (median over rounds of per-round ratios, both eras in one process):")
    for name in SERVERS:
        hs, modern = reports.get(f"{name}-handshake"), reports.get(f"{name}-modern")
        if hs is None or modern is None or not hs.windows:
            continue
        cpu = paired(hs, modern, "server_cpu_us_per_call")
        tput = paired(modern, hs, "calls_per_s")
        ratios[f"{name}_handshake_cpu_x_modern"] = cpu
        ratios[f"{name}_modern_calls_x_handshake"] = tput
        print(
            f"  {name:<9} handshake CPU/call = {cpu or float('nan'):.3f}x modern;"
            f" modern throughput = {tput or float('nan'):.3f}x handshake"
        )
    mh, oh = reports.get("millimcp-handshake"), reports.get("official-handshake")
    if mh and oh and mh.median and oh.median:
        cpu = mh.median["server_cpu_us_per_call"] / oh.median["server_cpu_us_per_call"]
        tput = mh.median["calls_per_s"] / oh.median["calls_per_s"]
        ratios["millimcp_handshake_cpu_x_official"] = cpu
        ratios["millimcp_handshake_calls_x_official"] = tput
        print(
            f"  handshake era, millimcp vs official: CPU/call {cpu:.3f}x,"
            f" throughput {tput:.2f}x (ratio of medians)"
        )
    if (cpu := ratios.get("millimcp_handshake_cpu_x_modern")) is not None:
        verdict = "met" if cpu <= 1.2 else "MISSED"
        print(f"Target (handshake-era cost per call within 1.2x of the modern era's): {verdict}")
    return ratios


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--servers", default="millimcp,official", help="millimcp,official")
    parser.add_argument("--runs", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--duration", type=float, default=4.0, help="measured s per window")
    parser.add_argument("--warmup", type=float, default=1.5, help="warmup s per window")
    parser.add_argument("--connections", type=int, default=32, help="calls in flight")
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write results as JSON")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions per call in-process under valgrind instead of timing",
    )
    parser.add_argument("--calls", type=int, default=2000, help="calls for --instructions")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    if not args.servers or any(s not in SERVERS for s in args.servers):
        parser.error(f"--servers: choose from {', '.join(SERVERS)}")
    if args.server_cpu == args.client_cpu:
        parser.error("--server-cpu and --client-cpu must differ")
    args.import_repeats = 0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        server, era = args.child.split(",")
        child(server, era, args.calls)
        return 0
    if args.instructions:
        return count_instructions(args)
    os.sched_setaffinity(0, {args.client_cpu})
    env = environment(args)
    print(
        f"handshake_http: {', '.join(args.servers)} x {', '.join(ERAS)}; {args.runs} rounds x"
        f" ({args.warmup:g} s warmup + {args.duration:g} s) per window; {args.connections} in"
        f" flight; server on CPU {args.server_cpu}, load generator on CPU {args.client_cpu};"
        f" loadavg {env['loadavg_at_start'][0]:.2f}; modern = {PROTOCOL_VERSION} envelope,"
        f" handshake = {HANDSHAKE_VERSION} + Mcp-Session-Id\n"
    )
    reports = {
        f"{s}-{era}": Report(f"{s}-{era}", SERVERS[s].description)
        for s in args.servers
        for era in ERAS
    }
    with new_runner() as runner:
        for run in range(1, args.runs + 1):
            order = args.servers if run % 2 else args.servers[::-1]
            for name in order:
                try:
                    one_round(SERVERS[name], run, args, runner, reports)
                except Exception as exc:
                    for era in ERAS:
                        reports[f"{name}-{era}"].status = "failed"
                        reports[f"{name}-{era}"].reason = str(exc).splitlines()[0]
                    print(f"run {run} {name} FAILED: {exc}")
    print()
    ratios = print_summary(reports)
    if args.json is not None:
        payload = {
            "environment": env,
            "repo": str(REPO_ROOT),
            "reports": [asdict(r) for r in reports.values()],
            "ratios": ratios,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(json_safe(payload), indent=2, allow_nan=False) + "\n")
        print(f"\nwrote {args.json}")
    return 1 if any(r.status == "failed" for r in reports.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

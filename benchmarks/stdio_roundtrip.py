"""stdio round trip of a trivial ``tools/call`` at concurrency 1: millimcp vs the official SDK.

Every target is a server process speaking newline-delimited JSON-RPC on its stdin/stdout,
pinned to ``--server-cpu``; this process is the client, pinned to ``--client-cpu``. The
client is the same raw pipe client for every target: one blocking ``os.write`` of one JSON
line, then one blocking ``readline``, then the next call (one call in flight). Each run starts
a fresh server, opens the era (``initialize`` + ``notifications/initialized`` for the
handshake era; nothing for the modern era, whose requests carry ``_meta``), checks one answer
in depth, warms up, then measures for a fixed window: per-call latency and the server's
user+sys CPU (``/proc/PID/stat``, all threads). Targets alternate run by run; medians over runs
are reported, with ratios to the official SDK's stdio server in the same era.

    .venv/bin/python benchmarks/stdio_roundtrip.py --runs 5 --duration 4
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec
from harness import (
    SERVERS_DIR,
    calibrate,
    child_env,
    cpu_counters,
    environment,
    json_safe,
    packages_line,
    percentile_ms,
    pinned,
    rss_mb,
)
from loadgen import BENCH_CLIENT_META, ECHO_TEXT, response_ok

from millimcp.testing import modern_meta

HANDSHAKE_VERSION = "2025-11-25"
META = modern_meta(BENCH_CLIENT_META)


@dataclass(frozen=True)
class Target:
    name: str
    script: str  # under benchmarks/servers, run as ``python <script>``
    era: str  # "modern" | "handshake"
    description: str
    argv: tuple[str, ...] = ()


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("raw-modern", "raw_stdio.py", "modern", "blocking line loop, canned result"),
        Target(
            "official-handshake",
            "official_stdio.py",
            "handshake",
            "mcp 2.3.0 MCPServer.run('stdio'), after initialize",
        ),
        Target(
            "official-modern",
            "official_stdio.py",
            "modern",
            "mcp 2.3.0 MCPServer.run('stdio'), 2026-07-28 _meta",
        ),
        Target(
            "millimcp-handshake",
            "millimcp_stdio.py",
            "handshake",
            "millimcp Server.run_stdio(), after initialize",
        ),
        Target(
            "millimcp-modern",
            "millimcp_stdio.py",
            "modern",
            "millimcp Server.run_stdio(), 2026-07-28 _meta",
        ),
        Target(
            "millimcp+uvloop-modern",
            "millimcp_stdio.py",
            "modern",
            "millimcp serve_stdio() on uvloop, 2026-07-28 _meta",
            ("--uvloop",),
        ),
    )
}
DEFAULT_TARGETS = ",".join(TARGETS)


def _line(message: dict[str, Any]) -> bytes:
    return msgspec.json.encode(message) + b"\n"


def call_template(era: str) -> tuple[bytes, bytes]:
    """The ``tools/call`` line split around its id: ``prefix + id + suffix``."""
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": ECHO_TEXT}}
    if era == "modern":
        params["_meta"] = META
    line = _line({"jsonrpc": "2.0", "id": 424242, "method": "tools/call", "params": params})
    prefix, suffix = line.split(b"424242")
    return prefix, suffix


@dataclass
class RunResult:
    run: int
    calls: int
    errors: int
    wall_s: float
    calls_per_s: float
    mean_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    server_cpu_us_per_call: float
    server_busy: float
    server_sys_share: float
    client_cpu_us_per_call: float
    foreign_load: float
    rss_mb: float
    calibration_ns: float
    exit_status: int | None
    error_samples: list[str] = field(default_factory=list)


@dataclass
class TargetReport:
    name: str
    description: str
    status: str = "ok"
    reason: str = ""
    runs: list[RunResult] = field(default_factory=list)
    median: dict[str, float] = field(default_factory=dict)
    p50_speedup: float | None = None  # official p50 / this p50, same era, median of rounds
    cpu_ratio: float | None = None  # this CPU per call / official's, same era, median of rounds


class StdioServer:
    """A server process on pipes; the client side writes and reads them directly."""

    def __init__(self, target: Target, cpu: int, wrapper: tuple[str, ...] = ()) -> None:
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            prefix=f"bench-{target.name}-", suffix=".log", delete=False
        )
        self.proc = subprocess.Popen(
            [*wrapper, sys.executable, str(SERVERS_DIR / target.script), *target.argv],
            env={**child_env(), "PYTHONHASHSEED": "0"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            preexec_fn=pinned(cpu),
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.fd = self.proc.stdin.fileno()
        self.stdout: IO[bytes] = self.proc.stdout

    @property
    def pid(self) -> int:
        return self.proc.pid

    def call(self, line: bytes) -> bytes:
        os.write(self.fd, line)  # a pipe takes a short line whole
        answer = self.stdout.readline()
        if not answer:
            raise RuntimeError(f"server closed stdout:\n{self.log_tail()}")
        return answer

    def log_tail(self, lines: int = 15) -> str:
        self.log.flush()
        text = Path(self.log.name).read_text(errors="replace")
        return "\n".join(text.strip().splitlines()[-lines:])

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """Close stdin (EOF) and wait for a clean exit; the exit status, None if it hung."""
        status: int | None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            status = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            status = None
        self.stdout.close()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)
        return status


def open_era(server: StdioServer, era: str) -> None:
    if era != "handshake":
        return
    answer = server.call(
        _line(
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
    )
    result = msgspec.json.decode(answer).get("result")
    if not isinstance(result, dict) or result.get("protocolVersion") != HANDSHAKE_VERSION:
        raise RuntimeError(f"initialize failed: {answer[:400]!r}")
    os.write(server.fd, _line({"jsonrpc": "2.0", "method": "notifications/initialized"}))


def deep_check(answer: bytes, request_id: int) -> None:
    msg = msgspec.json.decode(answer)
    try:
        result = msg["result"]
        ok = (
            msg["id"] == request_id
            and result["content"][0]["text"] == ECHO_TEXT
            and not result.get("isError")
        )
    except (KeyError, IndexError, TypeError):
        ok = False
    if not ok:
        raise RuntimeError(f"not the echo result: {answer[:400]!r}")


def one_run(target: Target, run: int, args: argparse.Namespace) -> RunResult:
    calibration = calibrate(args.server_cpu, args.client_cpu)
    server = StdioServer(target, args.server_cpu)
    try:
        open_era(server, target.era)
        prefix, suffix = call_template(target.era)
        deep_check(server.call(prefix + b"1" + suffix), 1)
        marker = f'"{ECHO_TEXT}"'.encode()
        request_id = 1
        errors = 0
        samples: list[str] = []

        def calls_for(seconds: float, latencies: list[int] | None) -> int:
            nonlocal request_id, errors
            done = 0
            deadline = time.perf_counter_ns() + int(seconds * 1e9)
            now = 0
            while now < deadline:
                request_id += 1
                line = prefix + str(request_id).encode() + suffix
                t0 = time.perf_counter_ns()
                answer = server.call(line)
                now = time.perf_counter_ns()
                if latencies is not None:
                    latencies.append(now - t0)
                if not response_ok(200, answer, marker) or b'"id":%d' % request_id not in answer:
                    errors += 1
                    if len(samples) < 5:
                        samples.append(answer[:300].decode(errors="replace"))
                done += 1
            return done

        calls_for(args.warmup, None)
        latencies: list[int] = []
        gc.collect()
        gc.disable()
        try:
            before = cpu_counters(server.pid, args.server_cpu)
            client0 = time.process_time()
            t0 = time.perf_counter()
            calls = calls_for(args.duration, latencies)
            t1 = time.perf_counter()
            client1 = time.process_time()
            after = cpu_counters(server.pid, args.server_cpu)
        finally:
            gc.enable()
        rss = rss_mb(server.pid)
    finally:
        exit_status = server.stop()
    if exit_status != 0:
        errors += 1
        samples.append(f"server exit status {exit_status} after EOF")
    wall = t1 - t0
    cpu = after["server_cpu"] - before["server_cpu"]
    lat = sorted(latencies)
    return RunResult(
        run=run,
        calls=calls,
        errors=errors,
        wall_s=wall,
        calls_per_s=calls / wall,
        mean_ms=statistics.fmean(lat) / 1e6,
        p50_ms=percentile_ms(lat, 0.50),
        p95_ms=percentile_ms(lat, 0.95),
        p99_ms=percentile_ms(lat, 0.99),
        server_cpu_us_per_call=cpu / calls * 1e6,
        server_busy=cpu / wall,
        server_sys_share=(after["server_sys"] - before["server_sys"]) / cpu if cpu else 0.0,
        client_cpu_us_per_call=(client1 - client0) / calls * 1e6,
        foreign_load=max(0.0, after["cpu_busy"] - before["cpu_busy"] - cpu) / wall,
        rss_mb=rss,
        calibration_ns=calibration,
        exit_status=exit_status,
        error_samples=samples,
    )


def instructions(target: Target, calls: int, cpu: int) -> int:
    """Instructions the server process executes (callgrind) to serve ``calls`` calls."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        wrapper = ("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}")
        server = StdioServer(target, cpu, wrapper)
        try:
            open_era(server, target.era)
            prefix, suffix = call_template(target.era)
            for request_id in range(1, calls + 1):
                answer = server.call(prefix + str(request_id).encode() + suffix)
                if b'"id":%d' % request_id not in answer or f'"{ECHO_TEXT}"'.encode() not in answer:
                    raise RuntimeError(f"bad answer: {answer[:300]!r}")
        finally:
            status = server.stop(timeout_s=600)
        if status != 0:
            raise RuntimeError(f"server exit status {status} under valgrind")
        match = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
        if match is None:
            raise RuntimeError(f"no summary line in {out}")
        return int(match.group(1))


def count_instructions(args: argparse.Namespace) -> int:
    """Per-call instructions: the difference between two call counts, so that interpreter
    start, imports and the handshake cancel out. Deterministic, unlike CPU time here."""
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    low, high = args.calls // 4, args.calls
    per_call: dict[str, float] = {}
    for name in args.targets:
        target = TARGETS[name]
        a = instructions(target, low, args.server_cpu)
        b = instructions(target, high, args.server_cpu)
        per_call[name] = (b - a) / (high - low)
        print(f"{name:<24} {per_call[name]:12,.0f} instructions per call", flush=True)
    print()
    for name, count in per_call.items():
        era = TARGETS[name].era
        base = per_call.get(f"official-{era}")
        if base is not None and not name.startswith("official"):
            print(f"{name:<24} official-{era} / this = {base / count:5.1f}x")
    return 0


MEDIANS = (
    "calls_per_s",
    "mean_ms",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "server_cpu_us_per_call",
    "server_busy",
    "server_sys_share",
    "client_cpu_us_per_call",
    "foreign_load",
    "rss_mb",
    "calibration_ns",
)


def summarize(reports: dict[str, TargetReport]) -> None:
    for rep in reports.values():
        if rep.runs:
            rep.median = {k: statistics.median(getattr(r, k) for r in rep.runs) for k in MEDIANS}
    for name, rep in reports.items():
        era = TARGETS[name].era
        base = reports.get(f"official-{era}")
        if base is None or not base.runs or not rep.runs:
            continue
        by_run = {r.run: r for r in base.runs}
        pairs = [(by_run[r.run], r) for r in rep.runs if r.run in by_run]
        rep.p50_speedup = statistics.median(b.p50_ms / r.p50_ms for b, r in pairs)
        rep.cpu_ratio = statistics.median(
            r.server_cpu_us_per_call / b.server_cpu_us_per_call for b, r in pairs
        )


def run_line(name: str, r: RunResult) -> str:
    return (
        f"run {r.run} {name:<22} p50 {r.p50_ms * 1e3:6.0f} µs  p99 {r.p99_ms * 1e3:6.0f} µs"
        f"  {r.calls_per_s:7,.0f} calls/s  server {r.server_cpu_us_per_call:6.1f} µs/call"
        f" (busy {r.server_busy:4.0%}, sys {r.server_sys_share:3.0%})  client"
        f" {r.client_cpu_us_per_call:5.1f} µs/call  other {r.foreign_load:3.0%}"
        f"  core {r.calibration_ns:.0f} ns/iter  errors {r.errors}"
    )


def _fmt(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def print_table(reports: dict[str, TargetReport]) -> None:
    print(
        "Summary: medians over runs, latency in µs; 'x faster' = official p50 / this p50 and"
        " 'x CPU' = this CPU per call / official's,\nboth against the official SDK in the same"
        " era (raw gets the modern request), each the median of per-round ratios"
    )
    header = (
        f"{'target':<23}{'mean':>7}{'p50':>7}{'p95':>7}{'p99':>7}{'calls/s':>9}"
        f"{'CPU µs/call':>12}{'busy':>6}{'x faster':>9}{'x CPU':>7}{'RSS MB':>8}  status"
    )
    print(header)
    print("-" * len(header))
    for name, rep in reports.items():
        m = rep.median
        us = {k: m[k] * 1e3 if k in m else None for k in ("mean_ms", "p50_ms", "p95_ms", "p99_ms")}
        status = f"{rep.status}: {rep.reason}" if rep.reason else rep.status
        print(
            f"{name:<23}{_fmt(us['mean_ms'], '.0f'):>7}{_fmt(us['p50_ms'], '.0f'):>7}"
            f"{_fmt(us['p95_ms'], '.0f'):>7}{_fmt(us['p99_ms'], '.0f'):>7}"
            f"{_fmt(m.get('calls_per_s'), ',.0f'):>9}"
            f"{_fmt(m.get('server_cpu_us_per_call'), '.1f'):>12}"
            f"{_fmt(m.get('server_busy'), '.0%'):>6}{_fmt(rep.p50_speedup, '.2f'):>9}"
            f"{_fmt(rep.cpu_ratio, '.3f'):>7}{_fmt(m.get('rss_mb'), '.1f'):>8}  {status[:60]}"
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--targets",
        default=DEFAULT_TARGETS,
        help=f"comma-separated subset of {', '.join(TARGETS)} (default: all)",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per target (default 3)")
    parser.add_argument(
        "--duration", type=float, default=4.0, help="measured seconds per run (default 4)"
    )
    parser.add_argument(
        "--warmup", type=float, default=1.0, help="unmeasured warmup seconds per run (default 1)"
    )
    parser.add_argument("--server-cpu", type=int, default=0, help="server's CPU (default 0)")
    parser.add_argument("--client-cpu", type=int, default=1, help="client's CPU (default 1)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write results as JSON")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count the servers' instructions per call under valgrind instead of timing",
    )
    parser.add_argument(
        "--calls", type=int, default=1000, help="calls for --instructions (default 1000)"
    )
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.targets.split(",") if n.strip()]
    unknown = [n for n in names if n not in TARGETS]
    if unknown or not names:
        parser.error(f"unknown target(s) {unknown}; choose from {', '.join(TARGETS)}")
    args.targets = list(dict.fromkeys(names))
    if args.server_cpu == args.client_cpu:
        parser.error("--server-cpu and --client-cpu must differ")
    args.connections = 1
    args.import_repeats = 0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.sched_setaffinity(0, {args.client_cpu})
    if args.instructions:
        return count_instructions(args)
    env = environment(args)
    print(
        f"stdio_roundtrip: {', '.join(args.targets)}; {args.runs} runs x ({args.warmup:g} s"
        f" warmup + {args.duration:g} s); one call in flight; server on CPU {args.server_cpu},"
        f" client on CPU {args.client_cpu}; loadavg {env['loadavg_at_start'][0]:.2f}"
    )
    print(packages_line(env))
    reports = {n: TargetReport(n, TARGETS[n].description) for n in args.targets}
    targets = [TARGETS[n] for n in args.targets]
    for run in range(1, args.runs + 1):
        shift = (run - 1) % len(targets)
        for target in targets[shift:] + targets[:shift]:
            rep = reports[target.name]
            try:
                result = one_run(target, run, args)
            except Exception as exc:
                rep.status, rep.reason = "failed", (str(exc) or repr(exc)).splitlines()[0]
                print(f"run {run} {target.name:<18} FAILED: {exc}")
                continue
            rep.runs.append(result)
            if result.errors:
                rep.status, rep.reason = "failed", f"{result.errors} bad answers"
                for sample in result.error_samples:
                    print(f"    {sample}")
            print(run_line(target.name, result), flush=True)
    print()
    summarize(reports)
    print_table(reports)
    if args.json is not None:
        payload = {"environment": env, "targets": [asdict(r) for r in reports.values()]}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(json_safe(payload), indent=2, allow_nan=False) + "\n")
        print(f"\nwrote {args.json}")
    return 1 if any(rep.status == "failed" for rep in reports.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Server CPU per trivial ``tools/call``: millimcp vs the official SDK vs FastMCP vs a raw floor.

Every target is one uvicorn process (httptools + uvloop, access log off, one worker) pinned to
``--server-cpu``; this process is the load generator, pinned to ``--client-cpu``. Each run
starts a fresh server, checks one response in depth, warms up, then measures for a fixed
window: calls completed, per-call latency, and the server's user+sys CPU time from
``/proc/PID/stat``. Targets alternate run by run; medians over runs are reported, with the
CPU per call as ratios against the raw floor and against the official SDK.

    .venv/bin/python benchmarks/server_overhead.py --runs 3 --duration 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import msgspec
from harness import (
    HOST,
    REPO_ROOT,
    ServerProcess,
    calibrate,
    child_env,
    cpu_counters,
    environment,
    json_safe,
    native_command,
    new_runner,
    packages_line,
    percentile_ms,
    pinned,
    rss_mb,
    serving,
    shown,
    uvicorn_command,
)
from loadgen import ECHO_TEXT, LoadResult, build_request, probe, run_load


@dataclass(frozen=True)
class Target:
    name: str
    module: str  # module under benchmarks/servers exposing ``app``
    framework: str  # what "framework import time" imports
    description: str
    path: str = "/mcp"
    front: str = "uvicorn"  # "native": the app on millimcp's native HTTP/1.1 front instead


_STATELESS_JSON = "Streamable HTTP, stateless, JSON responses"


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("raw", "raw_echo", "msgspec", "raw ASGI app + msgspec, canned result: the floor"),
        Target(
            "official", "official_echo", "mcp.server.mcpserver", f"mcp MCPServer, {_STATELESS_JSON}"
        ),
        Target("fastmcp", "fastmcp_echo", "fastmcp", f"fastmcp FastMCP, {_STATELESS_JSON}"),
        Target("millimcp", "millimcp_echo", "millimcp", "millimcp Server.asgi()"),
        Target(
            "official_shim",
            "official_on_millimcp",
            "millimcp.compat.mcp2",
            "official_echo.py unmodified on millimcp (millimcp.compat import hook)",
        ),
        Target(
            "fastmcp_shim",
            "fastmcp_on_millimcp",
            "millimcp.compat.fastmcp",
            "fastmcp_echo.py unmodified on millimcp (millimcp.compat import hook)",
        ),
        Target(
            "millimcp_native",
            "millimcp_echo",
            "millimcp",
            "millimcp on its native front (asyncio.Protocol + httptools, uvloop)",
            front="native",
        ),
        Target(
            "millimcp_timed",
            "millimcp_timed",
            "millimcp",
            "millimcp with Server-Timing and Prometheus /metrics",
        ),
        Target(
            "millimcp_observed",
            "millimcp_observed",
            "millimcp",
            "millimcp with Server-Timing, Prometheus and OpenTelemetry (SDK, every span)",
        ),
    )
}


@dataclass
class RunResult:
    run: int
    calls: int
    errors: int
    warmup_errors: int
    wall_s: float
    calls_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    server_cpu_us_per_call: float
    server_busy: float  # server CPU seconds / wall seconds
    server_sys_share: float  # kernel part of the server's CPU (syscalls, loopback TCP)
    server_waiting: float  # server run-queue wait / wall: it was runnable but not running
    foreign_load: float  # other work on the server's CPU / wall (0 on a quiet machine)
    steal: float  # hypervisor steal on the server's CPU / wall
    client_cpu_us_per_call: float
    client_busy: float
    rss_start_mb: float
    rss_after_mb: float
    calibration_ns: float  # see calibrate(): higher means a slower core for this run
    error_samples: list[str] = field(default_factory=list)


@dataclass
class TargetReport:
    name: str
    description: str
    status: str = "ok"  # ok | failed | skipped
    reason: str = ""
    framework_import_ms: float | None = None
    app_import_ms: float | None = None
    runs: list[RunResult] = field(default_factory=list)
    median: dict[str, float] = field(default_factory=dict)
    cpu_vs_raw: float | None = None
    cpu_vs_official: float | None = None
    paired_vs_raw: float | None = None
    """Median over rounds of (this target's CPU per call / raw's in the same round): targets
    run back to back within a round, so this ratio shrugs off the VM's drifting core speed."""


# --------------------------------------------------------------------------- process plumbing


def check_import(target: Target, cpu: int, timeout_s: float = 120.0) -> str | None:
    """Import the target's app module in a fresh interpreter; the failure text, or None."""
    proc = subprocess.run(
        [sys.executable, "-c", f"import {target.module}"],
        env=child_env(),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        preexec_fn=pinned(cpu),
        check=False,
    )
    if proc.returncode == 0:
        return None
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {proc.returncode}"


_IMPORT_SNIPPET = """
import time
t0 = time.perf_counter()
import {framework}
t1 = time.perf_counter()
import {module}
t2 = time.perf_counter()
print((t1 - t0) * 1e3, (t2 - t0) * 1e3)
"""


def measure_import(target: Target, cpu: int, repeats: int) -> tuple[float, float]:
    """Median in-process cold-import time (ms) of the framework, and of the whole app module."""
    code = _IMPORT_SNIPPET.format(framework=target.framework, module=target.module)
    framework_ms: list[float] = []
    app_ms: list[float] = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=child_env(),
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=pinned(cpu),
            check=True,
        ).stdout.split()
        framework_ms.append(float(out[-2]))
        app_ms.append(float(out[-1]))
    return statistics.median(framework_ms), statistics.median(app_ms)


@contextlib.contextmanager
def served(target: Target, cpu: int) -> Iterator[ServerProcess]:
    native = target.front == "native"
    command = native_command(target.module) if native else uvicorn_command(target.module)
    with serving(ServerProcess(target.name, command, cpu)) as server:
        yield server


# --------------------------------------------------------------------------- one run


def deep_check(status: int, body: bytes) -> str | None:
    """Full decode of the first response: a JSON-RPC success carrying the echoed text."""
    if status != 200:
        return f"HTTP {status}: {body[:400]!r}"
    try:
        msg = msgspec.json.decode(body)
        result = msg["result"]
        text = result["content"][0]["text"]
    except (msgspec.DecodeError, KeyError, IndexError, TypeError):
        return f"not a tools/call result: {body[:400]!r}"
    if msg.get("id") != 1 or text != ECHO_TEXT or result.get("isError"):
        return f"unexpected result: {body[:400]!r}"
    return None


def one_run(
    target: Target, run: int, args: argparse.Namespace, runner: asyncio.Runner
) -> RunResult:
    calibration = calibrate(args.server_cpu, args.client_cpu)
    with served(target, args.server_cpu) as server:
        request = build_request(HOST, server.port, target.path)
        status, body = probe(HOST, server.port, request)
        if (problem := deep_check(status, body)) is not None:
            raise RuntimeError(f"server rejected the benchmark request: {problem}")
        rss_start = rss_mb(server.pid)
        load: LoadResult = runner.run(
            run_load(
                host=HOST,
                port=server.port,
                request=request,
                marker=f'"{ECHO_TEXT}"'.encode(),
                connections=args.connections,
                warmup_s=args.warmup,
                duration_s=args.duration,
                sample=lambda: cpu_counters(server.pid, args.server_cpu),
            )
        )
        time.sleep(0.2)
        rss_after = rss_mb(server.pid)
        if server.proc.poll() is not None:
            raise RuntimeError(f"server died during the run:\n{server.log_tail()}")

    lat = sorted(load.latencies_ns)
    calls = load.calls or float("nan")
    server_cpu = load.sampled["server_cpu"]
    return RunResult(
        run=run,
        calls=load.calls,
        errors=load.errors,
        warmup_errors=load.warmup_errors,
        wall_s=load.wall_s,
        calls_per_s=load.calls / load.wall_s,
        p50_ms=percentile_ms(lat, 0.50),
        p95_ms=percentile_ms(lat, 0.95),
        p99_ms=percentile_ms(lat, 0.99),
        server_cpu_us_per_call=server_cpu / calls * 1e6,
        server_busy=server_cpu / load.wall_s,
        server_sys_share=load.sampled["server_sys"] / server_cpu if server_cpu else 0.0,
        server_waiting=load.sampled["server_wait"] / load.wall_s,
        foreign_load=max(0.0, load.sampled["cpu_busy"] - server_cpu) / load.wall_s,
        steal=load.sampled["cpu_steal"] / load.wall_s,
        client_cpu_us_per_call=load.client_cpu_s / calls * 1e6,
        client_busy=load.client_cpu_s / load.wall_s,
        rss_start_mb=rss_start,
        rss_after_mb=rss_after,
        calibration_ns=calibration,
        error_samples=load.error_samples,
    )


# --------------------------------------------------------------------------- reporting


MEDIANS = (
    "calls_per_s",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "server_cpu_us_per_call",
    "server_busy",
    "server_sys_share",
    "server_waiting",
    "foreign_load",
    "steal",
    "client_cpu_us_per_call",
    "client_busy",
    "rss_start_mb",
    "rss_after_mb",
    "calibration_ns",
)


def summarize(reports: list[TargetReport]) -> None:
    for rep in reports:
        if rep.runs:
            rep.median = {k: statistics.median(getattr(r, k) for r in rep.runs) for k in MEDIANS}
    by_name = {r.name: r for r in reports if r.runs and r.status == "ok"}
    for rep in by_name.values():
        cpu = rep.median["server_cpu_us_per_call"]
        for base, attr in (("raw", "cpu_vs_raw"), ("official", "cpu_vs_official")):
            if base in by_name:
                setattr(rep, attr, cpu / by_name[base].median["server_cpu_us_per_call"])
        if "raw" in by_name:
            floor = {r.run: r.server_cpu_us_per_call for r in by_name["raw"].runs}
            pairs = [r.server_cpu_us_per_call / floor[r.run] for r in rep.runs if r.run in floor]
            if pairs:
                rep.paired_vs_raw = statistics.median(pairs)


def run_line(name: str, r: RunResult) -> str:
    return (
        f"run {r.run} {name:<9} {r.calls_per_s:8,.0f} calls/s {r.server_cpu_us_per_call:7.1f}"
        f" µs/call  p50 {r.p50_ms:6.2f} ms  errors {r.errors + r.warmup_errors}"
        f" | server busy {r.server_busy:4.0%} (sys {r.server_sys_share:3.0%}),"
        f" other {r.foreign_load:3.0%}, steal {r.steal:3.0%}; load gen {r.client_busy:4.0%};"
        f" core {r.calibration_ns:.0f} ns/iter"
    )


def cpu_use_line(m: dict[str, float]) -> str:
    return (
        f"use: busy {m['server_busy']:.0%} ({m['server_sys_share']:.0%} of it in the kernel),"
        f" runnable but waiting {m['server_waiting']:.0%};"
        f" on its CPU, other work {m['foreign_load']:.0%}, steal {m['steal']:.0%}"
    )


def noise_warnings(m: dict[str, float]) -> list[str]:
    """What makes a run's numbers suspect: an unsaturated server, or a contended CPU."""
    warnings = []
    if m["server_busy"] < 0.9:
        warnings.append(
            "server under 90% busy: not saturated (CPU shared with other work, or the load"
            " generator / latency is the limit)"
        )
    if m["foreign_load"] > 0.05 or m["steal"] > 0.05:
        warnings.append(
            "other processes or the hypervisor took the server's CPU: per-call CPU is inflated"
            " by cache/TLB pollution; compare ratios from the same session only"
        )
    if m["client_busy"] > 0.9:
        warnings.append("load generator over 90% busy: it may be the bottleneck")
    return warnings


def _range(rep: TargetReport, key: str, fmt: str) -> str:
    values = [getattr(r, key) for r in rep.runs]
    return f"{format(min(values), fmt)} … {format(max(values), fmt)}"


def print_target(index: int, rep: TargetReport) -> None:
    print(f"Benchmark {index}: {rep.name}  ({rep.description})")
    if rep.status == "skipped":
        print(f"  SKIPPED: {rep.reason}\n")
        return
    if rep.framework_import_ms is not None and rep.app_import_ms is not None:
        print(
            f"  Import (median):  framework {rep.framework_import_ms:7.1f} ms   "
            f"app module {rep.app_import_ms:7.1f} ms"
        )
    if rep.runs:
        m, n = rep.median, len(rep.runs)
        print(
            f"  Server CPU (median): {m['server_cpu_us_per_call']:8.1f} µs/call   "
            f"Range (min … max): {_range(rep, 'server_cpu_us_per_call', '.1f')} µs/call   {n} runs"
        )
        print(
            f"  Throughput (median): {m['calls_per_s']:8,.0f} calls/s   "
            f"Range (min … max): {_range(rep, 'calls_per_s', ',.0f')} calls/s"
        )
        print(
            f"  Latency (median):    p50 {m['p50_ms']:.2f} ms   p95 {m['p95_ms']:.2f} ms   "
            f"p99 {m['p99_ms']:.2f} ms   ({sum(r.calls for r in rep.runs):,} calls)"
        )
        print(f"  Server CPU {cpu_use_line(m)}")
        print(
            f"  Core speed: {m['calibration_ns']:.0f} ns per calibration-loop iteration"
            f" (range {_range(rep, 'calibration_ns', '.0f')}; lower is faster)"
        )
        print(
            f"  Load generator: {m['client_cpu_us_per_call']:.1f} µs/call"
            f" ({m['client_busy']:.0%} busy)   RSS: {m['rss_start_mb']:.1f} MB idle at start,"
            f" {m['rss_after_mb']:.1f} MB idle after load"
        )
        for warning in noise_warnings(m):
            print(f"  WARNING: {warning}")
    if rep.status == "failed":
        print(f"  FAILED: {rep.reason}")
        for run in rep.runs:
            for sample in run.error_samples[:3]:
                print(f"    run {run.run}: {sample}")
    print()


def print_table(reports: list[TargetReport]) -> None:
    columns = (  # header, width
        ("target", 9),
        ("calls/s", 8),
        ("p50 ms", 7),
        ("p95 ms", 7),
        ("p99 ms", 7),
        ("CPU µs/call", 11),
        ("x raw", 6),
        ("paired", 6),
        ("x official", 10),
        ("busy", 5),
        ("import ms", 9),
        ("app ms", 7),
        ("RSS MB", 7),
    )
    header = " ".join(
        f"{name:<{w}}" if i == 0 else f"{name:>{w}}" for i, (name, w) in enumerate(columns)
    )
    print("Summary: medians over runs; 'x raw' and 'x official' are ratios of server CPU per call;")
    print("'paired' is the median of per-round ratios to raw (each round runs every target)")
    print(header + "  status")
    print("-" * (len(header) + 8))
    for rep in reports:
        m = rep.median
        cells = (
            rep.name,
            shown(m.get("calls_per_s"), ",.0f"),
            shown(m.get("p50_ms"), ".2f"),
            shown(m.get("p95_ms"), ".2f"),
            shown(m.get("p99_ms"), ".2f"),
            shown(m.get("server_cpu_us_per_call"), ".1f"),
            shown(rep.cpu_vs_raw, ".2f"),
            shown(rep.paired_vs_raw, ".2f"),
            shown(rep.cpu_vs_official, ".3f"),
            shown(m.get("server_busy"), ".0%"),
            shown(rep.framework_import_ms, ".0f"),
            shown(rep.app_import_ms, ".0f"),
            shown(m.get("rss_after_mb"), ".1f"),
        )
        row = " ".join(
            f"{cell:<{w}}" if i == 0 else f"{cell:>{w}}"
            for i, (cell, (_, w)) in enumerate(zip(cells, columns, strict=True))
        )
        status = f"{rep.status}: {rep.reason}" if rep.reason else rep.status
        print(f"{row}  {status[:70]}")
    print(
        "import ms / app ms: in-process cold import of the framework / of the whole app module"
        " (interpreter start excluded); RSS MB: VmRSS of the idle server after load"
    )


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--targets",
        default="raw,official,fastmcp,millimcp",
        help=f"comma-separated subset of {', '.join(TARGETS)} "
        "(default: raw,official,fastmcp,millimcp)",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per target (default 3)")
    parser.add_argument(
        "--duration", type=float, default=5.0, help="measured seconds per run (default 5)"
    )
    parser.add_argument(
        "--warmup", type=float, default=2.0, help="unmeasured warmup seconds per run (default 2)"
    )
    parser.add_argument(
        "--connections",
        type=int,
        default=32,
        help="connections, one call in flight on each (default 32)",
    )
    parser.add_argument(
        "--server-cpu", type=int, default=0, help="CPU the server is pinned to (default 0)"
    )
    parser.add_argument(
        "--client-cpu", type=int, default=1, help="CPU the load generator is pinned to (default 1)"
    )
    parser.add_argument(
        "--import-repeats", type=int, default=5, help="import-time samples per target (0: skip)"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write results as JSON")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.targets.split(",") if n.strip()]
    unknown = [n for n in names if n not in TARGETS]
    if unknown or not names:
        parser.error(f"unknown target(s) {unknown}; choose from {', '.join(TARGETS)}")
    args.targets = list(dict.fromkeys(names))
    if args.server_cpu == args.client_cpu:
        parser.error("--server-cpu and --client-cpu must differ")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    available = os.sched_getaffinity(0)
    if not {args.server_cpu, args.client_cpu} <= available:
        print(f"CPUs {args.server_cpu} and {args.client_cpu} must both be in {sorted(available)}")
        return 2
    os.sched_setaffinity(0, {args.client_cpu})

    env = environment(args)
    print(
        f"server_overhead: {', '.join(args.targets)}; {args.runs} runs x ({args.warmup:g} s warmup"
        f" + {args.duration:g} s); {args.connections} connections; server on CPU {args.server_cpu},"
        f" load generator on CPU {args.client_cpu}; loadavg {env['loadavg_at_start'][0]:.2f}"
    )
    print(packages_line(env))

    reports = {name: TargetReport(name, TARGETS[name].description) for name in args.targets}
    active: list[Target] = []
    for name in args.targets:
        target, rep = TARGETS[name], reports[name]
        if (error := check_import(target, args.server_cpu)) is not None:
            rep.status, rep.reason = "skipped", f"`import {target.module}` failed: {error}"
            print(f"skipping {name}: {rep.reason}")
            continue
        if args.import_repeats > 0:
            try:
                rep.framework_import_ms, rep.app_import_ms = measure_import(
                    target, args.server_cpu, args.import_repeats
                )
            except (subprocess.SubprocessError, ValueError, IndexError) as exc:
                print(f"import timing for {name} failed: {exc}")
        active.append(target)

    with new_runner() as runner:
        for run in range(1, args.runs + 1):
            shift = (run - 1) % max(len(active), 1)
            for target in active[shift:] + active[:shift]:  # rotate the order run by run
                rep = reports[target.name]
                if rep.status == "failed" and not rep.runs:
                    continue
                try:
                    result = one_run(target, run, args, runner)
                except Exception as exc:
                    rep.status, rep.reason = "failed", (str(exc) or repr(exc)).splitlines()[0]
                    print(f"run {run} {target.name:<9} FAILED: {exc}")
                    continue
                rep.runs.append(result)
                errors = result.errors + result.warmup_errors
                if errors:
                    rep.status, rep.reason = "failed", f"{errors} bad responses"
                print(run_line(target.name, result))
    print()

    ordered = [reports[name] for name in args.targets]
    summarize(ordered)
    for index, rep in enumerate(ordered, 1):
        print_target(index, rep)
    print_table(ordered)

    if args.json is not None:
        payload = {"environment": env, "targets": [asdict(rep) for rep in ordered]}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(json_safe(payload), indent=2, allow_nan=False) + "\n")
        print(f"\nwrote {args.json}")
    return 1 if any(rep.status == "failed" for rep in ordered) else 0


if __name__ == "__main__":
    sys.exit(main())


if __name__ == "__main__":
    sys.exit(main())

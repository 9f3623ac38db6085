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

The clients are in ``client_links.py``, the measured process in ``client_worker.py``,
``--profile`` and ``--instructions`` in ``client_profile.py``; this script is the parent.

    .venv/bin/python benchmarks/client_overhead.py --runs 3
    .venv/bin/python benchmarks/client_overhead.py --profile millimcp --in-flight 32
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

from client_links import CLIENTS, SERVER_MODULE, check_import
from client_profile import instructions_main, profile_main
from client_worker import run_worker, worker_command, worker_main
from harness import (
    ServerProcess,
    calibrate,
    environment,
    json_safe,
    packages_line,
    proc_status,
    serving,
    shown,
    uvicorn_command,
)

EXTRA_PACKAGES = ("aiohttp", "httpx2", "anyio", "pydantic")
BASELINE = "aiohttp"


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
            shown(m.get("calls_per_s"), ",.0f"),
            shown(m.get("p50_ms"), ".3f"),
            shown(m.get("p99_ms"), ".3f"),
            shown(m.get("client_cpu_us_per_call"), ".1f"),
            shown(rep.cpu_vs_aiohttp, ".2f"),
            shown(rep.paired_vs_aiohttp, ".2f"),
            shown(rep.cpu_vs_official, ".3f"),
            shown(rep.cpu_vs_streams, ".2f"),
            shown(m.get("client_busy"), ".0%"),
            shown(m.get("server_busy"), ".0%"),
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

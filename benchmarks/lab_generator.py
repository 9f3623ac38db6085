"""The lab's own cost: what ``millimcp bench`` sustains from one core, and its CPU per call.

A fast server (the raw ASGI floor, and millimcp, each under uvicorn with httptools + uvloop)
is pinned to ``--server-cpu``; this process is the generator, pinned to ``--client-cpu``,
running exactly what ``millimcp bench`` runs (``millimcp.lab``: the Client finds the era and
makes one call, then the lean generator resends that request on raw keep-alive connections;
``full`` makes every call through the millimcp Client instead). Each configuration runs a
warmup, then a measured closed-loop window; per window:

- calls/s (successful + failed: a failure is counted as a call it made);
- generator CPU us per call and its core's busy share; the generator's ceiling on one core
  is ``1e6 / (CPU us per call)`` calls/s, whatever the server;
- server CPU us per call and its busy share (``/proc``), so the side that limits is visible;
- foreign load: CPU time other processes took on either core during the window.

Configurations alternate within each round; medians over ``--runs`` rounds. Run it alone on
the machine (``flock`` the benchmark lock on a shared one):

    .venv/bin/python benchmarks/lab_generator.py --runs 3 --duration 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness import CLK_TCK, calibrate, cpu_counters
from server_overhead import TARGETS, served

from millimcp.lab.loadgen import Plan, prepare_full, prepare_lean, run_event_loop
from millimcp.lab.recording import LoadReport
from millimcp.lab.target import connect, parse_target

CONFIGS: tuple[tuple[str, int], ...] = (("lean", 1), ("lean", 8), ("lean", 32), ("full", 8))
"""(client, calls in flight) measured against each server."""


@dataclass
class Row:
    target: str
    client: str
    concurrency: int
    run: int
    calls_per_s: float
    generator_us: float
    generator_busy: float
    generator_ceiling: float
    server_us: float
    server_busy: float
    foreign_client_core: float
    foreign_server_core: float
    errors: int


def core_busy_s(cpu: int) -> float:
    """Seconds core ``cpu`` has run anything (user, nice, system, irq, softirq)."""
    label = f"cpu{cpu} "
    line = next(ln for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith(label))
    user, nice, system, _idle, _iowait, irq, softirq = map(int, line.split()[1:8])
    return (user + nice + system + irq + softirq) / CLK_TCK


async def measure(
    url: str,
    client: str,
    concurrency: int,
    warmup_s: float,
    duration_s: float,
    server: tuple[int, int],
) -> tuple[LoadReport, dict[str, float], float]:
    """One warmup and one measured window; the report, the server's counters over the window
    and this core's busy seconds over it."""
    # era="modern": the raw floor answers every POST with the canned tools/call result, so
    # it cannot answer server/discover; both targets speak 2026-07-28 without a handshake.
    async with connect(parse_target(url), era="modern", max_in_flight=concurrency) as link:
        _, template = await link.call_template("echo", {"text": "hello"})

        async def window(seconds: float) -> LoadReport:
            plan = Plan(mode="closed", concurrency=concurrency, duration_s=seconds, warmup_s=0.0)
            if client == "lean":
                ready = await prepare_lean(template, plan, lambda tick: None)
            else:
                ready = await prepare_full(
                    link.client, "echo", {"text": "hello"}, plan, lambda tick: None
                )
            report: LoadReport = await ready.go(time.perf_counter_ns())
            return report

        await window(warmup_s)
        own_cpu = min(os.sched_getaffinity(0))
        before = cpu_counters(*server)
        own_core0 = core_busy_s(own_cpu)
        report = await window(duration_s)
        own_core1 = core_busy_s(own_cpu)
        after = cpu_counters(*server)
    delta = {key: after[key] - before[key] for key in before}
    return report, delta, own_core1 - own_core0


def one_run(
    target_name: str,
    client: str,
    concurrency: int,
    run: int,
    args: argparse.Namespace,
) -> Row:
    target = TARGETS[target_name]
    with served(target, args.server_cpu) as server:
        url = f"http://127.0.0.1:{server.port}{target.path}"
        report, server_delta, core_s = run_event_loop(
            measure(
                url,
                client,
                concurrency,
                args.warmup,
                args.duration,
                (server.pid, args.server_cpu),
            )
        )
    calls = report.calls + sum(report.errors.values())
    window = report.window_s
    return Row(
        target=target_name,
        client=client,
        concurrency=concurrency,
        run=run,
        calls_per_s=calls / window,
        generator_us=report.cpu_s / calls * 1e6,
        generator_busy=report.cpu_s / window,
        generator_ceiling=calls / report.cpu_s,
        server_us=server_delta["server_cpu"] / calls * 1e6,
        server_busy=server_delta["server_cpu"] / window,
        foreign_client_core=max(0.0, core_s - report.cpu_s) / window,
        foreign_server_core=max(0.0, server_delta["cpu_busy"] - server_delta["server_cpu"])
        / window,
        errors=sum(report.errors.values()),
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--targets", default="raw,millimcp", help="servers (default raw,millimcp)")
    parser.add_argument("--runs", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=1.0, help="warmup seconds")
    parser.add_argument("--server-cpu", type=int, default=1)
    parser.add_argument("--client-cpu", type=int, default=0)
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the rows as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.sched_setaffinity(0, {args.client_cpu})
    targets = [name.strip() for name in args.targets.split(",") if name.strip()]
    speed = {
        "client_core_ns": calibrate(args.client_cpu, args.client_cpu),
        "server_core_ns": calibrate(args.server_cpu, args.client_cpu),
    }
    rows: list[Row] = []
    for run in range(1, args.runs + 1):
        for name in targets:
            for client, concurrency in CONFIGS:
                row = one_run(name, client, concurrency, run, args)
                rows.append(row)
                print(
                    f"run {run} {name:9} {client:4} c={concurrency:<3} "
                    f"{row.calls_per_s:9,.0f} calls/s  generator {row.generator_us:5.1f} us/call "
                    f"({row.generator_busy:4.0%} busy)  server {row.server_us:5.1f} us/call "
                    f"({row.server_busy:4.0%} busy)  foreign {row.foreign_client_core:3.0%}/"
                    f"{row.foreign_server_core:3.0%}",
                    flush=True,
                )
    print()
    print(
        f"Medians of {args.runs} runs, {args.duration:g} s windows; generator on CPU "
        f"{args.client_cpu}, server on CPU {args.server_cpu}; core speed "
        f"{speed['client_core_ns']:.1f}/{speed['server_core_ns']:.1f} ns per loop step"
    )
    header = (
        f"{'server':9} {'client':6} {'c':>3} {'calls/s':>9} {'gen us/call':>11} {'gen busy':>8} "
        f"{'gen ceiling/s':>13} {'srv us/call':>11} {'srv busy':>8} {'foreign':>9}"
    )
    print(header)
    print("-" * len(header))
    summary: list[dict[str, Any]] = []
    for name in targets:
        for client, concurrency in CONFIGS:
            mine = [
                r
                for r in rows
                if (r.target, r.client, r.concurrency) == (name, client, concurrency)
            ]

            def med(field: str, mine: list[Row] = mine) -> float:
                value: float = statistics.median(getattr(r, field) for r in mine)
                return value

            line = {
                "target": name,
                "client": client,
                "concurrency": concurrency,
                **{
                    field: med(field)
                    for field in (
                        "calls_per_s",
                        "generator_us",
                        "generator_busy",
                        "generator_ceiling",
                        "server_us",
                        "server_busy",
                        "foreign_client_core",
                        "foreign_server_core",
                    )
                },
                "errors": sum(r.errors for r in mine),
            }
            summary.append(line)
            print(
                f"{name:9} {client:6} {concurrency:>3} {line['calls_per_s']:>9,.0f} "
                f"{line['generator_us']:>11.1f} {line['generator_busy']:>8.0%} "
                f"{line['generator_ceiling']:>13,.0f} {line['server_us']:>11.1f} "
                f"{line['server_busy']:>8.0%} "
                f"{line['foreign_client_core']:>4.0%}/{line['foreign_server_core']:<4.0%}"
            )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"speed": speed, "rows": [asdict(r) for r in rows], "medians": summary}, indent=2
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

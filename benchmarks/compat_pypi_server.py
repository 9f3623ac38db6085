"""A real PyPI server on its own framework against the same, unmodified, on millimcp.

``mcp-server-time`` (mcp 2.3.0 ``MCPServer``, with its middleware) over stdio: the installed
console script on the SDK, and ``python -m millimcp.compat run mcp-server-time`` on millimcp.
The client is stdio_roundtrip's raw pipe client: after ``initialize``, one
``get_current_time`` call at a time (a real tool: zoneinfo, a pydantic result model, its
middleware's tool lookup). Server CPU per call (``/proc/PID/stat``, all threads) and p50;
targets alternate run by run; medians over runs, and the ratio of the two in the same session.

    make compat-servers   # installs the server in .tools/compat/site
    .venv/bin/python benchmarks/compat_pypi_server.py --runs 3 --duration 4
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

from harness import REPO_ROOT, calibrate, cpu_counters, percentile_ms
from stdio_roundtrip import StdioServer, Target, _line, open_era

SITE = Path(os.environ.get("MILLIMCP_COMPAT_SITE", REPO_ROOT / ".tools" / "compat" / "site"))
SCRIPT = "mcp-server-time"
ARGS = ("--local-timezone", "UTC")
COMPAT_MAIN = REPO_ROOT / "src" / "millimcp" / "compat" / "__main__.py"
TARGETS = {
    "official": Target(
        "official", str(SITE / "bin" / SCRIPT), "handshake", "mcp 2.3.0 MCPServer", ARGS
    ),
    "shim": Target(
        "shim",
        str(COMPAT_MAIN),
        "handshake",
        "the same script via python -m millimcp.compat run",
        ("run", SCRIPT, *ARGS),
    ),
}


def one_run(target: Target, args: argparse.Namespace) -> dict[str, float]:
    calibration = calibrate(args.server_cpu, args.client_cpu)
    server = StdioServer(target, args.server_cpu)  # an absolute script path stays absolute
    try:
        open_era(server, "handshake")
        request_id = 0

        def call() -> bytes:
            nonlocal request_id
            request_id += 1
            params = {"name": "get_current_time", "arguments": {"timezone": "UTC"}}
            message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
            answer: bytes = server.call(_line({**message, "params": params}))
            result = json.loads(answer).get("result", {})
            structured = result.get("structuredContent", {})
            if result.get("isError") or structured.get("timezone") != "UTC":
                raise RuntimeError(f"not a get_current_time result: {answer[:300]!r}")
            return answer

        deadline = time.perf_counter() + args.warmup
        while time.perf_counter() < deadline:
            call()
        latencies: list[int] = []
        gc.collect()
        gc.disable()
        try:
            before = cpu_counters(server.pid, args.server_cpu)
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < args.duration:
                start = time.perf_counter_ns()
                call()
                latencies.append(time.perf_counter_ns() - start)
            wall = time.perf_counter() - t0
            after = cpu_counters(server.pid, args.server_cpu)
        finally:
            gc.enable()
    finally:
        server.stop()
    calls = len(latencies)
    cpu = after["server_cpu"] - before["server_cpu"]
    return {
        "calls": calls,
        "calls_per_s": calls / wall,
        "p50_ms": percentile_ms(sorted(latencies), 0.5),
        "server_cpu_us_per_call": cpu / calls * 1e6,
        "foreign_load": max(0.0, after["cpu_busy"] - before["cpu_busy"] - cpu) / wall,
        "calibration_ns": calibration,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=4.0, help="seconds measured per run")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    args = parser.parse_args(argv)
    if not (SITE / "bin" / SCRIPT).exists():
        print(f"{SCRIPT} is not installed in {SITE}: run make compat-servers", file=sys.stderr)
        return 2
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(SITE), os.environ.get("PYTHONPATH")])
    )
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in TARGETS}
    for run in range(args.runs):
        for name, target in TARGETS.items():
            result = one_run(target, args)
            runs[name].append(result)
            print(
                f"run {run + 1} {name:8} {result['server_cpu_us_per_call']:8.0f} µs CPU/call  "
                f"p50 {result['p50_ms']:6.2f} ms  {result['calls']:6.0f} calls  "
                f"foreign load {result['foreign_load']:.2f}",
                flush=True,
            )
    median = {
        name: {key: statistics.median(r[key] for r in results) for key in results[0]}
        for name, results in runs.items()
    }
    print(f"\n{'target':8} {'CPU/call':>10} {'p50':>9}  (medians of {args.runs} runs)")
    for name, m in median.items():
        print(f"{name:8} {m['server_cpu_us_per_call']:8.0f} µs {m['p50_ms']:6.2f} ms")
    ratios = [
        o["server_cpu_us_per_call"] / s["server_cpu_us_per_call"]
        for o, s in zip(runs["official"], runs["shim"], strict=True)
    ]
    p50s = [o["p50_ms"] / s["p50_ms"] for o, s in zip(runs["official"], runs["shim"], strict=True)]
    print(
        f"shim: {statistics.median(ratios):.1f}x less server CPU per call, "
        f"p50 {statistics.median(p50s):.1f}x lower (medians of per-run ratios)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Where a client's time goes, and how many instructions it runs per call.

``client_overhead.py --profile CLIENT`` (:func:`profile_main`): two profilers, both counting
CPU only (a wait for the server costs nothing): py-spy when it is installed (sampling, from
outside, a few percent of overhead; C code is charged to the Python function that called it),
else cProfile on a CPU clock inside the worker (exact counts, but its per-event cost inflates
code made of many small calls).

``client_overhead.py --instructions CALLS`` (:func:`instructions_main`): CPU time on a shared
2-core VM drifts by 2x within minutes; instruction counts do not. Each client worker runs
under callgrind at two call counts against the same server, and the difference per call is
the client's own work (interpreter start, imports and connection set-up cancel out). The
kernel's share (syscalls, loopback TCP) is not counted.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from client_links import SERVER_MODULE, check_import
from client_worker import run_worker, worker_command
from harness import (
    ServerProcess,
    serving,
    shown,
    uvicorn_command,
)

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
    ("/client_links.py", "benchmark harness"),
    ("/client_worker.py", "benchmark harness"),
    ("/harness.py", "benchmark harness"),
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
            shown(count / per_call[base, level] if (base, level) in per_call else None, fmt)
            for base, fmt in (("aiohttp", ".2f"), ("official", ".3f"), ("streams", ".2f"))
        ]
        print(f"{name:<9} {level:>9} {count:>12,.0f} {ratios[0]:>9} {ratios[1]:>10} {ratios[2]:>9}")
    return 0

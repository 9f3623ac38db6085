"""The measured side of ``client_overhead.py``: one client process, pinned to one CPU.

``client_overhead.py --worker CLIENT`` opens the client (``client_links``), runs its calls
over the tasks, warms up, then measures a window: its own user+sys CPU
(``resource.getrusage``: every thread), completed calls and each call's latency. It prints
``WINDOW`` when the window opens (a profiler may attach) and ``RESULT {json}`` at the end;
:func:`worker_command` and :func:`run_worker` are the parent's side of that exchange.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from client_links import OPENERS, PATH, Call
from harness import (
    HOST,
    ServerProcess,
    child_env,
    json_safe,
    percentile_ms,
    pinned,
    proc_cpu_s,
)

SCRIPT = Path(__file__).resolve().with_name("client_overhead.py")  # its --worker mode
RESULT_PREFIX = "RESULT "
WINDOW_LINE = "WINDOW"


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

"""Model serving: adaptive batching (the default) vs none, at 1, 8 and 32 callers, two models.

Per model, starts examples/model_server.py twice, side by side (``--model cnn``: the seeded
CNN, 1x3x224x224 -> 1,000 logits; ``--model mlp``: a wide MLP, 1x1024 -> 1,000; CPU unless a
GPU is present): one with batching on (adaptive, ``max_batch_size`` 32), one with
``--no-batching``. Both stay up for the whole model, and at each caller count in turn
(``--callers 32 8 1``: a lone caller after a crowd, for the adaptive batcher, which keeps
what it learned) they are driven in short rounds that alternate A/B, B/A, A/B...
(``--rounds`` of ``--duration`` seconds each), so that the load other work puts on a shared
machine falls on both modes alike. Each round keeps N closed-loop callers busy with
millimcp's own client (``Client.over_http``, raw tensors over ``dev.millimcp/tensor``), after
a short ramp that is not measured.

Per round: calls/s, p50/p99, the client's CPU use (seconds of client CPU per second of wall
time: well below 1.0 means the client is not the bottleneck) and the server's (its threads'
``/proc/<pid>/task/*/schedstat``); for the batching server, what its batcher did in that
round (``model_info`` before and after): batches by number of requests, batches the adaptive
policy held back to wait for more callers (``waits``: at 1 caller it must be 0), batches run
at once in the caller's task (``alone``) and the mean queue wait. Reported per model and
caller count: medians over rounds with their range, and the ratios on / off paired round by
round (median and range), among them the server CPU milliseconds per call (off / on), which
moves less with the machine's load than calls/s do, and how soon answered callers came back
(``return_ms``). Each server runs torch with ``--threads`` intra-op threads (default: one
less than the cores, leaving the event loop one). The defaults take about 4 minutes; Ctrl-C
ends the whole run (exit 130) and stops both servers by pid.

    .venv/bin/python benchmarks/model_serving.py --rounds 6 --duration 2 --callers 32 8 1
    .venv/bin/python benchmarks/model_serving.py --models mlp --callers 1 32 \\
        --extra=--batching=fixed --extra=--max-queue-delay-ms=2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import time
from collections.abc import Coroutine, Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from shared_memory import cpu_of

from millimcp import Client, Limits
from millimcp.testing import serve_subprocess

ROOT = Path(__file__).resolve().parent.parent
SHAPES = {"cnn": (1, 3, 224, 224), "mlp": (1, 1024)}
ON, OFF = "batching", "no batching"
FIGURES = ("calls_per_s", "p50_ms", "p99_ms", "client_cpu", "server_cpu", "server_ms_per_call")
GOALS = {1: 0.95, 8: 1.0, 32: 2.5}
"""The issue's throughput ratios (on / off) by callers; p99 on / off at most 1.2 at each."""
T = TypeVar("T")


def run_to_end(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, except that Ctrl-C (SIGINT) ends it for good: the main task is
    cancelled, and KeyboardInterrupt is raised once it has unwound, even where something on
    the way swallowed the cancellation (then the run would have gone on, to the next model)."""
    interrupted = False

    async def guarded() -> T:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()

        def interrupt() -> None:
            nonlocal interrupted
            interrupted = True
            task.cancel()

        loop.add_signal_handler(signal.SIGINT, interrupt)
        try:
            return await main
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    try:
        result = asyncio.run(guarded())
    except asyncio.CancelledError:
        if interrupted:
            raise KeyboardInterrupt from None
        raise
    if interrupted:
        raise KeyboardInterrupt
    return result


@contextmanager
def model_server(
    model: str, extra: list[str], device: str, threads: int
) -> Iterator[tuple[str, int]]:
    """(url, pid) of examples/model_server.py, on this checkout's src, with ``threads``
    intra-op threads for torch (0: torch's default, one per core)."""
    command = [
        sys.executable, str(ROOT / "examples/model_server.py"),
        "--port", "{port}", "--device", device, "--model", model, *extra,
    ]  # fmt: skip
    env = {"PYTHONPATH": str(ROOT / "src")}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    with serve_subprocess(command, env=env, stdout=None, timeout=120, stop_timeout=20) as served:
        yield served.url(), served.pid


async def batcher_stats(client: Client) -> dict[str, Any]:
    info = await client.call_tool("model_info")
    stats: dict[str, Any] = (info.structured_content or {}).get("stats", {})
    return stats


def batcher_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What the batcher did between two ``stats()``: batches by requests, waits, alone runs,
    the mean queue wait, and the limit it ended on."""
    old = {int(k): v for k, v in before.get("batches", {}).items()}
    new = {int(k): v for k, v in after.get("batches", {}).items()}
    batches = {size: new[size] - old.get(size, 0) for size in new if new[size] > old.get(size, 0)}

    def requests(sizes: dict[int, int]) -> int:
        return sum(size * count for size, count in sizes.items())

    def waited(stats: dict[str, Any], sizes: dict[int, int]) -> float:
        return float(stats.get("mean_queue_wait_ms", 0.0)) * requests(sizes)

    served = requests(new) - requests(old)

    def run_and_rows(stats: dict[str, Any]) -> tuple[float, float]:
        """(ms the model ran, rows run) over all batches so far."""
        runs = sum(int(count) for count in stats.get("batches", {}).values())
        rows = float(stats.get("mean_rows", 0.0)) * runs
        return float(stats.get("per_row_ms", 0.0)) * rows, rows

    (ran_before, rows_before), (ran_after, rows_after) = run_and_rows(before), run_and_rows(after)
    rows = rows_after - rows_before
    return {
        "batches": dict(sorted(batches.items())),
        "waits": after.get("waits", 0) - before.get("waits", 0),
        "alone": after.get("alone", 0) - before.get("alone", 0),
        "mean_queue_wait_ms": (waited(after, new) - waited(before, old)) / served if served else 0,
        "limit": after.get("limit"),
        "return_ms": after.get("return_ms"),
        "all_back_ms": after.get("all_back_ms"),
        "run_ms_per_row": round((ran_after - ran_before) / rows, 3) if rows else 0.0,
        "cost_ms": after.get("cost_ms"),
    }


async def drive(
    client: Client, model: str, callers: int, duration: float, ramp: float, pid: int
) -> dict[str, Any]:
    """Keep ``callers`` closed-loop callers busy: ``ramp`` seconds unmeasured, then
    ``duration`` seconds measured."""
    inputs = [
        np.random.default_rng(i).random(SHAPES[model], dtype=np.float32) for i in range(callers)
    ]
    latencies: list[float] = []
    measuring = False
    stop_at = time.perf_counter() + ramp + duration + 3600.0

    async def caller(x: np.ndarray) -> None:
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            result = await client.call_tool("classify", {"image": x})
            ended = time.perf_counter()
            if measuring and ended < stop_at:
                latencies.append(ended - started)
            if result.is_error or result.tensors is None:
                raise RuntimeError(result.text)
            assert result.tensors["result"].shape == (1, 1000)

    tasks = [asyncio.create_task(caller(x)) for x in inputs]
    try:
        await asyncio.sleep(ramp)
        measuring = True
        began, cpu, server = time.perf_counter(), time.process_time(), cpu_of(pid)
        stop_at = began + duration
        await asyncio.sleep(duration)
        cpu, server = time.process_time() - cpu, cpu_of(pid) - server
        await asyncio.gather(*tasks)
    finally:  # interrupted (Ctrl-C) or a caller failed: no caller outlives its client
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    latencies.sort()
    return {
        "calls_per_s": len(latencies) / duration,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "client_cpu": cpu / duration,
        "server_cpu": server / duration,
        "server_ms_per_call": server * 1000 / max(len(latencies), 1),
        "calls": len(latencies),
    }


async def measure(
    model: str, servers: dict[str, tuple[str, int]], args: argparse.Namespace
) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """Rounds per caller count and mode, alternating A/B, B/A... in each level."""
    results: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for callers in args.callers:
        results[callers] = {ON: [], OFF: []}
        async with AsyncExitStack() as stack:
            clients = {
                mode: await stack.enter_async_context(
                    Client.over_http(
                        url, limits=Limits(max_in_flight=max(callers, 1)), timeout=120, retry=None
                    )
                )
                for mode, (url, _) in servers.items()
            }
            for mode, client in clients.items():  # warm up: connections, the batcher learns
                await drive(client, model, callers, args.warmup, 0.0, servers[mode][1])
            for round_ in range(args.rounds):
                order = (ON, OFF) if round_ % 2 == 0 else (OFF, ON)
                for mode in order:
                    client = clients[mode]
                    before = await batcher_stats(client) if mode == ON else {}
                    outcome = await drive(
                        client, model, callers, args.duration, args.ramp, servers[mode][1]
                    )
                    if mode == ON:
                        outcome["batcher"] = batcher_delta(before, await batcher_stats(client))
                    results[callers][mode].append(outcome)
                    print(f"{model} {callers:2} callers round {round_ + 1} {mode:12} {outcome}")
    return results


def summarise(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {"rounds": results}
    for mode, rounds in results.items():
        summary[mode] = {
            key: {
                "median": statistics.median(r[key] for r in rounds),
                "min": min(r[key] for r in rounds),
                "max": max(r[key] for r in rounds),
            }
            for key in FIGURES
        }
    pairs = list(zip(results[ON], results[OFF], strict=True))
    for name, key, inverse in (
        ("throughput_ratio", "calls_per_s", False),
        ("p99_ratio", "p99_ms", False),
        ("cpu_ratio", "server_ms_per_call", True),
    ):
        ratios = [off[key] / on[key] if inverse else on[key] / off[key] for on, off in pairs]
        summary[name] = {
            "median": statistics.median(ratios),
            "min": min(ratios),
            "max": max(ratios),
        }
    batcher = [r["batcher"] for r in results[ON]]
    sizes: dict[int, int] = {}
    for b in batcher:
        for size, count in b["batches"].items():
            sizes[size] = sizes.get(size, 0) + count
    summary["batcher"] = {
        "batches": dict(sorted(sizes.items())),
        "waits": sum(b["waits"] for b in batcher),
        "alone": sum(b["alone"] for b in batcher),
        "mean_queue_wait_ms": statistics.median(b["mean_queue_wait_ms"] for b in batcher),
        "limit": batcher[-1]["limit"],
        "return_ms": batcher[-1].get("return_ms"),
        "all_back_ms": batcher[-1].get("all_back_ms"),
    }
    return summary


def span(figure: dict[str, float], digits: int = 1) -> str:
    return f"{figure['median']:.{digits}f} ({figure['min']:.{digits}f}-{figure['max']:.{digits}f})"


def print_summary(model: str, callers: int, summary: dict[str, Any]) -> None:
    rounds = len(summary["rounds"][ON])
    print(f"\n{model}, {callers} callers: medians of {rounds} rounds per mode (range)")
    for mode in (ON, OFF):
        s = summary[mode]
        print(
            f"  {mode:12} {span(s['calls_per_s'])} calls/s   p50 {span(s['p50_ms'])} ms"
            f"   p99 {span(s['p99_ms'])} ms   CPU client {span(s['client_cpu'], 2)}"
            f" server {span(s['server_cpu'], 2)} s/s, {span(s['server_ms_per_call'], 2)} ms/call"
        )
    b = summary["batcher"]
    total = sum(b["batches"].values())
    print(
        f"  batcher: {total} batches by requests {b['batches']}, {b['waits']} held back to wait,"
        f" {b['alone']} run alone, mean queue wait {b['mean_queue_wait_ms']:.2f} ms,"
        f" limit {b['limit']}, callers back {b['return_ms']} ms after their answer (all of a"
        f" batch: {b['all_back_ms']} ms)"
    )
    print(
        f"  on / off, paired by round: {span(summary['throughput_ratio'], 2)}x throughput,"
        f" {span(summary['p99_ratio'], 2)}x p99, {span(summary['cpu_ratio'], 2)}x fewer server"
        " CPU ms per call\n",
        flush=True,
    )


def main() -> None:
    try:
        benchmark()
    except KeyboardInterrupt:
        print("\ninterrupted: the run stopped, its servers were ended", file=sys.stderr)
        sys.exit(130)


def benchmark() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", "--runs", type=int, default=6, help="per mode and caller count")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds measured a round")
    parser.add_argument("--ramp", type=float, default=0.3, help="seconds unmeasured a round")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds per level and mode")
    parser.add_argument("--callers", type=int, nargs="+", default=[32, 8, 1])
    parser.add_argument("--models", nargs="+", choices=sorted(SHAPES), default=["cnn", "mlp"])
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--threads",
        type=int,
        default=max(1, (os.cpu_count() or 2) - 1),
        help="torch intra-op threads per server (OMP_NUM_THREADS; 0: torch's default); the"
        " default leaves the event loop a core, as docs/tensors.md advises",
    )
    parser.add_argument("--extra", action="append", default=[], help="server flag, batching on")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report: dict[str, Any] = {}
    loads = [os.getloadavg()[0]]
    for model in args.models:
        with ExitStack() as stack:
            servers = {
                ON: stack.enter_context(model_server(model, args.extra, args.device, args.threads)),
                OFF: stack.enter_context(
                    model_server(model, ["--no-batching"], args.device, args.threads)
                ),
            }
            results = run_to_end(measure(model, servers, args))
        loads.append(os.getloadavg()[0])
        for callers in args.callers:
            report[f"{model}/{callers}"] = summarise(results[callers])
            print_summary(model, callers, report[f"{model}/{callers}"])
    print(
        f"\nload average {' -> '.join(f'{x:.1f}' for x in loads)} ({os.cpu_count()} CPUs,"
        f" torch threads per server: {args.threads or 'default'}); medians of paired rounds"
        " (range)"
    )
    print(
        "model callers  on calls/s  off calls/s  throughput on/off  goal      p99 on/off"
        "           server CPU/call off/on"
    )
    for key, s in report.items():
        model, callers = key.split("/")
        goal = GOALS.get(int(callers))
        met = (
            ""
            if goal is None
            else f">={goal:<4} {'ok' if s['throughput_ratio']['median'] >= goal else 'NO'}"
        )
        p99 = s["p99_ratio"]["median"]
        print(
            f"{model:5} {callers:>7}  {s[ON]['calls_per_s']['median']:10.1f}"
            f"  {s[OFF]['calls_per_s']['median']:11.1f}  {span(s['throughput_ratio'], 2):>17}"
            f"  {met:8} {span(s['p99_ratio'], 2):>17} {'ok' if p99 <= 1.2 else 'NO'}"
            f"  {span(s['cpu_ratio'], 2):>17}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()

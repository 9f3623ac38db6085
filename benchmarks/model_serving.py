"""Model serving: adaptive batching (the default) vs none, at 1, 8 and 32 callers, two models.

Per model, run and mode, starts examples/model_server.py once (``--model cnn``: the seeded
CNN, 1x3x224x224 -> 1,000 logits; ``--model mlp``: a wide MLP, 1x1024 -> 1,000; CPU unless a
GPU is present) with batching on (adaptive, ``max_batch_size`` 32) and off, alternating run
by run, and drives it at each caller count in turn (``--callers 32 8 1``: a lone caller after
a crowd, for the adaptive batcher) with millimcp's own client (``Client.over_http``, raw
tensors over ``dev.millimcp/tensor``): warms up, then keeps N callers busy for
``--duration`` seconds. Reports calls/s, p50/p99 and the client's CPU use (seconds of client
CPU per second of wall time: well below 1.0 means the client is not the bottleneck), medians
over runs, and paired ratios batching on / off.

    .venv/bin/python benchmarks/model_serving.py --runs 3 --duration 5 --callers 32 8 1
    .venv/bin/python benchmarks/model_serving.py --models mlp --callers 1 32 \\
        --extra=--batching=fixed --extra=--max-queue-delay-ms=2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from millimcp import Client, Limits
from millimcp.testing import serve_subprocess

ROOT = Path(__file__).resolve().parent.parent
SHAPES = {"cnn": (1, 3, 224, 224), "mlp": (1, 1024)}
MODES = {"batching": [], "no batching": ["--no-batching"]}


@contextmanager
def model_server(model: str, extra: list[str], device: str) -> Iterator[str]:
    command = [
        sys.executable, str(ROOT / "examples/model_server.py"),
        "--port", "{port}", "--device", device, "--model", model, *extra,
    ]  # fmt: skip
    with serve_subprocess(command, stdout=None, timeout=120, stop_timeout=20) as served:
        yield served.url()


async def load(
    url: str, model: str, callers: int, duration: float, warmup: float
) -> dict[str, Any]:
    inputs = [
        np.random.default_rng(i).random(SHAPES[model], dtype=np.float32) for i in range(callers)
    ]
    latencies: list[float] = []
    async with Client.over_http(
        url, limits=Limits(max_in_flight=max(callers, 1)), timeout=120.0, retry=None
    ) as client:
        measuring = False
        stop_at = 0.0

        async def caller(x: np.ndarray) -> None:
            while not measuring or time.perf_counter() < stop_at:
                started = time.perf_counter()
                result = await client.call_tool("classify", {"image": x})
                if measuring and time.perf_counter() < stop_at:
                    latencies.append(time.perf_counter() - started)
                if result.is_error or result.tensors is None:
                    raise RuntimeError(result.text)
                assert result.tensors["result"].shape == (1, 1000)

        tasks = [asyncio.create_task(caller(x)) for x in inputs]
        await asyncio.sleep(warmup)
        measuring, began, cpu = True, time.perf_counter(), time.process_time()
        stop_at = began + duration
        await asyncio.sleep(duration)
        cpu = time.process_time() - cpu
        await asyncio.gather(*tasks)
        info = await client.call_tool("model_info")
    latencies.sort()
    stats = (info.structured_content or {}).get("stats", {})
    return {
        "calls_per_s": len(latencies) / duration,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "client_cpu": cpu / duration,
        "calls": len(latencies),
        "mean_rows": stats.get("mean_rows"),
        "limit": stats.get("limit"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--warmup", type=float, default=4.0, help="seconds (the batcher learns)")
    parser.add_argument("--callers", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--models", nargs="+", choices=sorted(SHAPES), default=["cnn", "mlp"])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--extra", action="append", default=[], help="server flag, batching on")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    modes = {"batching": args.extra, "no batching": MODES["no batching"]}
    report: dict[str, Any] = {}
    for model in args.models:
        results: dict[int, dict[str, list[dict[str, Any]]]] = {
            callers: {mode: [] for mode in modes} for callers in args.callers
        }
        for run in range(args.runs):
            for mode, extra in modes.items():
                # one server per run and mode, driven at each level in turn: the
                # adaptive batcher keeps what it learned, so a lone caller after a crowd is
                # measured too (it must still never wait)
                with model_server(model, extra, args.device) as url:
                    for callers in args.callers:
                        outcome = asyncio.run(load(url, model, callers, args.duration, args.warmup))
                        results[callers][mode].append(outcome)
                        print(f"{model} {callers:2} callers run {run + 1} {mode:12} {outcome}")
        for callers in args.callers:
            report[f"{model}/{callers}"] = summarise(results[callers])
            print_summary(model, callers, report[f"{model}/{callers}"])
    print("\nmodel callers  on calls/s  off calls/s  ratio  p99 on/off  client CPU on/off")
    for key, s in report.items():
        model, callers = key.split("/")
        on, off = s["batching"], s["no batching"]
        print(
            f"{model:5} {callers:>7}  {on['calls_per_s']:10.1f}  {off['calls_per_s']:11.1f}"
            f"  {s['throughput_ratio']:5.2f}x  {s['p99_ratio']:9.2f}x"
            f"  {on['client_cpu']:.2f} / {off['client_cpu']:.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


def summarise(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {"runs": results}
    for mode, runs in results.items():
        summary[mode] = {
            key: statistics.median(r[key] for r in runs)
            for key in ("calls_per_s", "p50_ms", "p99_ms", "client_cpu")
        }
    pairs = list(zip(results["batching"], results["no batching"], strict=True))
    summary["throughput_ratio"] = statistics.median(
        on["calls_per_s"] / off["calls_per_s"] for on, off in pairs
    )
    summary["p99_ratio"] = statistics.median(on["p99_ms"] / off["p99_ms"] for on, off in pairs)
    return summary


def print_summary(model: str, callers: int, summary: dict[str, Any]) -> None:
    print(f"\n{model}, {callers} callers (medians of {len(summary['runs']['batching'])} runs)")
    for mode in MODES:
        s = summary[mode]
        print(
            f"  {mode:12} {s['calls_per_s']:7.1f} calls/s   p50 {s['p50_ms']:7.1f} ms"
            f"   p99 {s['p99_ms']:7.1f} ms   client CPU {s['client_cpu']:.2f}"
        )
    print(
        f"  batching on / off: {summary['throughput_ratio']:.2f}x throughput,"
        f" {summary['p99_ratio']:.2f}x p99 (paired medians)\n",
        flush=True,
    )


if __name__ == "__main__":
    main()

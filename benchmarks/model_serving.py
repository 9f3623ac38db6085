"""Model serving at 32 concurrent callers: dynamic batching on vs off, same model, same client.

Starts examples/model_server.py (the seeded CNN, 1x3x224x224 -> 1,000 logits, CPU unless a GPU
is present) once with batching (max_batch_size 32, max_queue_delay_ms 2) and once without,
alternating run by run; each run warms up, then keeps ``--concurrency`` callers busy for
``--duration`` seconds over the raw tensor path (``dev.millimcp/tensor``). Reports calls/s
and p50/p99 latency per mode (medians over runs) and the paired throughput ratio.

    .venv/bin/python benchmarks/model_serving.py --runs 2 --duration 8
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

import httpx
import numpy as np

from millimcp.codec.attachment import frame, split
from millimcp.protocol.types import META_CLIENT_CAPABILITIES
from millimcp.tensor import ATTACHMENT_MEDIA_TYPE, EXTENSION, decode_result, encode_arguments
from millimcp.testing import modern_request, serve_subprocess

ROOT = Path(__file__).resolve().parent.parent
MODES = {"batching": [], "no batching": ["--no-batching"]}


@contextmanager
def model_server(extra: list[str], device: str) -> Iterator[str]:
    command = [
        sys.executable, str(ROOT / "examples/model_server.py"),
        "--port", "{port}", "--device", device, *extra,
    ]  # fmt: skip
    with serve_subprocess(command, stdout=None, timeout=120, stop_timeout=20) as served:
        yield served.url()


async def classify(http: httpx.AsyncClient, url: str, image: np.ndarray) -> np.ndarray:
    args, attachment = encode_arguments({"image": image}, raw=True)
    meta = {META_CLIENT_CAPABILITIES: {"extensions": {EXTENSION: {}}}}
    body, headers = modern_request(
        "tools/call", {"name": "classify", "arguments": args, "_meta": meta}
    )
    assert attachment is not None
    headers["accept"] = f"application/json, {ATTACHMENT_MEDIA_TYPE}"
    headers["content-type"] = ATTACHMENT_MEDIA_TYPE
    response = await http.post(url, content=b"".join(frame(body, attachment)), headers=headers)
    text, data = split(bytearray(response.content), 1 << 20)
    result = json.loads(text)["result"]
    if result.get("isError"):
        raise RuntimeError(result["content"][0]["text"])
    logits: np.ndarray = decode_result(result, data)["result"]
    return logits


async def load(url: str, concurrency: int, duration: float, warmup: float) -> dict[str, Any]:
    images = [
        np.random.default_rng(i).random((1, 3, 224, 224), dtype=np.float32)
        for i in range(concurrency)
    ]
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        measuring = False
        stop_at = 0.0

        async def caller(image: np.ndarray) -> None:
            while not measuring or time.perf_counter() < stop_at:
                started = time.perf_counter()
                logits = await classify(http, url, image)
                if measuring and time.perf_counter() < stop_at:
                    latencies.append(time.perf_counter() - started)
                assert logits.shape == (1, 1000)

        tasks = [asyncio.create_task(caller(image)) for image in images]
        await asyncio.sleep(warmup)
        measuring, began = True, time.perf_counter()
        stop_at = began + duration
        await asyncio.gather(*tasks)
    latencies.sort()
    return {
        "calls_per_s": len(latencies) / duration,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "calls": len(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    for run in range(args.runs):
        for mode, extra in MODES.items():
            with model_server(extra, args.device) as url:
                outcome = asyncio.run(load(url, args.concurrency, args.duration, args.warmup))
            results[mode].append(outcome)
            print(f"run {run + 1} {mode:12} {outcome}", flush=True)
    summary: dict[str, Any] = {}
    for mode, runs in results.items():
        summary[mode] = {
            key: statistics.median(r[key] for r in runs)
            for key in ("calls_per_s", "p50_ms", "p99_ms")
        }
    ratios = [
        on["calls_per_s"] / off["calls_per_s"]
        for on, off in zip(results["batching"], results["no batching"], strict=True)
    ]
    summary["throughput_ratio"] = statistics.median(ratios)
    print(
        f"\n{args.concurrency} concurrent callers, {args.duration:.0f} s per run, {args.runs} runs"
    )
    for mode in MODES:
        s = summary[mode]
        print(
            f"  {mode:12} {s['calls_per_s']:7.1f} calls/s   p50 {s['p50_ms']:7.1f} ms"
            f"   p99 {s['p99_ms']:7.1f} ms"
        )
    print(f"  batching on / off: {summary['throughput_ratio']:.2f}x throughput (paired median)")
    if args.json:
        args.json.write_text(json.dumps({"runs": results, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()

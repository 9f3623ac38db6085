"""A 50 KB tool result, compressed or not: bytes on the wire and server CPU per call, per codec.

One uvicorn process (pinned to ``--server-cpu``) serves ``servers/millimcp_big.py``; this
process (pinned to ``--client-cpu``) drives 8 closed-loop connections (``loadgen.py``) with one
``Accept-Encoding`` per variant: none, gzip through isal, gzip through zlib (isal hidden from
the server), zstd. Variants alternate run by run; medians over runs are reported, with CPU
per call paired against "none" in the same round.

    .venv/bin/python benchmarks/compression.py --runs 3
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from dataclasses import dataclass, field

from harness import HOST, cpu_counters, new_runner, percentile_ms
from loadgen import http1_request, run_load
from server_overhead import Target, served

from millimcp.lab.loadgen import parse_response
from millimcp.testing import modern_request

TARGET = Target("big", "millimcp_big", "millimcp", "millimcp, 50 KB report tool")


@dataclass(frozen=True)
class Variant:
    name: str
    accept: str | None
    env: dict[str, str] = field(default_factory=dict)


VARIANTS = (
    Variant("none", None),
    Variant("gzip-isal", "gzip"),
    Variant("gzip-zlib", "gzip", {"BENCH_NO_ISAL": "1"}),
    Variant("zstd", "zstd, gzip"),
)


def build_request(port: int, accept: str | None) -> bytes:
    body, headers = modern_request("tools/call", {"name": "report", "arguments": {}})
    if accept:
        headers["accept-encoding"] = accept
    return http1_request(HOST, port, "/mcp", body, headers)


def wire_size(port: int, request: bytes) -> tuple[int, int, str]:
    """(whole response bytes, body bytes, Content-Encoding) of one call."""
    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(request)
        buf = b""
        while (parsed := parse_response(buf)) is None:
            buf += sock.recv(1 << 20)
    status, body, consumed = parsed
    assert status == 200, body[:300]
    head = buf[: buf.find(b"\r\n\r\n")].lower()
    coding = "identity"
    for line in head.split(b"\r\n"):
        if line.startswith(b"content-encoding:"):
            coding = line.split(b":", 1)[1].strip().decode()
    return consumed, len(body), coding


def one_run(variant: Variant, args: argparse.Namespace, runner: object) -> dict[str, float]:
    saved = dict(os.environ)
    os.environ.update(variant.env)
    try:
        with served(TARGET, args.server_cpu) as server:
            request = build_request(server.port, variant.accept)
            wire, body, coding = wire_size(server.port, request)
            expected = variant.accept.split(",")[0].strip() if variant.accept else "identity"
            assert coding == expected, (coding, expected)
            load = runner.run(  # type: ignore[attr-defined]
                run_load(
                    host=HOST,
                    port=server.port,
                    request=request,
                    marker=b"",  # compressed bodies: status 200 is the check
                    connections=args.connections,
                    warmup_s=args.warmup,
                    duration_s=args.duration,
                    sample=lambda: cpu_counters(server.pid, args.server_cpu),
                )
            )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if load.errors or load.warmup_errors:
        raise RuntimeError(f"{variant.name}: {load.errors} errors: {load.error_samples[:2]}")
    lat = sorted(load.latencies_ns)
    return {
        "wire_bytes": wire,
        "body_bytes": body,
        "cpu_us": load.sampled["server_cpu"] / load.calls * 1e6,
        "calls_per_s": load.calls / load.wall_s,
        "p50_ms": percentile_ms(lat, 0.5),
        "p99_ms": percentile_ms(lat, 0.99),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    args = parser.parse_args(argv)
    os.sched_setaffinity(0, {args.client_cpu})
    results: dict[str, list[dict[str, float]]] = {v.name: [] for v in VARIANTS}
    with new_runner() as runner:
        for run in range(args.runs):
            order = VARIANTS[run % len(VARIANTS) :] + VARIANTS[: run % len(VARIANTS)]
            for variant in order:
                result = one_run(variant, args, runner)
                results[variant.name].append(result)
                print(
                    f"run {run + 1} {variant.name:<10} {result['wire_bytes']:7,} B on the wire"
                    f"  {result['cpu_us']:7.1f} µs CPU/call  {result['calls_per_s']:7,.0f} calls/s"
                )
                time.sleep(0.2)
    base_wire = statistics.median(r["wire_bytes"] for r in results["none"])
    print(
        f"\n{'codec':<10} {'wire B':>8} {'x none':>7} {'10 Mbit/s':>9} {'CPU µs':>8}"
        f" {'paired':>7} {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7}"
    )
    for variant in VARIANTS:
        runs = results[variant.name]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        paired = statistics.median(
            r["cpu_us"] / n["cpu_us"] for r, n in zip(runs, results["none"], strict=True)
        )
        print(
            f"{variant.name:<10} {med['wire_bytes']:8,.0f} {med['wire_bytes'] / base_wire:7.3f}"
            f" {med['wire_bytes'] * 8 / 10e6 * 1e3:7.1f}ms {med['cpu_us']:8.1f} {paired:7.2f}"
            f" {med['calls_per_s']:8,.0f} {med['p50_ms']:7.2f} {med['p99_ms']:7.2f}"
        )
    print(
        "wire B: whole HTTP response; 10 Mbit/s: its transfer time on such a link; CPU µs:"
        " server CPU per call (median); paired: median per-round ratio to 'none'"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

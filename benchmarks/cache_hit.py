"""Cache hit vs miss, end to end on loopback: a tool whose downstream takes 50 ms.

One uvicorn server (``servers/millimcp_cached.py``, uvloop + httptools) and a private
``redis-server``; a blocking keep-alive client sends one call at a time and times each from
the first byte written to the last byte read:

- ``miss``: a new ``user_id`` every call (the 50 ms downstream runs, the result is stored);
- ``L1 hit``: the same call again (in-process tier);
- ``L2 hit``: ``lookup_l2``, whose L1 entries live 1 us, so every call is served by Redis;
- ``no cache``: an uncached trivial ``echo`` tool, the floor of any call.

    .venv/bin/python benchmarks/cache_hit.py [--calls 2000] [--misses 40]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import sys
import time
from pathlib import Path

from loadgen import http1_request

from millimcp.testing import modern_request, serve_subprocess

HERE = Path(__file__).resolve().parent


def request(port: int, tool: str, arguments: dict[str, object]) -> bytes:
    body, headers = modern_request("tools/call", {"name": tool, "arguments": arguments})
    return http1_request("127.0.0.1", port, "/mcp", body, headers)


class Client:
    """One keep-alive connection, one call at a time; responses framed by Content-Length."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def call(self, data: bytes) -> tuple[float, bytes]:
        started = time.perf_counter()
        self.sock.sendall(data)
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            buffer += self.sock.recv(65536)
        head, _, body = buffer.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += self.sock.recv(65536)
        return time.perf_counter() - started, body


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {"p50": statistics.median(ordered) * 1000, "p95": at(0.95), "p99": at(0.99)}


def run(port: int, calls: int, misses: int) -> dict[str, dict[str, float]]:
    client = Client(port)
    results: dict[str, list[float]] = {"no cache": [], "miss": [], "L1 hit": [], "L2 hit": []}
    echo = request(port, "echo", {"text": "hello"})
    l1 = request(port, "lookup", {"user_id": 0})
    l2 = request(port, "lookup_l2", {"user_id": 0})
    for data in (echo, l1, l2):  # warm up, and fill the entries
        for _ in range(50):
            client.call(data)
    for n in range(misses):
        elapsed, body = client.call(request(port, "lookup", {"user_id": 1000 + n}))
        assert b"orders of" in body, body
        results["miss"].append(elapsed)
    # Interleaved, so that drifts in machine load hit every case alike.
    for _ in range(calls):
        for name, data in (("no cache", echo), ("L1 hit", l1), ("L2 hit", l2)):
            elapsed, body = client.call(data)
            assert b'"isError"' not in body, body
            results[name].append(elapsed)
    return {name: percentiles(samples) for name, samples in results.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--misses", type=int, default=40)
    args = parser.parse_args()
    redis_server = shutil.which("redis-server") or "/usr/bin/redis-server"
    redis_command = [redis_server, "--port", "{port}", "--save", "", "--appendonly", "no"]
    with serve_subprocess(redis_command) as redis:
        env = {
            "PYTHONPATH": f"{HERE.parent / 'src'}{os.pathsep}{HERE / 'servers'}",
            "BENCH_REDIS_URL": f"redis://127.0.0.1:{redis.port}/0",
        }
        server_command = [
            sys.executable, "-m", "uvicorn", "millimcp_cached:app", "--port", "{port}",
            "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning",
        ]  # fmt: skip
        with serve_subprocess(server_command, env=env, stdout=None) as server:
            table = run(server.port, args.calls, args.misses)
    print(f"{'':10s} {'p50 ms':>8s} {'p95 ms':>8s} {'p99 ms':>8s}")
    for name, row in table.items():
        print(f"{name:10s} {row['p50']:8.3f} {row['p95']:8.3f} {row['p99']:8.3f}")
    miss = table["miss"]["p50"]
    print(
        f"\nmiss/hit at p50: L1 {miss / table['L1 hit']['p50']:.0f}x, "
        f"L2 {miss / table['L2 hit']['p50']:.0f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

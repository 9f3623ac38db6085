"""Slow clients against one server: 300 slow-header connections and 20 trickling 60 MB bodies.

The issue's attack: 300 connections send their request headers one byte per second, 20
declare 60 MB tensor-framed bodies (``application/vnd.millimcp.tensor``) and trickle them
at 1 KiB/s.
Meanwhile one client makes a normal call every 100 ms. The server is ``millimcp serve``
with the default limits (headers 10 s, body 30 s or 64 KiB/s). Reported: the server's RSS
growth (its peak over the attack, from /proc), the median and p95 latency of the normal calls
during the attack, and how many attacking connections the server closed, and when.

    .venv/bin/python benchmarks/slow_attack.py [--slow 300] [--trickle 20] [--seconds 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
ATTACHMENT = "application/vnd.millimcp.tensor"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "attack", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def slow_headers(port: int, closed: list[float], started: float) -> None:
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    ).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for i in range(len(request)):
            writer.write(request[i : i + 1])
            await writer.drain()
            try:
                await asyncio.wait_for(reader.read(1), 1.0)
            except TimeoutError:
                continue
            break  # answered (408) or closed
    except OSError:
        pass
    closed.append(time.monotonic() - started)
    writer.close()


async def trickle(port: int, media: str, closed: list[float], started: float) -> None:
    declared = 60 * 1024 * 1024
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: {media}\r\nContent-Length: {declared}\r\n\r\n"
    ).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head)
        for _ in range(declared // 1024):
            writer.write(b"\0" * 1024)
            await writer.drain()
            try:
                await asyncio.wait_for(reader.read(1), 1.0)
            except TimeoutError:
                continue
            break  # answered (408) or closed
    except OSError:
        pass
    closed.append(time.monotonic() - started)
    writer.close()


async def normal_calls(port: int, seconds: float, latencies: list[float]) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": META},
        }
    ).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\n"
        f"Mcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        begun = time.perf_counter()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # a new client
        writer.write(head + body)
        status = await reader.readline()
        await reader.read(65536)
        latencies.append(time.perf_counter() - begun)
        assert status.startswith(b"HTTP/1.1 200"), status
        writer.close()
        await asyncio.sleep(0.1)


async def attack(port: int, pid: int, args: argparse.Namespace) -> dict[str, object]:
    before = rss(pid)
    peak = before
    started = time.monotonic()
    slow_closed: list[float] = []
    trickle_closed: list[float] = []
    latencies: list[float] = []
    tasks = [
        asyncio.create_task(slow_headers(port, slow_closed, started)) for _ in range(args.slow)
    ]
    tasks += [
        asyncio.create_task(trickle(port, ATTACHMENT, trickle_closed, started))
        for _ in range(args.trickle)
    ]
    calls = asyncio.create_task(normal_calls(port, args.seconds, latencies))
    while not calls.done():
        peak = max(peak, rss(pid))
        await asyncio.sleep(0.2)
    await calls
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    ms = sorted(x * 1000 for x in latencies)
    return {
        "rss_before_mib": before / 2**20,
        "rss_peak_growth_mib": (peak - before) / 2**20,
        "calls": len(ms),
        "call_median_ms": statistics.median(ms),
        "call_p95_ms": ms[int(len(ms) * 0.95)],
        "slow_header_closed": f"{len(slow_closed)}/{args.slow}",
        "slow_header_closed_after_s": max(slow_closed, default=float("nan")),
        "trickle_closed": f"{len(trickle_closed)}/{args.trickle}",
        "trickle_closed_after_s": max(trickle_closed, default=float("nan")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow", type=int, default=300)
    parser.add_argument("--trickle", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args()
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(HERE)])}
    command = [sys.executable, "-m", "millimcp", "serve", "servers.soak_server:server"]
    server = subprocess.Popen(
        [*command, "--port", str(port)], cwd=HERE, env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert server.stderr is not None
        print(server.stderr.readline().strip())
        result = asyncio.run(attack(port, server.pid, args))
    finally:
        server.terminate()
        server.wait(timeout=60)
    for key, value in result.items():
        print(f"{key:>28}: {value:.1f}" if isinstance(value, float) else f"{key:>28}: {value}")


if __name__ == "__main__":
    main()

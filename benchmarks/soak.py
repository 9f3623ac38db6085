"""Soak: does the server leak over time? RSS, open fds and asyncio tasks, sampled throughout.

One millimcp server (``millimcp serve servers.soak_server:server``: uvicorn, httptools) gets,
in rounds so that every kind of traffic is spread over the whole run:

- modern ``tools/call`` requests (kept-alive connections, ``--concurrency`` in flight);
- handshake-era sessions opened (``initialize``), used (one call) and deleted (DELETE);
- ``subscriptions/listen`` streams opened, read to their first event and dropped;
- calls cancelled mid-flight (the client gives up on a 50 ms call after 5 ms);
- clients that vanish mid-response (a 1 MB result, the socket closed unread).

After each round the server's own ``stats`` tool reports RSS, fds and tasks. The slope of each
against the operations done, fitted by least squares over the samples after the warm-up
(the first ``--warmup`` share of rounds), is the figure: flat within noise means no leak.

    .venv/bin/python benchmarks/soak.py                    # scaled down: about a minute
    .venv/bin/python benchmarks/soak.py --full             # the issue's counts: 200k calls...
    .venv/bin/python benchmarks/soak.py --json results/soak.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
LEGACY = "2025-11-25"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "soak", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
FULL = {"calls": 200_000, "sessions": 20_000, "listens": 5_000, "cancels": 5_000, "vanish": 5_000}
SCALED = {"calls": 20_000, "sessions": 2_000, "listens": 500, "cancels": 500, "vanish": 500}


@dataclass
class Sample:
    ops: int
    rss: int
    fds: int
    tasks: int


@dataclass
class Report:
    counts: dict[str, int]
    samples: list[Sample] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def slope(self, name: str, warmup: float) -> float:
        """Least-squares slope of ``name`` per 1,000 operations, after the warm-up."""
        points = self.samples[int(len(self.samples) * warmup) :]
        xs = [p.ops / 1000 for p in points]
        ys = [float(getattr(p, name)) for p in points]
        if len(points) < 2:
            return 0.0
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        var = sum((x - mx) ** 2 for x in xs)
        return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def modern(
    method: str, params: dict[str, Any], request_id: int = 1
) -> tuple[bytes, dict[str, str]]:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": MODERN_META},
    }
    headers = {**JSON, "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if "name" in params:
        headers["mcp-name"] = params["name"]
    return json.dumps(body).encode(), headers


def tool(name: str, **arguments: Any) -> tuple[bytes, dict[str, str]]:
    return modern("tools/call", {"name": name, "arguments": arguments})


class Soak:
    def __init__(self, url: str, port: int, concurrency: int) -> None:
        self.url = url
        self.port = port
        self.concurrency = concurrency
        self.errors: dict[str, int] = {}

    def fail(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    async def calls(self, session: aiohttp.ClientSession, count: int) -> None:
        body, headers = tool("echo", text="soak")

        async def worker(n: int) -> None:
            for _ in range(n):
                async with session.post(self.url, data=body, headers=headers) as response:
                    await response.read()
                    if response.status != 200:
                        self.fail("call")

        share = [
            count // self.concurrency + (i < count % self.concurrency)
            for i in range(self.concurrency)
        ]
        await asyncio.gather(*(worker(n) for n in share))

    async def sessions(self, session: aiohttp.ClientSession, count: int) -> None:
        hello = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "soak", "version": "0"},
            },
        }

        async def one() -> None:
            async with session.post(self.url, json=hello, headers=JSON) as response:
                await response.read()
                sid = response.headers.get("mcp-session-id")
            if sid is None:
                self.fail("initialize")
                return
            headers = {**JSON, "mcp-session-id": sid, "mcp-protocol-version": LEGACY}
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            async with session.post(self.url, json=note, headers=headers) as response:
                await response.read()
            call = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "s"}},
            }
            async with session.post(self.url, json=call, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    self.fail("session call")
            async with session.delete(self.url, headers=headers) as response:
                await response.read()

        await self._spread(one, count)

    async def listens(self, count: int) -> None:
        body, headers = modern(
            "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
        )

        async def one() -> None:
            async with (
                aiohttp.ClientSession() as own,  # its own connection, dropped after
                own.post(self.url, data=body, headers=headers) as response,
            ):
                await response.content.readuntil(b"\n\n")

        await self._spread(one, count)

    async def cancels(self, count: int) -> None:
        body, headers = tool("sleep", ms=50)
        timeout = aiohttp.ClientTimeout(total=0.005)

        async def one() -> None:
            async with aiohttp.ClientSession(timeout=timeout) as own:
                try:
                    async with own.post(self.url, data=body, headers=headers) as response:
                        await response.read()
                except TimeoutError:
                    pass

        await self._spread(one, count)

    async def vanish(self, count: int) -> None:
        body, headers = tool("big", size=1_000_000)
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        raw = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n{head}"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode() + body

        async def one() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            writer.write(raw)
            await writer.drain()
            await reader.read(100)  # the response has begun
            writer.transport.abort()  # and the client is gone

        await self._spread(one, count)

    async def _spread(self, one: Any, count: int) -> None:
        limit = asyncio.Semaphore(min(self.concurrency, 32))

        async def guarded() -> None:
            async with limit:
                try:
                    await one()
                except (aiohttp.ClientError, OSError):
                    self.fail(one.__qualname__.split(".")[1])

        await asyncio.gather(*(guarded() for _ in range(count)))

    async def stats(self, session: aiohttp.ClientSession) -> tuple[int, int, int]:
        body, headers = tool("stats")
        async with session.post(self.url, data=body, headers=headers) as response:
            reply = json.loads(await response.read())
        rss, fds, tasks = reply["result"]["structuredContent"]["result"]
        return int(rss), int(fds), int(tasks)


async def soak(
    url: str, port: int, counts: dict[str, int], rounds: int, concurrency: int
) -> Report:
    report = Report(counts)
    runner = Soak(url, port, concurrency)
    started = time.monotonic()
    ops = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        rss, fds, tasks = await runner.stats(session)
        report.samples.append(Sample(0, rss, fds, tasks))
        for r in range(rounds):
            part = {k: v // rounds + (r < v % rounds) for k, v in counts.items()}
            await runner.calls(session, part["calls"])
            await runner.sessions(session, part["sessions"])
            await runner.listens(part["listens"])
            await runner.cancels(part["cancels"])
            await runner.vanish(part["vanish"])
            ops += sum(part.values())
            await asyncio.sleep(0.2)  # let cancelled and abandoned work settle
            rss, fds, tasks = await runner.stats(session)
            report.samples.append(Sample(ops, rss, fds, tasks))
            print(
                f"  round {r + 1}/{rounds}: ops={ops} rss={rss / 2**20:.1f} MiB "
                f"fds={fds} tasks={tasks}",
                flush=True,
            )
    report.errors = runner.errors
    report.seconds = time.monotonic() - started
    return report


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the issue's counts (long)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the counts")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=float, default=0.25)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    counts = {k: max(1, int(v * args.scale)) for k, v in (FULL if args.full else SCALED).items()}
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(HERE)])}
    command = [
        sys.executable,
        "-m",
        "millimcp",
        "serve",
        "servers.soak_server:server",
        "--port",
        str(port),
    ]
    server = subprocess.Popen(command, cwd=HERE, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        print(server.stderr.readline().strip())  # the start line: it listens
        report = asyncio.run(
            soak(f"http://127.0.0.1:{port}/mcp", port, counts, args.rounds, args.concurrency)
        )
    finally:
        server.terminate()
        server.wait(timeout=60)
    first, last = report.samples[0], report.samples[-1]
    print(f"counts: {counts}; {report.seconds:.0f} s; errors: {report.errors or 'none'}")
    for name, unit, scale in (("rss", "KiB", 1024), ("fds", "", 1), ("tasks", "", 1)):
        slope = report.slope(name, args.warmup) / scale
        before, after = getattr(first, name) / scale, getattr(last, name) / scale
        print(
            f"{name:>5}: before {before:,.0f}{unit} after {after:,.0f}{unit}"
            f"  slope {slope:+.2f}{unit} per 1k ops"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        data = {
            **asdict(report),
            "slopes": {n: report.slope(n, args.warmup) for n in ("rss", "fds", "tasks")},
        }
        args.json.write_text(json.dumps(data, indent=2))


if __name__ == "__main__":
    main()

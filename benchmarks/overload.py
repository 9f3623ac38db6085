"""Overload: open-loop arrivals at 2x and 10x a server's capacity; goodput and tail latency.

Each server's ``echo`` tool waits on a downstream of 10 connections x 100 ms, so capacity is
100 calls/s whatever the framework. Arrivals come at a fixed rate for ``--duration`` seconds
(open loop: a slow server does not slow the arrivals, as with many independent agents), each
call on its own connection from a pool, with a client deadline (``--deadline``, 5 s like a
lookup's read timeout, SEEDS S4.1): a call not answered by then is abandoned (connection
closed). Reported per server and load: goodput (calls answered 200 within the deadline, per
second from the first arrival until every call was settled), p50/p99 of those, refusals (503)
and how fast they came, timeouts.

Targets: millimcp with its limit sized by Little's law (10 in flight, 20 queued), millimcp
with no limit, and the official SDK (which queues without bound).

    .venv/bin/python benchmarks/overload.py
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import dataclass, field

from harness import HOST, cpu_counters, new_runner, percentile_ms
from loadgen import ProtocolError, build_request
from server_overhead import Target, served

from millimcp.lab.loadgen import parse_response

CAPACITY = 100.0  # calls/s: 10 downstream connections x 100 ms
TARGETS = {
    "millimcp": (Target("millimcp", "millimcp_downstream", "millimcp", "limit 10 + queue 20"), {}),
    "millimcp-unbounded": (
        Target("millimcp-unbounded", "millimcp_downstream", "millimcp", "no limit"),
        {"BENCH_UNBOUNDED": "1"},
    ),
    "official": (
        Target("official", "official_downstream", "mcp.server.mcpserver", "official SDK"),
        {},
    ),
}


class _Conn(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        try:
            parsed = parse_response(self.buf)
        except (ProtocolError, ValueError) as exc:
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_exception(exc)
            return
        if parsed is not None and self.waiter is not None and not self.waiter.done():
            status, body, consumed = parsed
            self.buf = self.buf[consumed:]
            self.waiter.set_result((status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("closed"))


@dataclass
class Outcome:
    ok_ms: list[float] = field(default_factory=list)
    refused_ms: list[float] = field(default_factory=list)
    timeouts: int = 0
    errors: int = 0
    max_open: int = 0
    settled_s: float = 0.0
    """From the first arrival until the last call was answered, refused or abandoned."""


async def open_loop(port: int, rate: float, duration: float, deadline: float) -> Outcome:
    loop = asyncio.get_running_loop()
    request = build_request(HOST, port, "/mcp")
    idle: list[_Conn] = []
    out = Outcome()
    open_count = 0

    async def call() -> None:
        nonlocal open_count
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(deadline):
                if idle:
                    conn = idle.pop()
                else:
                    _, conn = await loop.create_connection(_Conn, HOST, port)
                    open_count += 1
                    out.max_open = max(out.max_open, open_count)
                conn.buf = b""
                conn.waiter = loop.create_future()
                assert conn.transport is not None
                conn.transport.write(request)
                status, body = await conn.waiter
        except TimeoutError:
            out.timeouts += 1
            if "conn" in locals() and conn.transport is not None:
                conn.transport.abort()
                open_count -= 1
            return
        except (ConnectionError, OSError, ProtocolError, ValueError):
            out.errors += 1
            open_count -= 1
            return
        elapsed = (time.perf_counter() - t0) * 1e3
        if status == 200 and b'"isError":true' not in body and b'"error":{' not in body:
            out.ok_ms.append(elapsed)
        elif status == 503:
            out.refused_ms.append(elapsed)
        else:
            out.errors += 1
        idle.append(conn)

    tasks: list[asyncio.Task[None]] = []
    start = time.perf_counter()
    sent = 0
    total = int(rate * duration)
    while sent < total:
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        while sent < due:
            tasks.append(asyncio.create_task(call()))
            sent += 1
        await asyncio.sleep(max(0.0, start + sent / rate - time.perf_counter()))
    await asyncio.gather(*tasks)
    out.settled_s = time.perf_counter() - start
    for conn in idle:
        if conn.transport is not None:
            conn.transport.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--loads", default="2,10", help="multiples of capacity (default 2,10)")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds of arrivals")
    parser.add_argument("--deadline", type=float, default=5.0, help="client deadline, s")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    args = parser.parse_args(argv)
    os.sched_setaffinity(0, {args.client_cpu})
    loads = [float(x) for x in args.loads.split(",")]
    rows: dict[tuple[str, float], list[dict[str, float]]] = {}
    with new_runner() as runner:
        for run in range(args.runs):
            for name in args.targets.split(","):
                target, env = TARGETS[name]
                for load in loads:
                    saved = dict(os.environ)
                    os.environ.update(env)
                    try:
                        with served(target, args.server_cpu) as server:
                            before = cpu_counters(server.pid, args.server_cpu)
                            out = runner.run(
                                open_loop(
                                    server.port, load * CAPACITY, args.duration, args.deadline
                                )
                            )
                            after = cpu_counters(server.pid, args.server_cpu)
                    finally:
                        os.environ.clear()
                        os.environ.update(saved)
                    ok = sorted(out.ok_ms)
                    refused = sorted(out.refused_ms)
                    row = {
                        "goodput": len(ok) / out.settled_s,
                        "ok": len(ok),
                        "p50": statistics.median(ok) if ok else float("nan"),
                        "p99": percentile_ms([int(x * 1e6) for x in ok], 0.99),
                        "refused": len(refused),
                        "refused_p99": percentile_ms([int(x * 1e6) for x in refused], 0.99),
                        "timeouts": out.timeouts,
                        "errors": out.errors,
                        "max_open": out.max_open,
                        "cpu_s": after["server_cpu"] - before["server_cpu"],
                    }
                    rows.setdefault((name, load), []).append(row)
                    print(
                        f"run {run + 1} {name:<18} {load:>4g}x: goodput {row['goodput']:6.1f}/s"
                        f"  p50 {row['p50']:7.1f} ms  p99 {row['p99']:7.1f} ms"
                        f"  refused {row['refused']:5d} (p99 {row['refused_p99']:5.1f} ms)"
                        f"  timeouts {row['timeouts']:5d}  errors {row['errors']}"
                        f"  connections {row['max_open']}  server CPU {row['cpu_s']:.2f} s"
                    )
    print(
        f"\ncapacity {CAPACITY:g} calls/s; {args.duration:g} s of arrivals; deadline"
        f" {args.deadline:g} s; medians over {args.runs} run(s)"
    )
    print(
        f"{'target':<18} {'load':>5} {'offered':>8} {'goodput/s':>9} {'p50 ms':>8} {'p99 ms':>8}"
        f" {'refused':>8} {'refuse p99':>10} {'timeouts':>8}"
    )
    for (name, load), runs in rows.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(
            f"{name:<18} {load:>4g}x {int(load * CAPACITY * args.duration):>8}"
            f" {med['goodput']:9.1f} {med['p50']:8.1f} {med['p99']:8.1f} {med['refused']:8.0f}"
            f" {med['refused_p99']:9.1f}ms {med['timeouts']:8.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

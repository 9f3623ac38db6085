"""Server CPU per call of the order service (examples/orders), the agents' scenario, loopback.

    python benchmarks/orders_cpu.py [--examples examples] [--rounds 3] [--seconds 5]
        [--agents 20] [--preset tuned] [--py-spy OUT.txt]

Seeds a 20,000-order SQLite database in /tmp (once), starts the recommendation service and
one order service, primes its cache, then runs ``--rounds`` closed-loop rounds of the agent
scenario and prints the service's CPU time per call (user + system, /proc) for each and the
median. ``--examples`` may point at another checkout's examples/ (the same script measures a
before and an after); ``--py-spy`` records a raw py-spy profile of one more round.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ORDERS = 20_000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(port: int) -> None:
    for _ in range(1200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listening on {port}")


def main(args: argparse.Namespace) -> None:
    examples = str(Path(args.examples).resolve())
    sys.path.insert(0, examples)
    from orders.db import ensure_database

    folder = Path("/tmp/millimcp-orders-cpu")
    folder.mkdir(exist_ok=True)
    db = f"sqlite:///{folder / 'orders.db'}"
    ensure_database(db, orders=ORDERS, covering=True)
    env = {**os.environ, "PYTHONPATH": examples}
    rec_port, port = free_port(), free_port()
    recommender = subprocess.Popen(
        [sys.executable, "-m", "orders.recommender", "--port", str(rec_port)],
        env=env,
        cwd=examples,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "orders.server", "--preset", args.preset),
            *("--port", str(port), "--db", db, "--orders", str(ORDERS)),
            *("--recommender", f"http://127.0.0.1:{rec_port}"),
            *("--log-file", str(folder / "server.log")),
        ],
        env=env,
        cwd=examples,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(port)
        asyncio.run(rounds(args, db, port, server.pid))
    finally:
        for process in (server, recommender):
            process.terminate()
            process.wait()


async def rounds(args: argparse.Namespace, db: str, port: int, pid: int) -> None:
    from orders.auth import mint
    from orders.config import PRESETS
    from orders.workload import hot_customers, load_workload, measure, prime

    config = PRESETS[args.preset]
    url = f"http://127.0.0.1:{port}/mcp"
    token = mint(config.auth_secret, "agent")
    scenario = load_workload(ORDERS, 200)
    await prime(url, token, hot_customers(db, ORDERS - 199, ORDERS))

    async def one(label: str, warmup_s: float) -> tuple[float | None, str]:
        measured = await measure(
            url,
            config,
            scenario,
            token,
            label=label,
            concurrency=args.agents,
            warmup_s=warmup_s,
            duration_s=args.seconds,
            server_pid=pid,
        )
        per_call = measured.per_request()
        cpu = per_call["server_cpu_ms"]
        text = (
            f"{measured.iterations} iterations, server CPU per call {cpu or 0:.3f} ms "
            f"({measured.server_cpu_pct or 0:.0f}% of a core), mean per call "
            f"{per_call['mean_ms'] or 0:.1f} ms"
        )
        return cpu, text

    figures = []
    for number in range(args.rounds):
        cpu, text = await one(f"round-{number}", 1.0)
        if cpu is not None:
            figures.append(cpu)
        print(f"round {number}: {text}", flush=True)
    if figures:
        print(f"median server CPU per call: {statistics.median(figures):.3f} ms")
    if args.py_spy:
        spy = await asyncio.create_subprocess_exec(
            *("py-spy", "record", "-p", str(pid), "-d", str(int(args.seconds))),
            *("-r", "200", "-f", "raw", "-o", args.py_spy, "--threads", "--nonblocking"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await one("profiled", 0.5)
        await spy.wait()
        print(f"py-spy profile (raw, collapsed stacks): {args.py_spy}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--examples", default=str(Path(__file__).resolve().parents[1] / "examples"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--preset", default="tuned", choices=("naive", "tuned"))
    parser.add_argument("--py-spy", help="also record a py-spy profile (raw) to this file")
    main(parser.parse_args())

"""The case study's agent with ``analyze_orders`` as a task, against the same agent waiting.

The order service of ``examples/orders`` (``--preset``, 20,000 seeded orders in SQLite, the
recommendation service at 250 ms as in its tests) and the agents of
``examples/orders/agent_tasks.toml``: ``get_order``, then ``analyze_orders``, then
``get_recommendations`` and three ``get_profile`` at once. Two variants at the same
concurrency, rounds alternating:

- ``sync``: the agent waits for the analysis before its other lookups;
- ``task``: the analysis is started as a task (``as_task = true``) and the lookups run
  meanwhile; the iteration ends when the analysis is in too.

Reported: the median over rounds of each round's iteration-latency median, iterations/s, and
the task/sync ratio per round.

    .venv/bin/python benchmarks/orders_tasks.py [--preset naive|tuned] [--concurrency 8]
        [--rounds 5] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(EXAMPLES))

from orders.auth import mint  # noqa: E402
from orders.config import PRESETS  # noqa: E402
from orders.db import ensure_database  # noqa: E402
from orders.workload import agent_client  # noqa: E402

from millimcp.lab.scenario import Scenario, load_scenario, run_scenario  # noqa: E402
from millimcp.lab.scenario_format import Call  # noqa: E402
from millimcp.testing import serve_subprocess  # noqa: E402

ORDERS = 20_000
HOT = 200
LATENCY_MS = 250


def variants() -> dict[str, Scenario]:
    task = load_scenario(EXAMPLES / "orders" / "agent_tasks.toml")
    task = dataclasses.replace(
        task, vars={**task.vars, "first_order": ORDERS - HOT + 1, "last_order": ORDERS}
    )
    steps = tuple(
        dataclasses.replace(step, as_task=False) if isinstance(step, Call) else step
        for step in task.steps
    )
    return {"sync": dataclasses.replace(task, name="sync", steps=steps), "task": task}


Series = dict[str, list[float]]


async def measure(
    url: str, preset: str, rounds: int, concurrency: int, seconds: float
) -> tuple[Series, Series]:
    config = PRESETS[preset]
    token = mint(config.auth_secret, "bench-agent")
    scenarios = variants()
    width = max(s.width for s in scenarios.values()) + 1
    medians: Series = {name: [] for name in scenarios}
    rates: Series = {name: [] for name in scenarios}
    async with agent_client(
        url, config, token, concurrency=concurrency, width=width, cap_inside=True
    ) as client:
        for scenario in scenarios.values():  # warm up: caches, pools, the JIT of SQLite plans
            await run_scenario(scenario, client, concurrency=concurrency, duration_s=2.0)
        for _ in range(rounds):
            for name, scenario in scenarios.items():
                outcome = await run_scenario(
                    scenario, client, concurrency=concurrency, duration_s=seconds, warmup_s=0.5
                )
                assert not outcome.errors, outcome.first_error
                medians[name].append(statistics.median(outcome.latencies_ms))
                rates[name].append(outcome.throughput)
    return medians, rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tuned")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    env = {"PYTHONPATH": f"{EXAMPLES}{os.pathsep}{ROOT / 'src'}"}
    with tempfile.TemporaryDirectory() as folder:
        db = f"sqlite:///{Path(folder) / 'orders.db'}"
        ensure_database(db, orders=ORDERS, covering=False)
        ensure_database(db, orders=ORDERS, covering=True)
        recommender = [sys.executable, "-m", "orders.recommender", "--port", "{port}"]
        recommender += ["--latency-ms", str(LATENCY_MS)]
        with serve_subprocess(recommender, env=env, cwd=EXAMPLES) as recs:
            service = [sys.executable, "-m", "orders.server", "--preset", args.preset]
            service += ["--port", "{port}", "--db", db, "--orders", str(ORDERS)]
            service += ["--recommender", f"http://127.0.0.1:{recs.port}"]
            service += ["--log-file", str(Path(folder) / "service.log")]
            with serve_subprocess(service, env=env, cwd=EXAMPLES, timeout=120) as server:
                medians, rates = asyncio.run(
                    measure(server.url(), args.preset, args.rounds, args.concurrency, args.seconds)
                )
    print(
        f"orders service ({args.preset}), concurrency {args.concurrency}, "
        f"{args.rounds} rounds of {args.seconds:g} s"
    )
    print(f"{'variant':8s} {'iteration p50 ms':>17s} {'iterations/s':>13s}   per-round p50 ms")
    for name in medians:
        rounds = " ".join(f"{m:.1f}" for m in medians[name])
        print(
            f"{name:8s} {statistics.median(medians[name]):17.1f} "
            f"{statistics.median(rates[name]):13.1f}   {rounds}"
        )
    ratios = [t / s for t, s in zip(medians["task"], medians["sync"], strict=True)]
    print(
        f"\ntask/sync iteration latency: median ratio {statistics.median(ratios):.2f} "
        f"(per round: {' '.join(f'{r:.2f}' for r in ratios)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

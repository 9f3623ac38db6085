"""What not waiting is worth: the agent workload with ``analyze_orders`` as a task or not.

One uvicorn server (``servers/millimcp_tasks_agent.py``: by default a 200 ms I/O-bound
analysis and 10 ms lookups) and the millimcp client over HTTP running the lab's scenario
runner, closed loop, at the same concurrency for both variants:

- ``sync``: ``get_order``, then ``analyze_orders`` (the agent waits), then
  ``get_recommendations``, then three ``get_profile`` at once;
- ``task``: the same calls, with ``analyze_orders`` started as a task (``as_task = true``):
  the lookups run while it works, and the iteration ends when its result is in.

Rounds alternate the variants (so drifts in machine load hit both alike); each round's
iteration-latency median is kept, and the table shows the median over rounds of those
medians, with the task/sync ratio per round.

    .venv/bin/python benchmarks/tasks_agent.py [--rounds 5] [--concurrency 8] [--seconds 4]
        [--analysis-ms 200] [--lookup-ms 10] [--poll-ms 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

from millimcp import Client
from millimcp.lab.scenario import parse_scenario, run_scenario
from millimcp.testing import serve_subprocess

HERE = Path(__file__).resolve().parent

STEPS = """
[[step]]
name = "order"
tool = "get_order"
args = {{ order_id = "{{{{ random_int(1, 100000) }}}}" }}

[[step]]
name = "analysis"
tool = "analyze_orders"
args = {{ customer_id = "{{{{ order.customer_id }}}}" }}
{as_task}
[[step]]
name = "recs"
tool = "get_recommendations"
args = {{ customer_id = "{{{{ order.customer_id }}}}" }}

[[step]]
name = "profiles"
parallel = [
  {{ name = "p1", tool = "get_profile", args = {{ customer_id = "{{{{ order.customer_id }}}}" }} }},
  {{ name = "p2", tool = "get_profile", args = {{ customer_id = "{{{{ order.customer_id }}}}" }} }},
  {{ name = "p3", tool = "get_profile", args = {{ customer_id = "{{{{ order.customer_id }}}}" }} }},
]
"""

VARIANTS = {
    "sync": parse_scenario(STEPS.format(as_task=""), default_name="sync"),
    "task": parse_scenario(STEPS.format(as_task="as_task = true"), default_name="task"),
}


Series = dict[str, list[float]]


async def measure(url: str, rounds: int, concurrency: int, seconds: float) -> tuple[Series, Series]:
    """Per variant: each round's iteration-latency median (ms), and its iterations/s."""
    medians: dict[str, list[float]] = {name: [] for name in VARIANTS}
    throughput: dict[str, list[float]] = {name: [] for name in VARIANTS}
    async with Client.over_http(url) as client:
        for scenario in VARIANTS.values():  # warm up both
            await run_scenario(scenario, client, concurrency=concurrency, iterations=concurrency)
        for _ in range(rounds):
            for name, scenario in VARIANTS.items():
                outcome = await run_scenario(
                    scenario, client, concurrency=concurrency, duration_s=seconds, warmup_s=0.5
                )
                assert not outcome.errors, outcome.first_error
                medians[name].append(statistics.median(outcome.latencies_ms))
                throughput[name].append(outcome.throughput)
    return medians, throughput


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--analysis-ms", type=int, default=200)
    parser.add_argument("--lookup-ms", type=int, default=10)
    parser.add_argument("--poll-ms", type=int, default=20, help="the server's pollIntervalMs")
    args = parser.parse_args()
    env = {
        "PYTHONPATH": f"{HERE.parent / 'src'}{os.pathsep}{HERE / 'servers'}",
        "BENCH_ANALYSIS_MS": str(args.analysis_ms),
        "BENCH_LOOKUP_MS": str(args.lookup_ms),
        "BENCH_POLL_MS": str(args.poll_ms),
    }
    command = [
        sys.executable, "-m", "uvicorn", "millimcp_tasks_agent:app", "--port", "{port}",
        "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning",
    ]  # fmt: skip
    with serve_subprocess(command, env=env, stdout=None) as server:
        medians, throughput = asyncio.run(
            measure(server.url(), args.rounds, args.concurrency, args.seconds)
        )
    print(
        f"concurrency {args.concurrency}, {args.rounds} rounds of {args.seconds:g} s each; "
        f"analysis {args.analysis_ms} ms, lookups {args.lookup_ms} ms, poll {args.poll_ms} ms"
    )
    print(f"{'variant':8s} {'iteration p50 ms':>17s} {'iterations/s':>13s}   per-round p50 ms")
    for name in VARIANTS:
        rounds = " ".join(f"{m:.1f}" for m in medians[name])
        print(
            f"{name:8s} {statistics.median(medians[name]):17.1f} "
            f"{statistics.median(throughput[name]):13.1f}   {rounds}"
        )
    ratios = [t / s for t, s in zip(medians["task"], medians["sync"], strict=True)]
    print(
        f"\ntask/sync iteration latency: median ratio {statistics.median(ratios):.2f} "
        f"(per round: {' '.join(f'{r:.2f}' for r in ratios)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

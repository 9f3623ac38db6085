"""The agent workload's tools with a long analysis, for ``benchmarks/tasks_agent.py``.

``analyze_orders`` takes ``BENCH_ANALYSIS_MS`` (default 200 ms) of waiting on a downstream
(an ``asyncio.sleep``: the analysis is I/O-bound, as the case study's is on its database and
recommendation service) and may run as a task; the lookups take ``BENCH_LOOKUP_MS`` (10 ms).
"""

from __future__ import annotations

import asyncio
import os

from millimcp import Server, ServerConfig
from millimcp.tasks import TaskConfig

ANALYSIS_S = float(os.environ.get("BENCH_ANALYSIS_MS", "200")) / 1000
LOOKUP_S = float(os.environ.get("BENCH_LOOKUP_MS", "10")) / 1000
POLL_MS = int(os.environ.get("BENCH_POLL_MS", "20"))

server = Server(
    "tasks-agent", config=ServerConfig(tasks=TaskConfig(poll_interval_ms=POLL_MS), limit=None)
)


@server.tool(task="optional")
async def analyze_orders(customer_id: int) -> dict[str, float]:
    await asyncio.sleep(ANALYSIS_S)
    return {"customer_id": customer_id, "spend": 1234.5}


@server.tool()
async def get_order(order_id: int) -> dict[str, int]:
    await asyncio.sleep(LOOKUP_S)
    return {"order_id": order_id, "customer_id": order_id % 1000}


@server.tool()
async def get_recommendations(customer_id: int) -> dict[str, list[int]]:
    await asyncio.sleep(LOOKUP_S)
    return {"items": [customer_id, customer_id + 1]}


@server.tool()
async def get_profile(customer_id: int) -> dict[str, int]:
    await asyncio.sleep(LOOKUP_S)
    return {"customer_id": customer_id}


app = server.asgi()

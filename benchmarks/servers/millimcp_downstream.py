"""millimcp with one ``lookup`` tool behind a downstream of 10 connections x 100 ms (100/s).

The server's limit is sized by Little's law for that downstream (10 slots) with a queue of
20; ``BENCH_UNBOUNDED=1`` removes the limit (an unbounded queue, like the official SDK's).
"""

import asyncio
import os

from millimcp import Server, ServerConfig
from millimcp.resilience import ConcurrencyLimit, limit_for

LATENCY_S = 0.1
DOWNSTREAM = asyncio.Semaphore(10)  # e.g. a pool of 10 database connections

limit = None
if not os.environ.get("BENCH_UNBOUNDED"):
    limit = ConcurrencyLimit(limit_for(LATENCY_S, qps=100, burst=1.0), max_queued=20)
server = Server("bench", version="1.0.0", config=ServerConfig(limit=limit))


@server.tool()
async def echo(text: str) -> str:
    async with DOWNSTREAM:
        await asyncio.sleep(LATENCY_S)
    return text


app = server.asgi()

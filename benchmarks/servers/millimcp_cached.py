"""millimcp with cached lookups whose downstream takes 50 ms (benchmarks/cache_hit.py).

``lookup`` is cached in both tiers; ``lookup_l2`` keeps entries in L1 for a microsecond
only, so every call after the first is served from Redis (L2); ``echo`` is the uncached
floor. ``BENCH_REDIS_URL`` names the Redis.
"""

import asyncio
import os

from millimcp import Cache, CacheConfig, Server, ServerConfig

DOWNSTREAM_S = 0.050

server = Server(
    "bench-cache",
    version="1.0.0",
    config=ServerConfig(cache=CacheConfig(redis_url=os.environ.get("BENCH_REDIS_URL"))),
)


@server.tool(cache=Cache(ttl=60))
async def lookup(user_id: int) -> str:
    await asyncio.sleep(DOWNSTREAM_S)  # the downstream service
    return f"orders of {user_id}"


@server.tool(cache=Cache(ttl=1e-6, shared_ttl=60))
async def lookup_l2(user_id: int) -> str:
    await asyncio.sleep(DOWNSTREAM_S)
    return f"orders of {user_id}"


@server.tool()
async def echo(text: str) -> str:
    return text


app = server.asgi()

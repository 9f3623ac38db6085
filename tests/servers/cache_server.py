"""A server with a cached lookup and a write that invalidates it, sharing Redis.

``MILLIMCP_TEST_REDIS_URL`` and ``MILLIMCP_TEST_CACHE_NS`` choose the Redis and the key
namespace. Run with ``python -m millimcp serve tests.servers.cache_server:server``.
"""

from __future__ import annotations

import os

from millimcp import Server, ServerConfig
from millimcp.cache import Cache, CacheConfig

server = Server(
    "cache-server",
    config=ServerConfig(
        cache=CacheConfig(
            redis_url=os.environ.get("MILLIMCP_TEST_REDIS_URL"),
            namespace=os.environ.get("MILLIMCP_TEST_CACHE_NS", "millimcp-test"),
        )
    ),
)
runs = 0


@server.tool(cache=Cache(ttl=60, tags=["orders:{user_id}"]))
async def orders(user_id: int) -> str:
    global runs
    runs += 1
    return f"orders of {user_id} from pid {os.getpid()} run {runs}"


@server.tool(invalidates=["orders:{user_id}"])
async def place_order(user_id: int) -> str:
    return "placed"


@server.tool()
async def cache_stats() -> dict[str, int]:
    stats = server.cache.stats
    return {name: getattr(stats, name) for name in stats.__slots__}

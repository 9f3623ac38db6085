"""The shared tier against a real redis-server: hits across stores, private entries,
invalidation fan-out, and a Redis that dies mid-test."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis.asyncio

from millimcp import Server, ServerConfig
from millimcp.cache import Cache, CacheConfig
from tests.conftest import free_port
from tests.servers.inprocess import Caller
from tests.servers.redis_server import redis_binary, start_redis, stop_redis


def make_server(
    url: str, namespace: str, label: str = "a", **config: Any
) -> tuple[Server, list[int]]:
    server = Server(
        "redis-cache",
        config=ServerConfig(cache=CacheConfig(redis_url=url, namespace=namespace, **config)),
    )
    runs: list[int] = []

    @server.tool(cache=Cache(ttl=60, tags=["orders:{user_id}"]))
    async def orders(user_id: int) -> str:
        runs.append(user_id)
        return f"orders of {user_id} #{len(runs)} by {label}"

    @server.tool(cache=Cache(ttl=60, scope="private"))
    async def secrets(user_id: int) -> str:
        return f"secret of {user_id}"

    return server, runs


@pytest.fixture
def namespace() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[Any]:
    client = redis.asyncio.Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def wait_until(condition: Any) -> None:
    """Poll ``condition`` for up to 5 s (pub/sub delivery is asynchronous)."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met within 5 s")


async def test_an_entry_filled_by_one_store_is_a_hit_for_another(
    redis_url: str, namespace: str, redis_client: Any
) -> None:
    first, first_runs = make_server(redis_url, namespace, "a")
    second, second_runs = make_server(redis_url, namespace, "b")
    async with Caller(first.asgi()) as a, Caller(second.asgi()) as b:
        assert await a.text("orders", {"user_id": 1}) == "orders of 1 #1 by a"
        assert await b.text("orders", {"user_id": 1}) == "orders of 1 #1 by a"
        assert await b.text("orders", {"user_id": 1}) == "orders of 1 #1 by a"
    assert first_runs == [1]
    assert second_runs == []
    assert second.cache.stats.hits_l2 == 1
    assert second.cache.stats.hits_l1 == 1
    keys = await redis_client.keys(f"{namespace}:e:*")
    assert len(keys) == 1
    await first.cache.close()
    await second.cache.close()


async def test_a_private_entry_never_reaches_redis(
    redis_url: str, namespace: str, redis_client: Any
) -> None:
    server, _ = make_server(redis_url, namespace)
    alice = {"authorization": "Bearer alice"}
    async with Caller(server.asgi()) as caller:
        assert await caller.text("secrets", {"user_id": 1}, headers=alice) == "secret of 1"
        assert await caller.text("secrets", {"user_id": 1}, headers=alice) == "secret of 1"
        await caller.text("orders", {"user_id": 1})  # a public entry does go to Redis
    assert server.cache.stats.hits_l1 == 1
    keys = [k.decode() for k in await redis_client.keys(f"{namespace}:*")]
    assert keys == [f"{namespace}:e:orders:" + keys[0].rsplit(":", 1)[1]]
    for key in keys:
        assert b"secret" not in await redis_client.get(key)
    await server.cache.close()


async def test_an_invalidation_reaches_every_store(redis_url: str, namespace: str) -> None:
    first, first_runs = make_server(redis_url, namespace, "a")
    second, second_runs = make_server(redis_url, namespace, "b")
    async with Caller(first.asgi()) as a, Caller(second.asgi()) as b:
        await a.text("orders", {"user_id": 4})
        assert await b.text("orders", {"user_id": 4}) == "orders of 4 #1 by a"  # L2 hit
        assert await b.text("orders", {"user_id": 4}) == "orders of 4 #1 by a"  # L1 hit
        await first.cache.invalidate("orders:4")
        await wait_until(lambda: second.cache.stats.remote_invalidations >= 1)
        assert await b.text("orders", {"user_id": 4}) == "orders of 4 #1 by b"
    # The entry in Redis was stale too: the second store ran the tool itself.
    assert second_runs == [4]
    assert first_runs == [4]
    await first.cache.close()
    await second.cache.close()


@pytest.fixture
def own_redis(missing_tool: Any) -> Iterator[tuple[int, str]]:
    """A redis-server of this test alone, which the test may kill and restart."""
    binary = redis_binary()
    if binary is None:
        missing_tool("redis-server is not installed (.ci/run installs it)")
    assert binary is not None
    port = free_port()
    yield port, binary
    os.system(f"redis-cli -p {port} shutdown nosave >/dev/null 2>&1")


async def test_calls_succeed_when_redis_dies_and_the_fallback_is_counted(
    own_redis: tuple[int, str], namespace: str
) -> None:
    port, binary = own_redis
    process = start_redis(port, binary)
    url = f"redis://127.0.0.1:{port}/0"
    server, runs = make_server(url, namespace, retry_after_s=0.2)
    try:
        async with Caller(server.asgi()) as caller:
            assert await caller.text("orders", {"user_id": 1}) == "orders of 1 #1 by a"
            assert server.cache.stats.fallbacks == 0
            stop_redis(process)
            # Redis is gone: hits still come from L1, misses run the tool, nothing fails.
            assert await caller.text("orders", {"user_id": 1}) == "orders of 1 #1 by a"
            assert await caller.text("orders", {"user_id": 2}) == "orders of 2 #2 by a"
            assert await caller.text("orders", {"user_id": 3}) == "orders of 3 #3 by a"
            await server.cache.invalidate("orders:1")  # queued until Redis is back
            assert await caller.text("orders", {"user_id": 1}) == "orders of 1 #4 by a"
            assert server.cache.stats.fallbacks >= 3
            # Redis comes back: after retry_after_s the shared tier is used again.
            process = start_redis(port, binary)
            await asyncio.sleep(0.3)
            await caller.text("orders", {"user_id": 5})
            client = redis.asyncio.Redis.from_url(url)
            try:
                assert await client.keys(f"{namespace}:e:*") != []
                assert await client.get(f"{namespace}:g:orders:1") == b"1"
            finally:
                await client.aclose()
    finally:
        await server.cache.close()
        stop_redis(process)
    assert runs == [1, 2, 3, 1, 5]

"""The in-process tier: hits, expiry, single-flight, tags, errors, private entries."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from millimcp import ConfigurationError, Server, ToolError
from millimcp.cache import Cache
from tests.servers.inprocess import Caller


def counting_server(ttl: float = 30.0, delay: float = 0.0, **cache: Any) -> tuple[Server, Any]:
    server = Server("cache-tests")
    runs: dict[str, int] = {"lookup": 0, "flaky": 0}

    @server.tool(cache=Cache(ttl=ttl, tags=["orders:{user_id}"], **cache))
    async def lookup(user_id: int, verbose: bool = False) -> str:
        runs["lookup"] += 1
        await asyncio.sleep(delay)
        return f"orders of {user_id} (run {runs['lookup']})"

    @server.tool(invalidates=["orders:{user_id}"])
    async def place_order(user_id: int) -> str:
        return "placed"

    @server.tool(cache=Cache(ttl=ttl))
    async def flaky(n: int) -> str:
        runs["flaky"] += 1
        if runs["flaky"] == 1:
            raise ToolError("downstream down")
        if runs["flaky"] == 2:
            raise RuntimeError("boom")
        return f"ok {n}"

    return server, runs


async def test_a_second_identical_call_is_a_hit() -> None:
    server, runs = counting_server()
    async with Caller(server.asgi()) as caller:
        first = await caller.text("lookup", {"user_id": 7})
        # Same arguments in another order and with the default spelled out: same entry.
        second = await caller.text("lookup", {"verbose": False, "user_id": 7})
        other = await caller.text("lookup", {"user_id": 8})
    assert first == second == "orders of 7 (run 1)"
    assert other == "orders of 8 (run 2)"
    assert runs["lookup"] == 2
    assert server.cache.stats.hits_l1 == 1
    assert server.cache.stats.misses == 2


async def test_an_entry_expires_after_its_ttl() -> None:
    server, runs = counting_server(ttl=0.2)
    async with Caller(server.asgi()) as caller:
        assert await caller.text("lookup", {"user_id": 1}) == "orders of 1 (run 1)"
        assert await caller.text("lookup", {"user_id": 1}) == "orders of 1 (run 1)"
        await asyncio.sleep(0.3)
        assert await caller.text("lookup", {"user_id": 1}) == "orders of 1 (run 2)"
    assert runs["lookup"] == 2


async def test_one_hundred_identical_concurrent_calls_run_once() -> None:
    server, runs = counting_server(delay=0.2)
    async with Caller(server.asgi()) as caller:
        texts = await asyncio.gather(*(caller.text("lookup", {"user_id": 3}) for _ in range(100)))
    assert runs["lookup"] == 1
    assert set(texts) == {"orders of 3 (run 1)"}
    stats = server.cache.stats
    assert stats.misses == 1
    assert stats.coalesced + stats.hits_l1 == 99
    assert stats.coalesced > 0


async def test_a_caller_that_leaves_does_not_cancel_the_shared_execution() -> None:
    server, runs = counting_server(delay=0.3)
    async with Caller(server.asgi()) as caller:
        first = asyncio.create_task(caller.text("lookup", {"user_id": 5}))
        await asyncio.sleep(0.05)
        second = asyncio.create_task(caller.text("lookup", {"user_id": 5}))
        await asyncio.sleep(0.05)
        first.cancel()
        assert await second == "orders of 5 (run 1)"
    assert runs["lookup"] == 1


async def test_invalidating_a_tag_drops_the_entries_that_carry_it() -> None:
    server, _runs = counting_server()
    async with Caller(server.asgi()) as caller:
        await caller.text("lookup", {"user_id": 1})
        await caller.text("lookup", {"user_id": 2})
        assert await caller.text("place_order", {"user_id": 1}) == "placed"
        assert await caller.text("lookup", {"user_id": 1}) == "orders of 1 (run 3)"
        assert await caller.text("lookup", {"user_id": 2}) == "orders of 2 (run 2)"
        await server.cache.invalidate("orders:2")
        assert await caller.text("lookup", {"user_id": 2}) == "orders of 2 (run 4)"
    assert server.cache.stats.invalidations == 2


async def test_an_invalidation_during_a_fill_makes_the_new_entry_stale() -> None:
    server, _runs = counting_server(delay=0.2)
    async with Caller(server.asgi()) as caller:
        filling = asyncio.create_task(caller.text("lookup", {"user_id": 9}))
        await asyncio.sleep(0.05)
        await server.cache.invalidate("orders:9")
        assert await filling == "orders of 9 (run 1)"
        assert await caller.text("lookup", {"user_id": 9}) == "orders of 9 (run 2)"


async def test_errors_are_never_cached() -> None:
    server, runs = counting_server()
    async with Caller(server.asgi()) as caller:
        first = await caller.call("flaky", {"n": 1})
        second = await caller.call("flaky", {"n": 1})
        third = await caller.text("flaky", {"n": 1})
        fourth = await caller.text("flaky", {"n": 1})
    assert first["isError"] is True
    assert "downstream down" in first["content"][0]["text"]
    assert second["isError"] is True
    assert third == fourth == "ok 1"
    assert runs["flaky"] == 3
    assert server.cache.stats.errors_not_cached == 2


async def test_private_entries_are_kept_per_principal() -> None:
    server, _runs = counting_server(scope="private")
    alice = {"authorization": "Bearer alice"}
    bob = {"authorization": "Bearer bob"}
    async with Caller(server.asgi()) as caller:
        assert await caller.text("lookup", {"user_id": 1}, headers=alice) == "orders of 1 (run 1)"
        assert await caller.text("lookup", {"user_id": 1}, headers=bob) == "orders of 1 (run 2)"
        assert await caller.text("lookup", {"user_id": 1}, headers=alice) == "orders of 1 (run 1)"
        # No principal at all (a modern request without Authorization): never cached.
        # (A handshake-era session is a principal too: tests/integration/http/test_handshake.py.)
        assert await caller.text("lookup", {"user_id": 1}) == "orders of 1 (run 3)"
        assert await caller.text("lookup", {"user_id": 1}) == "orders of 1 (run 4)"
    assert server.cache.stats.bypassed == 2


async def test_a_custom_key_decides_what_is_the_same_call() -> None:
    server = Server("keys")
    runs = []

    @server.tool(cache=Cache(ttl=30, key=lambda user_id, **_: user_id))
    async def profile(user_id: int, trace_id: str = "") -> str:
        runs.append(trace_id)
        return f"profile {user_id}"

    async with Caller(server.asgi()) as caller:
        await caller.text("profile", {"user_id": 1, "trace_id": "a"})
        await caller.text("profile", {"user_id": 1, "trace_id": "b"})
    assert runs == ["a"]


def test_tags_must_name_parameters_of_the_tool() -> None:
    server = Server("bad")
    with pytest.raises(ConfigurationError, match=r"\{order_id\}"):

        @server.tool(cache=Cache(tags=["orders:{order_id}"]))
        async def lookup(user_id: int) -> str:
            return ""

    with pytest.raises(ConfigurationError, match=r"\{user\}"):

        @server.tool(invalidates=["orders:{user}"])
        async def write(user_id: int) -> str:
            return ""


def test_cache_policy_values_are_checked() -> None:
    with pytest.raises(ValueError, match="ttl"):
        Cache(ttl=0)
    with pytest.raises(ValueError, match="scope"):
        Cache(scope="shared")  # type: ignore[arg-type]

"""Subscriptions in both eras, in memory: list changes and resource updates, the list cache,
closing, and the listen stream's opening going through the call gate."""

from __future__ import annotations

import asyncio

from millimcp import Limits, Server
from millimcp.client import Notification, Subscription
from millimcp.testing import connect
from tests.unit.client.conftest import Era


async def _next(subscription: Subscription) -> Notification:
    async with asyncio.timeout(10):  # a stall bound
        return await anext(subscription)


async def test_list_changes_and_resource_updates(core_server: Server, era: Era) -> None:
    async with connect(core_server, era=era) as client:
        wanted = client.subscribe(tools_list_changed=True, resources=["test://static-text"])
        async with wanted as updates:
            await client.call_tool("announce")
            note = await _next(updates)
            assert note.method == "notifications/tools/list_changed"
            await client.call_tool("touch", {"uri": "test://other"})  # not subscribed
            await client.call_tool("touch", {"uri": "test://static-text"})
            note = await _next(updates)
            assert note.method == "notifications/resources/updated"
            assert note.uri == "test://static-text"


async def test_two_subscriptions_each_get_theirs_once(core_server: Server, era: Era) -> None:
    async with connect(core_server, era=era) as client:
        tools = client.subscribe(tools_list_changed=True)
        both = client.subscribe(tools_list_changed=True, resources=["test://blob"])
        async with tools, both:
            await client.call_tool("announce")
            await client.call_tool("touch", {"uri": "test://blob"})
            assert (await _next(tools)).method == "notifications/tools/list_changed"
            assert (await _next(both)).method == "notifications/tools/list_changed"
            assert (await _next(both)).uri == "test://blob"
            await client.call_tool("announce")
            # the next one is the second announcement: the first came once, not twice
            assert (await _next(tools)).method == "notifications/tools/list_changed"
            assert tools._queue.empty()


async def test_a_list_change_invalidates_the_cached_list(core_server: Server) -> None:
    async with connect(core_server) as client:
        first = await client.list_tools()
        assert await client.list_tools() is first
        async with client.subscribe(tools_list_changed=True) as updates:
            await client.call_tool("announce")
            await _next(updates)
        assert await client.list_tools() is not first


async def test_iterating_opens_and_closing_the_client_ends_it(core_server: Server) -> None:
    async with connect(core_server) as client:
        updates = client.subscribe(prompts_list_changed=True)
        waiting = asyncio.ensure_future(anext(updates))
        await asyncio.sleep(0.2)
        assert not waiting.done()
    async with asyncio.timeout(10):
        try:
            await waiting
        except StopAsyncIteration:
            pass
        else:
            raise AssertionError("the subscription outlived its client")


async def test_a_live_subscription_holds_no_slot_of_the_gate(core_server: Server) -> None:
    """The listen request waits for a slot like a call, and gives it back once acknowledged:
    with one call in flight at most, calls still go while it is open."""
    limits = Limits(max_in_flight=1, max_queue=4)
    async with (
        connect(core_server, limits=limits) as client,
        client.subscribe(tools_list_changed=True) as updates,
    ):
        assert client._core.pipeline.gate.in_flight == 0
        assert (await client.call_tool("echo", {"text": "x"})).text == "x"
        await client.call_tool("announce")
        assert (await _next(updates)).method == "notifications/tools/list_changed"


async def test_closing_a_subscription_ends_its_iteration(core_server: Server, era: Era) -> None:
    async with connect(core_server, era=era) as client:
        updates = client.subscribe(resources=["test://blob"])
        await updates.start()
        await updates.aclose()
        async with asyncio.timeout(10):
            assert [note async for note in updates] == []
        await updates.aclose()  # idempotent
        assert (await client.call_tool("echo", {"text": "after"})).text == "after"

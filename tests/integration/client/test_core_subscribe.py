"""Subscriptions in both eras: list changes and resource updates from a real server."""

from __future__ import annotations

import asyncio

from millimcp import Client
from millimcp.client import Notification


async def _next(subscription: object) -> Notification:
    async with asyncio.timeout(10):  # a stall bound
        note: Notification = await anext(subscription)  # type: ignore[call-overload]
        return note


async def test_list_changes_and_resource_updates(core_url: str, era: str) -> None:
    client = Client.over_http(core_url, era=era)  # type: ignore[arg-type]
    wanted = client.subscribe(tools_list_changed=True, resources=["test://static-text"])
    async with client, wanted as updates:
        await client.call_tool("announce")
        note = await _next(updates)
        assert note.method == "notifications/tools/list_changed"
        await client.call_tool("touch", {"uri": "test://other"})  # not subscribed
        await client.call_tool("touch", {"uri": "test://static-text"})
        note = await _next(updates)
        assert note.method == "notifications/resources/updated"
        assert note.uri == "test://static-text"


async def test_a_list_change_invalidates_the_cached_list(core_url: str) -> None:
    async with Client.over_http(core_url) as client:
        first = await client.list_tools()
        assert await client.list_tools() is first
        async with client.subscribe(tools_list_changed=True) as updates:
            await client.call_tool("announce")
            await _next(updates)
        assert await client.list_tools() is not first


async def test_iterating_opens_and_closing_the_client_ends_it(core_url: str) -> None:
    async with Client.over_http(core_url) as client:
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

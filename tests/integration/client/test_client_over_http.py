"""The client against a real millimcp server over HTTP (aiohttp, a subprocess), in both eras:
what only a socket shows end to end. The era remembered per URL, every method through the
pool, the handshake era's server-to-client request on the call's SSE stream answered on the
side pool, a session deleted by another client, subscriptions on the listen stream and the
GET stream. The client's behaviours themselves are tested in memory (tests/unit/client)."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import httpx
import pytest

from millimcp import Client
from millimcp.client import Notification, Subscription
from millimcp.client.era import remembered
from millimcp.protocol.types import (
    ElicitParams,
)
from tests.unit.client.test_calls import every_method

pytestmark = pytest.mark.usefixtures("http_kind")

Era = Literal["modern", "handshake"]


async def test_auto_detects_the_modern_era_and_remembers_it(core_url: str) -> None:
    async with Client.over_http(core_url) as client:
        assert client.era == "modern"
        assert client.protocol_version == "2026-07-28"
        assert client.server_info is not None
        assert client.server_info.name == "client-core-test-server"
        assert client.instructions == "Tools for the client core's tests."
        assert client.server_capabilities.tools is not None
    assert remembered(core_url) == ("modern", "2026-07-28")


async def test_every_method_in_both_eras(core_url: str, era: Era) -> None:
    async with Client.over_http(core_url, era=era) as client:
        await every_method(client)


async def test_server_to_client_elicitation_handshake(core_url: str) -> None:
    async def elicit(params: ElicitParams) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Grace"}}

    async with Client.over_http(core_url, era="handshake", elicitation=elicit) as client:
        result = await client.call_tool("ask_name")
    assert result.text == "hello Grace (accept)"


async def test_a_lost_session_is_initialized_again(core_url: str) -> None:
    async with Client.over_http(core_url, era="handshake") as client:
        link: Any = client._core.link
        old = link.session_id
        assert old is not None
        async with httpx.AsyncClient() as http:
            response = await http.delete(
                core_url,
                headers={"Mcp-Session-Id": old, "MCP-Protocol-Version": "2025-11-25"},
            )
            assert response.status_code == 200
        result = await client.call_tool("echo", {"text": "after"})
        assert result.text == "after"
        assert link.session_id not in (None, old)


async def _next(subscription: Subscription) -> Notification:
    async with asyncio.timeout(10):  # a stall bound
        return await anext(subscription)


async def test_list_changes_and_resource_updates(core_url: str, era: Era) -> None:
    client = Client.over_http(core_url, era=era)
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

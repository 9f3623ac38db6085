"""List results: every page, kept for the server's ttlMs (modern era only), dropped on
list_changed; tools with invalid x-mcp-header declarations left out."""

from __future__ import annotations

import logging

import pytest

from millimcp import Server, ServerConfig
from millimcp.testing import connect


async def test_list_results_are_cached_by_ttl_and_invalidated(core_server: Server) -> None:
    async with connect(core_server) as client:
        first = await client.list_tools()
        calls = client.stats.calls
        assert await client.list_tools() is first  # ttlMs 60 s: no request
        assert client.stats.calls == calls
        client._lists.on_notification("notifications/tools/list_changed")
        assert await client.list_tools() is not first
        assert client.stats.calls == calls + 1


async def test_a_list_without_ttl_is_read_every_time() -> None:
    server = Server("no-ttl", config=ServerConfig(list_ttl_ms=0))

    @server.tool()
    async def one() -> str:
        return "1"

    async with connect(server) as client:
        first = await client.list_tools()
        calls = client.stats.calls
        assert await client.list_tools() == first
        assert client.stats.calls == calls + 1


async def test_every_page_is_read() -> None:
    server = Server("paged", config=ServerConfig(page_size=2))
    for index in range(5):

        async def tool(index: int = index) -> int:
            return index

        server.tool(name=f"t{index}")(tool)
    async with connect(server) as client:
        names = [tool.name for tool in await client.list_tools()]
        assert client.stats.calls == 4  # discover and three pages
    assert names == [f"t{index}" for index in range(5)]


async def test_handshake_era_lists_are_not_cached(core_server: Server) -> None:
    async with connect(core_server, era="handshake") as client:
        first = await client.list_tools()
        second = await client.list_tools()
    assert first == second
    assert first is not second


async def test_a_tool_with_an_invalid_header_declaration_is_dropped(
    core_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="millimcp.client"):
        async with connect(core_server) as client:
            names = [tool.name for tool in await client.list_tools()]
    assert "bad_header" not in names
    assert "echo" in names
    assert any("bad_header" in record.getMessage() for record in caplog.records)

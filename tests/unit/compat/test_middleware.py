"""``MCPServer.middleware`` (mcp 2.x) on millimcp: each request passes through the chain,
outermost first, with the raw params; the SDK's ``MCPError`` is a JSON-RPC error with its
code; a rewritten ``params`` is what the handler gets (as ``mcp-server-time`` uses it)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from millimcp.compat import mcp2
from millimcp.compat.middleware import RequestContext
from millimcp.errors import InvalidParams, ProtocolError
from millimcp.testing import connect


def _server(seen: list[str]) -> mcp2.MCPServer:
    async def record(ctx: RequestContext, call_next: Any) -> Any:
        seen.append(f"outer {ctx.method}")
        return await call_next(ctx)

    server = mcp2.MCPServer("mw", middleware=[record])

    @server.tool()
    def echo(text: str) -> str:
        return text

    async def reject_unknown(ctx: RequestContext, call_next: Any) -> Any:
        if ctx.method == "tools/call" and ctx.params is not None:
            name = ctx.params.get("name")
            if name not in {tool.name for tool in await server.list_tools()}:
                raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name}")
            if ctx.params.get("arguments") == {"text": "secret"}:
                params = {**ctx.params, "arguments": {"text": "redacted"}}
                return await call_next(dataclasses.replace(ctx, params=params))
        seen.append(f"inner {ctx.method}")
        return await call_next(ctx)

    server.middleware.append(reject_unknown)
    return server


async def test_middleware_wraps_requests_in_order() -> None:
    seen: list[str] = []
    server = _server(seen)
    async with connect(server.server) as client:
        assert (await client.call_tool("echo", {"text": "hi"})).text == "hi"
        assert (await client.call_tool("echo", {"text": "secret"})).text == "redacted"
        with pytest.raises(InvalidParams, match="Unknown tool: nope"):
            await client.call_tool("nope", {})
    calls = [entry for entry in seen if entry.endswith("tools/call")]
    assert calls == ["outer tools/call", "inner tools/call", "outer tools/call", "outer tools/call"]
    assert "outer tools/list" not in seen  # the client listed nothing: only its calls passed


async def test_an_mcp_error_keeps_its_code() -> None:
    server = mcp2.MCPServer("mw")

    async def refuse(ctx: RequestContext, call_next: Any) -> Any:
        if ctx.method == "prompts/list":
            raise MCPError(code=-32042, message="not today")
        return await call_next(ctx)

    server.middleware.append(refuse)
    async with connect(server.server) as client:
        with pytest.raises(ProtocolError) as caught:
            await client.list_prompts()
    assert caught.value.code == -32042
    assert caught.value.message == "not today"


def test_without_middleware_the_method_table_is_the_plain_one() -> None:
    server = mcp2.MCPServer("plain")
    plain = mcp2.MCPServer("plain").server
    assert server.server.handlers().keys() == plain.handlers().keys()
    assert all(
        getattr(handler, "__qualname__", "").split(".")[-1] != "handle"
        for handler in server.server.handlers().values()
    )


async def test_a_middleware_sees_a_tool_result_struct_not_pre_encoded_bytes() -> None:
    server = mcp2.MCPServer("mw")

    @server.server.tool()  # registered as is: the server's shortest path, pre-encoded
    async def echo(text: str) -> str:
        return text

    seen: list[Any] = []

    async def look(ctx: RequestContext, call_next: Any) -> Any:
        result = await call_next(ctx)
        if ctx.method == "tools/call":
            seen.append(result)
        return result

    server.middleware.append(look)
    async with connect(server.server) as client:
        assert (await client.call_tool("echo", {"text": "hi"})).text == "hi"
    assert [type(result).__name__ for result in seen] == ["CallToolResult"]
    assert seen[0].content[0].text == "hi"

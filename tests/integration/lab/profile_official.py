"""The official SDK's ``MCPServer`` (``mcp`` 2.3.0), stateless with JSON replies, for the
profile tests (``tests/servers/official_server.py`` is the stateful one, with SSE replies)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("profile-official", version="2.3.0")


@server.tool()
async def echo(text: str) -> str:
    return text


app = server.streamable_http_app(json_response=True, stateless_http=True)

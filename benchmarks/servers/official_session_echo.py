"""The official MCP Python SDK (``mcp`` 2.x) with sessions: the handshake era's reference.

``MCPServer.streamable_http_app(json_response=True)``: stateful (``initialize`` opens a session
named by ``Mcp-Session-Id``), JSON responses, everything else at the SDK's defaults.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench", version="1.0.0")


@server.tool()
async def echo(text: str) -> str:
    return text


app = server.streamable_http_app(json_response=True)

"""The official MCP Python SDK (``mcp`` 2.x): ``MCPServer`` with one async ``echo`` tool.

Served as its Streamable HTTP Starlette app in stateless, JSON-response mode. Requests carrying
``MCP-Protocol-Version: 2026-07-28`` take the SDK's single-exchange (handshake-free) path.
Everything else is left at the SDK's defaults (including its localhost Host/Origin checks).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench", version="1.0.0")


@server.tool()
async def echo(text: str) -> str:
    return text


app = server.streamable_http_app(json_response=True, stateless_http=True)

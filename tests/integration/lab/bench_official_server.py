"""The official MCP Python SDK's ``MCPServer`` (``mcp`` 2.3.0) for the bench tests.

Its Streamable HTTP app at the SDK's defaults (sessions, SSE replies in the handshake era),
served by uvicorn: ``python -m uvicorn tests.integration.lab.bench_official_server:app``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("lab-official", version="2.3.0")


@server.tool()
async def echo(text: str) -> str:
    return text


app = server.streamable_http_app()

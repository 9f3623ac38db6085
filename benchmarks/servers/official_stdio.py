"""The official MCP Python SDK (``mcp`` 2.x) over stdio: ``MCPServer`` with one async ``echo``.

Run as a script (``python benchmarks/servers/official_stdio.py``); it serves stdin/stdout with
the SDK's own stdio transport (``MCPServer.run("stdio")``), everything at the SDK's defaults.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench", version="1.0.0")


@server.tool()
async def echo(text: str) -> str:
    return text


if __name__ == "__main__":
    server.run("stdio")

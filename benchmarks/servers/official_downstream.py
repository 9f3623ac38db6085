"""The official SDK with the same ``echo`` tool behind the same downstream (10 x 100 ms)."""

from __future__ import annotations

import asyncio

from mcp.server.mcpserver import MCPServer

LATENCY_S = 0.1
DOWNSTREAM = asyncio.Semaphore(10)

server = MCPServer("bench", version="1.0.0")


@server.tool()
async def echo(text: str) -> str:
    async with DOWNSTREAM:
        await asyncio.sleep(LATENCY_S)
    return text


app = server.streamable_http_app(json_response=True, stateless_http=True)

"""FastMCP (the ``fastmcp`` package) with the same single async ``echo`` tool.

Served as its Streamable HTTP Starlette app (``http_app``) in stateless, JSON-response mode.
"""

from __future__ import annotations

from fastmcp import FastMCP

server = FastMCP("bench", version="1.0.0")


@server.tool
async def echo(text: str) -> str:
    return text


app = server.http_app(json_response=True, stateless_http=True)

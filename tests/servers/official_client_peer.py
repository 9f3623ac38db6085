"""The official SDK's ``MCPServer`` (``mcp`` 2.3.0) as a peer of millimcp's client.

``app`` is stateful (sessions, SSE replies): the handshake era, and the modern era for
requests with 2026-07-28 ``_meta``. Served by uvicorn in the tests; run as a script it
serves stdio.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

server = MCPServer("official-peer", version="2.3.0")


class Name(BaseModel):
    name: str


@server.tool()
async def echo(text: str) -> str:
    return text


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    for step in range(steps):
        await ctx.report_progress(step + 1, steps)
    return f"{steps} steps"


@server.tool()
async def greet(ctx: Context) -> str:
    answer = await ctx.elicit("Your name?", Name)
    return f"hello {answer.data.name}" if answer.action == "accept" else answer.action


@server.resource("peer://note", mime_type="text/plain")
def note() -> str:
    return "a note"


@server.prompt()
def ask(topic: str) -> str:
    return f"Tell me about {topic}."


app = server.streamable_http_app()


if __name__ == "__main__":
    server.run("stdio")

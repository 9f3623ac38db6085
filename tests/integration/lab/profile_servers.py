"""Servers for the profile tests: millimcp with and without Server-Timing."""

from __future__ import annotations

import asyncio

from millimcp import Server, ServerConfig, ToolError

timed = Server("profile-timed", version="1.0.0", config=ServerConfig(server_timing=True))
untimed = Server("profile-untimed", version="1.0.0")

for _server in (timed, untimed):

    @_server.tool(annotations={"readOnlyHint": True})
    async def echo(text: str) -> str:
        """Return the text unchanged (a trivial tool)."""
        return text

    @_server.tool()
    async def nap(ms: float) -> str:
        """Sleep ``ms`` milliseconds, then answer (a tool slower than its transport)."""
        await asyncio.sleep(ms / 1000)
        return "rested"

    @_server.tool()
    async def refuse() -> str:
        """Always fails as a tool (``isError``), not as a protocol error."""
        raise ToolError("no")

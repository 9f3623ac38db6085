"""millimcp over stdio, with the same single ``echo`` tool: ``Server.run_stdio()``.

Run as a script (``python benchmarks/servers/millimcp_stdio.py``); this is what
``millimcp serve millimcp_stdio:server --stdio`` runs. With ``--uvloop`` it serves the same
way on a uvloop event loop instead of asyncio's default one (``Server.run_stdio`` uses
``asyncio.run``), to measure what the event loop costs per call.
"""

from __future__ import annotations

import sys

from millimcp import Server

server = Server("bench", version="1.0.0")


@server.tool()
async def echo(text: str) -> str:
    return text


if __name__ == "__main__":
    if "--uvloop" in sys.argv[1:]:
        import uvloop

        uvloop.run(server.serve_stdio())
    else:
        server.run_stdio()

"""A millimcp server whose tool waits until it is cancelled and leaves a marker file then.

Served over stdio by the stdio link's tests: ``python tests/integration/client/cancel_server.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from millimcp import Server

server = Server("cancel-marker", version="0.0.0")


@server.tool(description="Waits forever; writes 'cancelled' to `marker` when cancelled.")
async def wait_for_cancel(marker: str) -> str:
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        leave_marker(marker)
        raise
    return "never"


def leave_marker(path: str) -> None:
    Path(path).write_text("cancelled")


if __name__ == "__main__":
    server.run_stdio()

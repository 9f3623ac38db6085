"""The conformance fixture server plus ``whoami`` (the worker's pid), for ``--workers N``
tests that must know which worker answered a request."""

from __future__ import annotations

import os

from examples.conformance_server import server

__all__ = ["server"]


@server.tool()
async def whoami() -> str:
    """The pid of the worker process that runs this call."""
    return str(os.getpid())

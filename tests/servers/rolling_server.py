"""The server of the rolling-restart test (tests/integration/hardening/test_rolling_restart.py).

``millimcp serve tests.servers.rolling_server:server --workers 2``: ``record`` is a call that
is not idempotent: it appends its token and the worker's pid to the file named by
``ROLLING_LOG`` (one ``O_APPEND`` write per call, so the workers' lines never mix), then
takes 20 ms. The test counts each token's arrivals there.
"""

from __future__ import annotations

import asyncio
import os
import time

from millimcp import Server, ServerConfig

if delay := os.environ.get("ROLLING_START_DELAY"):  # a worker slow to start (seconds)
    time.sleep(float(delay))

server = Server("rolling-restart-test-server", config=ServerConfig(state_key=b"r" * 32))


@server.tool()
async def record(token: str) -> str:
    """Note that ``token`` arrived (not idempotent), wait 20 ms, return it."""
    fd = os.open(os.environ["ROLLING_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{token} {os.getpid()}\n".encode())
    finally:
        os.close(fd)
    await asyncio.sleep(0.02)
    return token

"""A server with /metrics and Server-Timing on, for the multi-worker metrics test."""

from __future__ import annotations

import os

from millimcp import Server, ServerConfig

server = Server("metered", config=ServerConfig(metrics_path="/metrics", server_timing=True))


@server.tool()
async def whoami() -> str:
    return str(os.getpid())

"""The server ``benchmarks/soak.py`` runs: small tools and a ``stats`` probe of itself."""

from __future__ import annotations

import asyncio
import os
import resource
from pathlib import Path

from millimcp import Server, ServerConfig

server = Server("soak", config=ServerConfig(state_key=b"s" * 32))


@server.tool()
async def echo(text: str) -> str:
    return text


@server.tool()
async def sleep(ms: int) -> str:
    await asyncio.sleep(ms / 1000)
    return "slept"


@server.tool()
async def big(size: int) -> str:
    """A response of ``size`` bytes (for clients that leave in the middle of it)."""
    return "x" * size


def _rss() -> int:
    pages = Path("/proc/self/statm").read_text().split()[1]
    return int(pages) * resource.getpagesize()


@server.tool()
async def stats() -> list[int]:
    """[RSS bytes, open file descriptors, asyncio tasks] of this process."""
    return [_rss(), len(os.listdir("/proc/self/fd")), len(asyncio.all_tasks())]

"""The server of tests/integration/http/test_fastpath.py.

Backpressure, timeouts, offloading, big results."""

from __future__ import annotations

import asyncio
import collections
import os
import threading
import time

from millimcp import Server, ServerConfig
from millimcp.resilience import ConcurrencyLimit

server = Server(
    "fastpath-test-server",
    config=ServerConfig(tool_timeout_s=20.0, sync_workers=4, process_workers=1),
)

_gates: collections.defaultdict[str, asyncio.Event] = collections.defaultdict(asyncio.Event)
_sync_gates: dict[str, threading.Event] = {}
_sync_lock = threading.Lock()
_cancelled: list[str] = []


def _sync_gate(tag: str) -> threading.Event:
    with _sync_lock:
        return _sync_gates.setdefault(tag, threading.Event())


@server.tool(concurrency=ConcurrencyLimit(max_in_flight=10, max_queued=20, retry_after_s=2))
async def gated(tag: str, n: int) -> str:
    """Waits until ``open_gate(tag)``; at most 10 run and 20 wait."""
    await _gates[tag].wait()
    return f"{tag} {n}"


@server.tool()
async def gated_load() -> list[int]:
    """[running, waiting] calls of ``gated`` (test-only peek at the tool's limiter)."""
    limiter = server._tool_limiters["gated"]
    return [limiter.in_flight, limiter.queued]


@server.tool()
async def open_gate(tag: str) -> str:
    _gates[tag].set()
    return "open"


@server.tool()
async def echo(text: str) -> str:
    return text


@server.tool(timeout=0.3)
async def stuck(tag: str) -> str:
    """Sleeps far past its 0.3 s timeout; records that it was cancelled."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        _cancelled.append(tag)
        raise
    return "never"


@server.tool()
async def cancelled() -> list[str]:
    return list(_cancelled)


@server.tool(timeout=0.3)
def stuck_sync(seconds: float) -> str:
    """A sync tool past its timeout: answered at once, its thread runs on."""
    time.sleep(seconds)
    return "late"


@server.tool()
def wait_in_thread(tag: str) -> str:
    """Blocks its thread until ``release_thread(tag)`` (an async tool) runs on the loop."""
    return "released" if _sync_gate(tag).wait(20) else "never released"


@server.tool()
async def release_thread(tag: str) -> str:
    _sync_gate(tag).set()
    return "set"


@server.tool(executor="process")
def cpu_bound(n: int) -> list[int]:
    """Runs in the process pool: returns [sum of squares below n, worker pid]."""
    return [sum(i * i for i in range(n)), os.getpid()]


@server.tool()
async def server_pid() -> int:
    return os.getpid()


@server.tool()
async def big(kb: int) -> str:
    """About ``kb`` KiB of JSON-like text."""
    row = '{"id": %d, "name": "item %d", "tags": ["a", "b"], "price": %d.5}, '
    parts: list[str] = []
    size, i = 0, 0
    while size < kb * 1024:
        part = row % (i, i, i % 97)
        parts.append(part)
        size += len(part)
        i += 1
    return "".join(parts)

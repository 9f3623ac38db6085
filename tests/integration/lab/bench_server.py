"""A millimcp server for the bench tests.

Served as ``python -m millimcp serve tests.integration.lab.bench_server``.

``stall_once`` blocks the whole server (``time.sleep`` on the event loop, so every call in
flight waits) exactly once per key: on the first call that arrives ``after_s`` or more after
the key's first call. ``misbehave`` answers its key's first call and fails every later one
in the way ``kind`` says, to show each error kind.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from millimcp import Server, ToolError
from millimcp.errors import InvalidParams

server = Server("lab-bench-server", version="1.0.0")

_first_seen: dict[str, float] = {}
_stalled: set[str] = set()
_calls: Counter[str] = Counter()


@server.tool(annotations={"readOnlyHint": True})
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
async def stall_once(key: str, after_s: float = 1.0, stall_s: float = 1.0) -> str:
    """Block the server for ``stall_s`` once, ``after_s`` after the key's first call."""
    now = time.monotonic()
    first = _first_seen.setdefault(key, now)
    if key not in _stalled and now - first >= after_s:
        _stalled.add(key)
        time.sleep(stall_s)  # noqa: ASYNC251 (on purpose: the whole server stalls)
    return key


@server.tool()
async def misbehave(key: str, kind: str, every: int = 1) -> str:
    """The key's first call succeeds; then every ``every``-th call fails: ``tool`` with
    isError, ``rpc`` with a JSON-RPC error (-32602), ``slow`` by taking 2 s."""
    _calls[key] += 1
    number = _calls[key]
    if number == 1 or number % every:
        return "ok"
    if kind == "tool":
        raise ToolError(f"call {number} fails")
    if kind == "rpc":
        raise InvalidParams(f"call {number} is refused")
    await asyncio.sleep(2.0)
    return "late"

"""A millimcp server for the client core's tests (served by ``millimcp serve``).

Counters and cancellation records live in the process, so tests can ask the server what it
saw (``seen``, ``cancelled``).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from millimcp import Context, Server, ServerConfig

server = Server(
    "client-core-test-server",
    version="2.0.0",
    instructions="Tools for the client core's tests.",
    config=ServerConfig(state_key=b"c" * 32, list_ttl_ms=60_000),
)

_seen: Counter[str] = Counter()
_cancelled: list[str] = []


@server.tool(annotations={"readOnlyHint": True})
async def echo(text: str) -> str:
    return text


@server.tool()
async def bump(tag: str) -> int:
    """Not idempotent: counts its calls per tag."""
    _seen[tag] += 1
    return _seen[tag]


@server.tool(annotations={"readOnlyHint": True})
async def seen(tag: str) -> int:
    return _seen[tag]


@server.tool()
async def slow(seconds: float, tag: str) -> str:
    """Sleeps; records its tag if it gets cancelled."""
    _seen[tag] += 1
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _cancelled.append(tag)
        raise
    return "done"


@server.tool(annotations={"readOnlyHint": True})
async def cancelled() -> list[str]:
    return list(_cancelled)


@server.tool(timeout=0.3)
async def quick_or_bust(seconds: float, tag: str) -> str:
    """Advertises a 0.3 s timeout; sleeps ``seconds``."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _cancelled.append(tag)
        raise
    return "in time"


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    for step in range(steps):
        await ctx.report_progress(step + 1, total=steps, message=f"step {step + 1}")
    return f"{steps} steps"


@server.tool()
async def crawl(steps: int, pause: float, ctx: Context) -> str:
    """Reports progress every ``pause`` seconds: longer than a short deadline in total."""
    for step in range(steps):
        await asyncio.sleep(pause)
        await ctx.report_progress(step + 1, total=steps)
    return "crawled"


@server.tool()
async def ask_name(ctx: Context) -> str:
    answer = await ctx.elicit(
        "Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}
    )
    return f"hello {(answer.content or {}).get('name')} ({answer.action})"


@server.tool()
async def ask_twice(ctx: Context) -> str:
    first = await ctx.elicit("First?", {"type": "object", "properties": {}}, key="first")
    roots = await ctx.list_roots()
    return f"{first.action} {[root.uri for root in roots]}"


@server.tool()
async def think(question: str, ctx: Context) -> str:
    answer = await ctx.sample(question, max_tokens=10)
    content: Any = answer.content
    return f"{answer.model}: {content.get('text') if isinstance(content, dict) else content}"


@server.tool(headers={"region": "Region", "tenant": "Tenant"})
async def regional(region: str, tenant: int, query: str) -> str:
    return f"{region}/{tenant}: {query}"


@server.tool(
    input_schema={
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "string", "x-mcp-header": "X"}}
        },
    }
)
async def bad_header(items: list[str] | None = None) -> str:
    return "never listed"


@server.tool(annotations={"readOnlyHint": True})
async def trace(ctx: Context) -> str:
    """The traceparent the request carried."""
    return (ctx.meta.traceparent if ctx.meta is not None else None) or ""


@server.tool(annotations={"readOnlyHint": True})
async def big(size: int) -> str:
    """A long, compressible text (compressed by the server above 1 KiB)."""
    return "millimcp " * (size // 9)


@server.tool()
async def announce() -> str:
    server.notify_list_changed("tools")
    return "announced"


@server.tool()
async def touch(uri: str) -> str:
    server.notify_resource_updated(uri)
    return "touched"


@server.resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    return "static text"


@server.resource("test://blob", mime_type="application/octet-stream")
def blob() -> bytes:
    return b"\x00\x01\x02"


@server.resource("orders://{order_id}", mime_type="application/json")
async def order(order_id: str) -> dict[str, str]:
    return {"order_id": order_id}


@server.prompt()
def summarize(topic: str, style: str = "short") -> str:
    """Summarize a topic."""
    return f"Summarize {topic} in a {style} way."


@server.completion()
def complete(ref: Any, argument: Any, context: dict[str, str]) -> list[str]:
    return [v for v in ("short", "long", "limerick") if v.startswith(argument.value)]

"""A small millimcp server for the HTTP and interop tests (served by ``millimcp serve``)."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

import msgspec

from millimcp import Context, Server, ServerConfig, ToolError

server = Server(
    "basic-test-server",
    version="1.2.3",
    instructions="Tools for millimcp's own tests.",
    config=ServerConfig(page_size=5, state_key=b"k" * 32),
)

_cancelled: list[str] = []


class Order(msgspec.Struct):
    id: int
    items: list[str]
    total: float


@dataclass
class Point:
    x: int
    y: int


@server.tool(annotations={"readOnlyHint": True})
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
async def echo_int(value: int) -> int:
    """Return the integer unchanged (any size)."""
    return value


@server.tool()
async def get_order(order_id: int) -> Order:
    """A typed result: structuredContent plus a JSON text mirror."""
    return Order(id=order_id, items=["apple", "pear"], total=3.5)


@server.tool(text_mirror=False)
def move(point: Point, dx: int = 1) -> Point:
    """A sync tool with a dataclass argument and no text mirror."""
    return Point(point.x + dx, point.y)


@server.tool()
def which_thread() -> str:
    """A sync tool: it reports the thread it ran on."""
    return threading.current_thread().name


@server.tool()
def block(seconds: float) -> str:
    """A blocking sync tool (time.sleep), to prove it does not stall the loop."""
    time.sleep(seconds)
    return "unblocked"


@server.tool()
async def fail(message: str) -> str:
    raise ToolError(message)


@server.tool()
async def crash() -> str:
    raise RuntimeError("boom")


@server.tool(timeout=0.2)
async def too_slow() -> str:
    """Sleeps past its own timeout."""
    await asyncio.sleep(5)
    return "never"


@server.tool()
async def slow(seconds: float, tag: str) -> str:
    """Sleeps; records its tag if it gets cancelled."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _cancelled.append(tag)
        raise
    return "done"


@server.tool()
async def cancelled_tags() -> list[str]:
    return list(_cancelled)


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    for step in range(steps):
        await ctx.report_progress(step + 1, total=steps)
        await ctx.log("info", f"step {step + 1}")
    return f"{steps} steps"


@server.tool()
async def ask_name(ctx: Context) -> str:
    answer = await ctx.elicit(
        "Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}
    )
    return f"hello {(answer.content or {}).get('name')}"


@server.tool()
async def touch(uri: str) -> str:
    server.notify_resource_updated(uri)
    return "touched"


@server.tool()
async def announce() -> str:
    """Tells listeners (and handshake-era sessions) that the tool list changed."""
    server.notify_list_changed("tools")
    return "announced"


@server.tool()
async def tasks() -> int:
    """How many asyncio tasks the server's event loop has (for leak checks)."""
    return len(asyncio.all_tasks())


@server.tool()
def shout(text: str) -> str:
    """Prints to stdout: over stdio that must not reach the protocol stream."""
    print(f"SHOUT {text}")
    return text.upper()


for index in range(6):

    @server.tool(name=f"filler_{index}")
    async def filler() -> str:
        return "filler"


@server.resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("orders://{order_id}", mime_type="application/json")
async def order_resource(order_id: str) -> dict[str, str]:
    return {"order_id": order_id}


@server.prompt()
def test_simple_prompt() -> str:
    """A prompt without arguments."""
    return "This is a simple prompt for testing."


@server.prompt()
def summarize(topic: str, style: str = "short") -> str:
    """Summarize a topic."""
    return f"Summarize {topic} in a {style} way."

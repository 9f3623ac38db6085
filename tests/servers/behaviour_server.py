"""The server of the behaviour suite (tests/behaviour): one of everything the spec asks for.

Imported in-process for the in-memory runs and served by ``python -m millimcp serve
tests.servers.behaviour_server:server`` (HTTP, or ``--stdio``) for the others.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

from millimcp import Context, Server, ServerConfig, ToolError
from millimcp.protocol.types import CompleteArgument, CompletionRef, TextContent

server = Server(
    "behaviour",
    version="1.0.0",
    instructions="Tools, resources and prompts for the behaviour suite.",
    config=ServerConfig(page_size=3),  # tools/list takes several pages
)


class Sum(TypedDict):
    sum: int


@server.tool(annotations={"readOnlyHint": True})
async def echo(text: str) -> str:
    """Say it back."""
    return text


@server.tool
async def add(a: int, b: int) -> Sum:
    """Add two integers (structured result)."""
    return {"sum": a + b}


@server.tool
async def fail() -> str:
    """Always fails, as a tool may: the model reads the error."""
    raise ToolError("it failed on purpose")


@server.tool
async def count(ctx: Context, to: int) -> str:
    """Report progress from 1 to ``to``."""
    for step in range(1, to + 1):
        await ctx.report_progress(step, total=to, message=f"step {step}")
    return f"counted to {to}"


@server.tool
async def chatty(ctx: Context) -> str:
    """Log a message to the client (when the client's level lets it through)."""
    await ctx.info("hello from the server")
    return "logged"


@server.tool
async def greet(ctx: Context) -> str:
    """Ask the user their name (elicitation)."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    answer = await ctx.elicit("What is your name?", schema)
    if answer.action != "accept" or answer.content is None:
        return "no name"
    return f"hello {answer.content['name']}"


@server.tool
async def ask_model(ctx: Context) -> str:
    """Ask the client's model (sampling)."""
    result = await ctx.sample("Say hi", max_tokens=8)
    content: Any = result.content
    text = content.get("text") if isinstance(content, dict) else None
    return f"the model said {text}"


@server.tool
async def where(ctx: Context) -> str:
    """The client's roots."""
    return ",".join(root.uri for root in await ctx.list_roots())


@server.tool
async def sleepy(seconds: float) -> str:
    """Sleep (for deadlines and cancellation)."""
    await asyncio.sleep(seconds)
    return "rested"


@server.tool
async def grow(name: str) -> str:
    """Register one more tool (the tool list changes)."""

    async def extra() -> str:
        return name

    server.tool(name=name, description="Registered at run time.")(extra)
    return f"added {name}"


@server.tool
async def touch(uri: str) -> str:
    """Announce that a resource changed."""
    server.notify_resource_updated(uri)
    return f"touched {uri}"


@server.resource("info://about", mime_type="text/plain", ttl_ms=5000, cache_scope="public")
async def about() -> str:
    return "a server for the behaviour suite"


@server.resource("data://blob", mime_type="application/octet-stream")
async def blob() -> bytes:
    return bytes(range(8))


@server.resource("greeting://{name}")
async def greeting(name: str) -> str:
    return f"hello {name}"


@server.prompt
def summary(topic: str, style: str = "short") -> str:
    """Summarize a topic."""
    return f"Write a {style} summary of {topic}."


@server.prompt(name="two_messages")
def two_messages() -> list[Any]:
    return ["first", TextContent(text="second")]


@server.completion
def complete(ref: CompletionRef, argument: CompleteArgument, context: dict[str, str]) -> list[str]:
    topics = ["mcp", "msgspec", "millimcp", "python"]
    return [topic for topic in topics if topic.startswith(argument.value)]

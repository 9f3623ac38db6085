"""The official MCP Python SDK's ``MCPServer`` (``mcp`` 2.3.0) as a peer of millimcp's client.

``python tests/servers/official_server.py --stdio`` serves stdio; ``--port N`` serves its
Streamable HTTP app (stateful: handshake-era sessions, and the SDK's single-exchange path
for requests of the 2026-07-28 era) on 127.0.0.1. Everything is the SDK's own API:

- tools: ``echo`` (read-only), ``weather`` (structured content from a pydantic return
  type), ``count`` (progress), ``ask_name`` (elicitation), ``ask_model`` (sampling),
  ``my_roots`` (roots) — the last three through ``Resolve`` markers, which the SDK sends as
  server-to-client requests in the handshake era and as an ``input_required`` result
  (MRTR) in the modern era;
- resources: ``test://static-text`` and the template ``orders://{order_id}``;
- prompts: ``greet(name)``.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Annotated

from mcp.server.mcpserver import (
    Context,
    Elicit,
    ListRoots,
    MCPServer,
    Resolve,
    Sample,
)
from mcp.types import (
    CreateMessageResult,
    ListRootsResult,
    SamplingMessage,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel

server = MCPServer("official-interop", version="2.3.0", instructions="The official SDK.")


class Weather(BaseModel):
    city: str
    temperature: float
    conditions: str


class Name(BaseModel):
    name: str


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def echo(text: str) -> str:
    """Returns its argument."""
    return text


@server.tool()
async def weather(city: str) -> Weather:
    """The weather in a city, as structured content."""
    return Weather(city=city, temperature=21.5, conditions="sunny")


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    """Reports progress `steps` times, then answers."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, total=steps, message=f"step {step}")
        await asyncio.sleep(0.01)
    return f"counted to {steps}"


def name_question() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool()
async def ask_name(name: Annotated[Name, Resolve(name_question)]) -> str:
    """Asks the user's name (elicitation)."""
    return f"Hello, {name.name}!"


def capital_question() -> Sample:
    question = SamplingMessage(
        role="user", content=TextContent(type="text", text="What is the capital of France?")
    )
    return Sample([question], max_tokens=20)


@server.tool()
async def ask_model(answer: Annotated[CreateMessageResult, Resolve(capital_question)]) -> str:
    """Asks the client's model a question (sampling)."""
    content = answer.content
    text = content.text if isinstance(content, TextContent) else "?"
    return f"The model said: {text}"


def roots_question() -> ListRoots:
    return ListRoots()


@server.tool()
async def my_roots(roots: Annotated[ListRootsResult, Resolve(roots_question)]) -> str:
    """Lists the client's roots."""
    return ", ".join(str(root.uri) for root in roots.roots)


@server.resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "static text from the official SDK"


@server.resource("orders://{order_id}", mime_type="application/json")
def order(order_id: str) -> str:
    """An order by id."""
    return f'{{"order": "{order_id}"}}'


@server.prompt()
def greet(name: str) -> str:
    """Greets someone."""
    return f"Please greet {name}."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.stdio:
        server.run("stdio")
        return
    import uvicorn

    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

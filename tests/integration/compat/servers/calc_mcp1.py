"""A fixture server written for the official SDK's ``FastMCP`` (mcp 1.x), unmodified.

Run on its real framework (``python calc_mcp1.py``) or on millimcp
(``python -m millimcp.compat run calc_mcp1.py``); the differential harness compares the two.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.fastmcp.prompts.base import AssistantMessage, UserMessage
from mcp.server.fastmcp.utilities.types import Image
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

mcp = FastMCP("calc-mcp1", instructions="Arithmetic for tests.")

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


class Point(BaseModel):
    x: float
    y: float = Field(0.0, description="vertical")


@mcp.tool()
def calc(
    expression: Annotated[str, Field(description="an arithmetic expression")], digits: int = 2
) -> str:
    """Evaluate an arithmetic expression.

    Only + - * / and parentheses.
    """
    if set(expression) - set("0123456789+-*/(). "):
        raise ToolError(f"not arithmetic: {expression!r}")
    return str(round(eval(expression), digits))  # checked above


@mcp.tool(title="Add two numbers", annotations=ToolAnnotations(readOnlyHint=True))
async def add(a: int, b: int = Field(10, description="the second number")) -> int:
    return a + b


@mcp.tool()
def words(text: str) -> list[str]:
    """Split text into words."""
    return text.split()


@mcp.tool()
def point(x: float, y: float = 0.0) -> Point:
    return Point(x=x, y=y)


@mcp.tool()
def stats(values: list[float]) -> dict[str, float]:
    """Min and max of a list (JSON strings are parsed first)."""
    return {"min": min(values), "max": max(values)}


@mcp.tool()
def untyped(a, b=1):  # type: ignore[no-untyped-def]
    return {"a": a, "b": b}


@mcp.tool()
def crash(reason: str) -> str:
    raise ValueError(f"secret detail: {reason}")


@mcp.tool()
def pixel() -> Image:
    return Image(data=PNG, format="png")


@mcp.tool()
async def steps(n: int, ctx: Context) -> str:
    await ctx.info(f"running {n} steps")
    for i in range(n):
        await ctx.report_progress(i + 1, n)
    contents = await ctx.read_resource("config://app")
    return f"{n} steps, config {next(iter(contents)).content}"


@mcp.resource("config://app")
def config() -> str:
    """The app's configuration."""
    return "debug=false"


@mcp.resource("users://{user_id}/profile", mime_type="application/json")
def profile(user_id: int) -> dict[str, object]:
    return {"id": user_id, "name": f"user{user_id}"}


@mcp.prompt()
def review(code: str, language: str = "python") -> str:
    """Review some code."""
    return f"Please review this {language} code:\n{code}"


@mcp.prompt(title="Debug session")
def debug(error: str) -> list[object]:
    return [UserMessage(f"I see: {error}"), AssistantMessage("Let us look at it.")]


if __name__ == "__main__":
    mcp.run()

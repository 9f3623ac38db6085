"""A fixture server written for PrefectHQ's ``fastmcp``, unmodified.

Run on its real framework (``python calc_fastmcp.py``) or on millimcp
(``python -m millimcp.compat run calc_fastmcp.py``); the differential harness compares the two.
"""

from __future__ import annotations

from typing import Annotated

from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.dependencies import get_context
from fastmcp.utilities.types import Image
from pydantic import BaseModel, Field

mcp = FastMCP("calc-fastmcp", instructions="Arithmetic for tests.")

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


class Point(BaseModel):
    x: float
    y: float = Field(0.0, description="vertical")


@mcp.tool
def calc(expression: str, digits: int = 2) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: an arithmetic expression
        digits: how many decimals to keep
    """
    if set(expression) - set("0123456789+-*/(). "):
        raise ToolError(f"not arithmetic: {expression!r}")
    return str(round(eval(expression), digits))  # checked above


@mcp.tool("add", title="Add two numbers", annotations={"readOnlyHint": True})
async def add_numbers(
    a: int, b: Annotated[int, Field(description="the second number")] = 10
) -> int:
    return a + b


def words(text: str) -> list[str]:
    """Split text into words."""
    return text.split()


mcp.tool(words, name="split_words")


@mcp.tool(tags={"geometry"})
def point(x: float, y: float = 0.0) -> Point:
    return Point(x=x, y=y)


@mcp.tool
def crash(reason: str) -> str:
    raise ValueError(f"detail: {reason}")


@mcp.tool
def pixel() -> Image:
    return Image(data=PNG, format="png")


@mcp.tool
async def steps(n: int, ctx: Context) -> str:
    await ctx.info(f"running {n} steps")
    for i in range(n):
        await ctx.report_progress(i + 1, n)
    same = get_context() is ctx
    return f"{n} steps, same context {same}"


@mcp.resource("config://app")
def config() -> str:
    """The app's configuration."""
    return "debug=false"


@mcp.prompt
def review(code: str, language: str = "python") -> str:
    """Review some code."""
    return f"Please review this {language} code:\n{code}"


if __name__ == "__main__":
    mcp.run()

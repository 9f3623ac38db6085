"""The compat shims in memory: definitions, validation, results and error text per flavour
(the differential harness in tests/integration/compat checks the same against the real
frameworks over stdio and HTTP)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import mcp_types
import pytest
from pydantic import BaseModel, Field

from millimcp.compat import fastmcp, mcp1, mcp2
from millimcp.compat.app import CompatServer
from millimcp.protocol.types import ElicitResult
from millimcp.testing import connect

PNG = b"\x89PNG\r\n\x1a\n"


class Point(BaseModel):
    x: float
    y: float = 0.0


def _register(server: CompatServer) -> None:
    @server.tool()
    def calc(
        expression: Annotated[str, Field(description="an expression")], digits: int = 2
    ) -> str:
        """Evaluate."""
        if "x" in expression:
            raise mcp2.ToolError("not arithmetic")
        if "!" in expression:
            raise ValueError("secret")
        return str(round(eval(expression), digits))

    @server.tool(
        title="Add", annotations=mcp_types.ToolAnnotations.model_validate({"readOnlyHint": True})
    )
    async def add(a: int, b: int = Field(10, description="second")) -> int:
        return a + b

    @server.tool()
    def words(text: str) -> list[str]:
        return text.split()

    @server.tool()
    def stats(values: list[float]) -> dict[str, float]:
        return {"min": min(values)}

    @server.tool()
    def point(x: float) -> Point:
        return Point(x=x)

    @server.tool()
    def raw(a, b=1):  # type: ignore[no-untyped-def]
        return {"a": a, "b": b}

    @server.tool()
    def pixel() -> mcp2.Image:
        return mcp2.Image(data=PNG, format="png")

    @server.tool(structured_output=False)
    def blocks() -> list[Any]:
        return [mcp_types.TextContent(type="text", text="one"), mcp1.Audio(data=b"a")]

    @server.tool()
    def result() -> mcp_types.CallToolResult:
        return mcp_types.CallToolResult.model_validate(
            {"content": [{"type": "text", "text": "done"}], "isError": False}
        )


async def test_mcp2_definitions_are_pydantic_schemas() -> None:
    server = mcp2.MCPServer("t")
    _register(server)
    async with connect(server.server) as client:
        tools = {t.name: t for t in await client.list_tools()}
    calc = tools["calc"]
    assert calc.description == "Evaluate."
    assert calc.input_schema["title"] == "calcArguments"
    assert calc.input_schema["properties"]["expression"] == {
        "description": "an expression",
        "title": "Expression",
        "type": "string",
    }
    assert calc.output_schema == {
        "properties": {"result": {"title": "Result", "type": "string"}},
        "required": ["result"],
        "title": "calcOutput",
        "type": "object",
    }
    assert tools["add"].input_schema["properties"]["b"]["default"] == 10
    assert tools["add"].annotations is not None
    assert tools["add"].annotations.read_only_hint
    assert tools["add"].title == "Add"
    assert tools["stats"].output_schema is not None
    assert tools["stats"].output_schema["title"] == "statsDictOutput"
    assert tools["point"].output_schema is not None
    assert tools["point"].output_schema["title"] == "Point"
    assert tools["raw"].output_schema is None
    assert tools["raw"].input_schema["properties"]["a"] == {"title": "a", "type": "string"}
    assert tools["pixel"].output_schema is None
    assert tools["raw"].description == ""


async def test_mcp2_results_and_errors() -> None:
    server = mcp2.MCPServer("t")
    _register(server)
    async with connect(server.server) as client:
        calc = await client.call_tool("calc", {"expression": "1/3"})
        assert calc.structured_content == {"result": "0.33"}
        assert calc.text == "0.33"
        tool_error = await client.call_tool("calc", {"expression": "x"})
        assert tool_error.is_error
        assert tool_error.text == "Error executing tool calc: not arithmetic"
        crash = await client.call_tool("calc", {"expression": "!"})
        assert crash.is_error
        assert crash.text == "Error executing tool calc"
        invalid = await client.call_tool("calc", {})
        assert invalid.is_error
        assert invalid.text.startswith("Error executing tool calc: 1 valid")
        lax = await client.call_tool("add", {"a": "5"})
        assert lax.structured_content == {"result": 15}
        words = await client.call_tool("words", {"text": "a b"})
        assert [b.text for b in words.content] == ["a", "b"]  # type: ignore[union-attr]
        assert words.structured_content == {"result": ["a", "b"]}
        parsed = await client.call_tool("stats", {"values": "[3, 1]"})
        assert parsed.structured_content == {"min": 1.0}
        point = await client.call_tool("point", {"x": 2})
        assert point.structured_content == {"x": 2.0, "y": 0.0}
        assert point.text == '{\n  "x": 2.0,\n  "y": 0.0\n}'
        raw = await client.call_tool("raw", {"a": "z"})
        assert raw.structured_content is None
        assert raw.text == '{\n  "a": "z",\n  "b": 1\n}'
        pixel = await client.call_tool("pixel")
        assert pixel.content[0].mime_type == "image/png"  # type: ignore[union-attr]
        blocks = await client.call_tool("blocks")
        assert [type(b).__name__ for b in blocks.content] == ["TextContent", "AudioContent"]
        assert blocks.content[1].mime_type == "audio/wav"  # type: ignore[union-attr]
        assert (await client.call_tool("result")).text == "done"


async def test_mcp1_shows_the_crash_text() -> None:
    server = mcp1.FastMCP("t", port=9001)
    assert server.settings.port == 9001
    _register(server)
    async with connect(server.server) as client:
        crash = await client.call_tool("calc", {"expression": "!"})
    assert crash.text == "Error executing tool calc: secret"


def test_decorators_without_parentheses_are_refused() -> None:
    server = mcp1.FastMCP()
    with pytest.raises(TypeError, match="Did you forget to call it"):
        server.tool(lambda: 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        server.prompt(lambda: 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        server.resource(lambda: 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name for lambda"):
        server.add_tool(lambda: 1)
    with pytest.raises(TypeError, match="unexpected settings keyword"):
        mcp1.FastMCP(no_such_setting=1)


async def test_fastmcp_forms_titles_tags_and_docstrings(tmp_path: Path) -> None:
    server = fastmcp.FastMCP("f", mask_error_details=True)

    @server.tool
    def calc(expression: str, digits: int = 2) -> str:
        """Evaluate an expression.

        Args:
            expression: what to evaluate
                (arithmetic only)
            digits: decimals kept

        Returns:
            the value
        """
        if "!" in expression:
            raise ValueError("secret")
        return str(round(eval(expression), digits))

    def shout(text: str) -> str:
        return text.upper()

    server.tool(shout, name="shout_it", tags={"b", "a"})

    @server.tool("schema", output_schema={"type": "object", "properties": {}})
    def schema() -> dict[str, int]:
        return {"n": 1}

    note = tmp_path / "note.txt"
    note.write_text("hello")

    @server.tool
    def attachment() -> fastmcp.File:
        return fastmcp.File(path=note)

    @server.tool
    def context_check(ctx: fastmcp.Context[Any]) -> bool:
        return fastmcp.get_context() is ctx

    @server.tool(timeout=5)
    async def listing() -> list[int]:
        return [1, 2]

    @server.tool(annotations={"title": "Count the words", "readOnlyHint": True})
    def count(text: str) -> int:
        """Count.

        :param text: the words
        """
        return len(text.split())

    @server.prompt
    def ask(topic: str) -> str:
        return f"Tell me about {topic}"

    async with connect(server.server) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert tools["calc"].description == "Evaluate an expression."
        assert tools["calc"].title == "Calc"
        assert tools["calc"].input_schema == {
            "additionalProperties": False,
            "properties": {
                "digits": {"default": 2, "description": "decimals kept", "type": "integer"},
                "expression": {
                    "description": "what to evaluate\n(arithmetic only)",
                    "type": "string",
                },
            },
            "required": ["expression"],
            "type": "object",
        }
        assert tools["calc"].output_schema is not None
        assert tools["calc"].output_schema["x-fastmcp-wrap-result"] is True
        assert tools["shout_it"].meta == {"fastmcp": {"tags": ["a", "b"]}}
        assert tools["shout_it"].title == "Shout It"
        assert tools["schema"].output_schema == {"type": "object", "properties": {}}
        assert tools["listing"].meta is not None
        assert tools["listing"].meta["dev.millimcp/timeoutMs"] == 5000
        crash = await client.call_tool("calc", {"expression": "!"})
        assert crash.text == "Error calling tool 'calc'"
        listed = await client.call_tool("listing")
        assert listed.text == "[1,2]"
        assert tools["count"].title == "Count the words"  # the annotations' title first
        assert tools["count"].description == "Count."  # Sphinx-style, read as fastmcp reads it
        assert tools["count"].input_schema["properties"]["text"]["description"] == "the words"
        invalid = await client.call_tool("count", {"text": 3})
        assert invalid.is_error
        assert invalid.text is not None
        assert invalid.text.startswith("1 validation error for call[count]\ntext\n"), invalid.text
        file = await client.call_tool("attachment")
        assert type(file.content[0]).__name__ == "EmbeddedResource"
        assert file.content[0].resource.text == "hello"  # type: ignore[union-attr]
        assert (await client.call_tool("context_check")).structured_content == {"result": True}
        prompts = await client.list_prompts()
        assert prompts[0].arguments is not None
        assert "JSON schema" in (prompts[0].arguments[0].description or "")
        got = await client.get_prompt("ask", {"topic": "owls"})
        assert got.messages[0].content.text == "Tell me about owls"  # type: ignore[union-attr]


@contextlib.asynccontextmanager
async def _lifespan(server: Any) -> AsyncIterator[dict[str, str]]:
    yield {"db": f"connected to {server.name}"}


async def test_context_lifespan_logging_progress_resources_and_elicitation() -> None:
    server = mcp1.FastMCP("ctx", lifespan=_lifespan)
    seen: dict[str, Any] = {}

    class Answer(BaseModel):
        name: str

    @server.resource("config://app")
    def config() -> str:
        return "debug=false"

    @server.resource("users://{user_id}")
    async def user(user_id: int) -> dict[str, int]:
        return {"id": user_id}

    @server.tool()
    async def inspect_ctx(ctx: mcp1.Context[Any, Any, Any]) -> str:
        seen["lifespan"] = ctx.request_context.lifespan_context
        seen["request_id"] = ctx.request_id
        seen["client_id"] = ctx.client_id
        seen["server"] = ctx.fastmcp
        await ctx.info("hello", step=1)
        await ctx.debug("quiet")
        await ctx.log("warning", "careful", logger_name="x")
        await ctx.report_progress(1, 2, "half")
        contents = await ctx.read_resource("config://app")
        templated = await ctx.read_resource("users://7")
        answer = await ctx.elicit("Your name?", schema=Answer)
        text = f"{contents[0].content!s} {templated[0].content!s}"
        return f"{text} {answer.action} {answer.data.name}"

    async def elicitation(params: Any) -> ElicitResult:
        return ElicitResult(action="accept", content={"name": "Ada"})

    async with connect(server.server, elicitation=elicitation) as client:
        result = await client.call_tool("inspect_ctx")
        resources = await client.list_resources()
        templates = await client.list_resource_templates()
    assert result.text == 'debug=false {\n  "id": 7\n} accept Ada', result.text
    assert seen["lifespan"] == {"db": "connected to ctx"}
    assert seen["request_id"]
    assert seen["client_id"] is None
    assert seen["server"] is server
    assert resources[0].mime_type == "text/plain"
    assert resources[0].description == ""
    assert templates[0].uri_template == "users://{user_id}"


async def test_prompts_messages() -> None:
    server = mcp2.MCPServer("p")

    @server.prompt(title="Debug")
    def debug(error: str, verbose: bool = False) -> list[Any]:
        return [
            mcp2.UserMessage(f"I see {error}"),
            mcp2.AssistantMessage("Let us look."),
            {"role": "user", "content": {"type": "text", "text": "ok"}},
            "plain",
        ]

    async with connect(server.server) as client:
        prompt = (await client.list_prompts())[0]
        got = await client.get_prompt("debug", {"error": "KeyError"})
    assert prompt.title == "Debug"
    assert prompt.description == ""
    assert [m.role for m in got.messages] == ["user", "assistant", "user", "user"]
    assert got.messages[1].content.text == "Let us look."  # type: ignore[union-attr]

"""Interop: the official Python SDK client (`mcp` 2.3.0) against the server at `server_url`.

The client is pinned to protocol revision 2026-07-28 ("modern": no initialize
handshake, per-request `_meta` envelope, `MCP-Protocol-Version` / `Mcp-Method` /
`Mcp-Name` headers on every POST). These tests only need a `server_url` fixture
(`http://127.0.0.1:PORT/mcp`) for a running server that exposes:

* tool `echo(text: str) -> str`, returning `text`;
* resource `test://static-text` (text/plain) with the text
  "This is the content of the static text resource.";
* prompt `test_simple_prompt` (no arguments), one user message with the text
  "This is a simple prompt for testing.".

Nothing here depends on which implementation serves `server_url`.
"""

from __future__ import annotations

import pytest
from mcp import MCPError
from mcp.types import INVALID_PARAMS, CallToolRequestParams, TextContent, TextResourceContents

from tests.integration.interop.peers import (
    MODERN,
    SIMPLE_PROMPT,
    SIMPLE_PROMPT_TEXT,
    STATIC_TEXT,
    STATIC_TEXT_URI,
    WireLog,
    official_client,
    texts,
)

pytestmark = pytest.mark.interop

BIG = 2**70  # 1180591620717411303424: beyond int64/uint64 and beyond exact float64


async def test_client_speaks_2026_07_28(server_url: str) -> None:
    async with official_client(server_url) as client:
        version = client.protocol_version
        handshake = client.session.initialize_result
        tools = await client.list_tools()
    assert version == MODERN
    assert handshake is None
    assert tools.tools


async def test_list_tools(server_url: str) -> None:
    async with official_client(server_url) as client:
        result = await client.list_tools()
    tools = {tool.name: tool for tool in result.tools}
    assert "echo" in tools
    schema = tools["echo"].input_schema
    assert schema.get("type") == "object"
    assert "text" in schema.get("properties", {})


async def test_call_echo(server_url: str) -> None:
    async with official_client(server_url) as client:
        result = await client.call_tool("echo", {"text": "hello"})
    assert result.is_error is not True
    assert texts(result.content) == ["hello"]


async def test_read_static_resource(server_url: str) -> None:
    async with official_client(server_url) as client:
        result = await client.read_resource(STATIC_TEXT_URI)
    assert len(result.contents) == 1
    contents = result.contents[0]
    assert isinstance(contents, TextResourceContents)
    assert str(contents.uri) == STATIC_TEXT_URI
    assert contents.text == STATIC_TEXT
    assert contents.mime_type == "text/plain"


async def test_list_prompts(server_url: str) -> None:
    async with official_client(server_url) as client:
        result = await client.list_prompts()
    prompts = {prompt.name: prompt for prompt in result.prompts}
    assert SIMPLE_PROMPT in prompts
    assert not prompts[SIMPLE_PROMPT].arguments  # None or []


async def test_get_prompt(server_url: str) -> None:
    async with official_client(server_url) as client:
        result = await client.get_prompt(SIMPLE_PROMPT)
    assert len(result.messages) == 1
    message = result.messages[0]
    assert message.role == "user"
    assert isinstance(message.content, TextContent)
    assert message.content.text == SIMPLE_PROMPT_TEXT


async def test_auto_mode_negotiates_modern_via_discover(server_url: str) -> None:
    """`mode="auto"` probes `server/discover`; a 2026-07-28 server must win the probe.

    The SDK falls back to the legacy initialize handshake on *any* discover error
    (404, -32601, ...), so this is the test that catches a broken `server/discover`.
    """
    wire = WireLog()
    async with official_client(server_url, mode="auto", wire=wire) as client:
        version = client.protocol_version
        result = await client.call_tool("echo", {"text": "auto"})
    assert version == MODERN
    assert texts(result.content) == ["auto"]
    methods = [body.get("method") for _, body in wire.requests]
    assert methods[0] == "server/discover"
    assert "initialize" not in methods


async def test_modern_wire_shape(server_url: str) -> None:
    """Every exchange is a self-contained POST; the server hands out no session."""
    wire = WireLog()
    async with official_client(server_url, wire=wire) as client:
        await client.list_tools()
        await client.call_tool("echo", {"text": "wire"})
        await client.read_resource(STATIC_TEXT_URI)
        await client.get_prompt(SIMPLE_PROMPT)
    assert wire.requests, "the client sent nothing"
    for headers, body in wire.requests:
        assert headers["mcp-protocol-version"] == MODERN
        assert headers["mcp-method"] == body["method"]
        assert body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN
        assert "mcp-session-id" not in headers
    assert "initialize" not in [body["method"] for _, body in wire.requests]
    for status, headers in wire.responses:
        assert status == 200
        assert "mcp-session-id" not in headers
        assert headers["content-type"].split(";")[0].strip() in (
            "application/json",
            "text/event-stream",
        )


async def test_call_tool_with_integer_beyond_64_bits(server_url: str) -> None:
    """The client sends `{"text": 2**70}` to `echo`: a 22-digit JSON integer.

    `echo` takes a string, so a correct server rejects the argument; what matters is
    that it answers with a well-formed MCP reply (a tool error result or an
    INVALID_PARAMS JSON-RPC error), not a crash, a transport error or a precision-
    losing coercion. A server that coerces numbers to strings must keep every digit.
    """
    wire = WireLog()
    params = CallToolRequestParams(name="echo", arguments={"text": BIG})
    if str(BIG) not in params.model_dump_json(by_alias=True):
        pytest.skip("the official SDK cannot serialize 2**70 as an exact JSON integer")
    error: MCPError | None = None
    async with official_client(server_url, wire=wire) as client:
        await client.list_tools()
        try:
            result = await client.call_tool("echo", {"text": BIG})
        except MCPError as exc:
            error = exc
        # The server is still healthy afterwards.
        after = await client.call_tool("echo", {"text": "after"})

    if error is not None:
        assert error.code == INVALID_PARAMS, error
    elif result.is_error:
        assert result.content, "a tool error result should explain itself"
    else:
        assert texts(result.content) == [str(BIG)]
    assert texts(after.content) == ["after"]

    literal = b'"text":' + str(BIG).encode()
    sent_exactly = any(literal in raw for raw in wire.raw_bodies)
    assert sent_exactly, "2**70 did not go out as an exact integer"

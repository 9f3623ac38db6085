"""Interop: the official `mcp` 2.3.0 client in the handshake era (2025-11-25), HTTP and stdio.

`Client(..., mode="legacy")` forces the initialize handshake: `initialize`, then
`notifications/initialized`, then plain JSON-RPC. Over Streamable HTTP the server hands out
an `Mcp-Session-Id` that the client sends back with `MCP-Protocol-Version` on every later
request; progress, log messages and the server's `elicitation/create` request come over
SSE, and the client POSTs its answer back. Over stdio the same messages are lines on the
pipes of `python -m millimcp serve tests.servers.basic_server:server --stdio`.

Tools of tests/servers/basic_server.py used here: `echo(text)`, `progress(steps)` (one
progress notification and one info log per step) and `ask_name()` (elicits a name, answers
"hello <name>").
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp.client.context import ClientRequestContext
from mcp.types import (
    ElicitRequestParams,
    ElicitResult,
    LoggingMessageNotificationParams,
    TextContent,
    TextResourceContents,
)

from tests.integration.interop.peers import (
    HANDSHAKE,
    MODERN,
    SIMPLE_PROMPT,
    SIMPLE_PROMPT_TEXT,
    STATIC_TEXT,
    STATIC_TEXT_URI,
    WireLog,
    official_client,
    stdio_command,
    texts,
)

pytestmark = pytest.mark.interop


class Peer:
    """The client-side callbacks, recording what the server sent."""

    def __init__(self, name: str = "Ada") -> None:
        self.name = name
        self.logs: list[LoggingMessageNotificationParams] = []
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.elicitations: list[ElicitRequestParams] = []

    async def on_log(self, params: LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    async def on_elicit(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult:
        self.elicitations.append(params)
        return ElicitResult(action="accept", content={"name": self.name})

    def options(self) -> dict[str, Any]:
        return {"logging_callback": self.on_log, "elicitation_callback": self.on_elicit}


async def _exercise_handshake_era(target: Any, wire: WireLog | None = None) -> Peer:
    """Everything the handshake era must do for the official client, on one connection."""
    peer = Peer()
    async with official_client(target, mode="legacy", wire=wire, **peer.options()) as client:
        handshake = client.session.initialize_result
        assert handshake is not None, "no initialize handshake"
        assert handshake.protocol_version == HANDSHAKE
        assert client.protocol_version == HANDSHAKE
        assert client.session.discover_result is None
        assert handshake.server_info.name == "basic-test-server"
        assert handshake.capabilities.tools is not None
        assert handshake.capabilities.logging is not None

        listed = await client.list_tools()
        assert "echo" in {tool.name for tool in listed.tools}

        echoed = await client.call_tool("echo", {"text": "hello"})
        assert echoed.is_error is not True
        assert texts(echoed.content) == ["hello"]

        read = await client.read_resource(STATIC_TEXT_URI)
        assert len(read.contents) == 1
        contents = read.contents[0]
        assert isinstance(contents, TextResourceContents)
        assert (str(contents.uri), contents.text) == (STATIC_TEXT_URI, STATIC_TEXT)

        prompt = await client.get_prompt(SIMPLE_PROMPT)
        assert [message.role for message in prompt.messages] == ["user"]
        content = prompt.messages[0].content
        assert isinstance(content, TextContent)
        assert content.text == SIMPLE_PROMPT_TEXT

        stepped = await client.call_tool(
            "progress", {"steps": 3}, progress_callback=peer.on_progress
        )
        assert texts(stepped.content) == ["3 steps"]

        asked = await client.call_tool("ask_name", {})
        assert asked.is_error is not True
        assert texts(asked.content) == [f"hello {peer.name}"]

    # Notifications of a call precede its response on the same stream (SSE or stdout), so
    # all of them have been delivered by the time `call_tool` returned.
    assert peer.progress == [(1, 3, None), (2, 3, None), (3, 3, None)]
    assert [(log.level, log.data) for log in peer.logs] == [
        ("info", "step 1"),
        ("info", "step 2"),
        ("info", "step 3"),
    ]
    assert [params.message for params in peer.elicitations] == ["Your name?"]
    return peer


async def test_handshake_era_over_http(server_url: str) -> None:
    wire = WireLog()
    await _exercise_handshake_era(server_url, wire)

    posts = wire.posted()
    assert posts[0]["method"] == "initialize"
    assert posts[0]["params"]["protocolVersion"] == HANDSHAKE
    assert posts[1] == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert "server/discover" not in [body.get("method") for body in posts]
    # The client answered the server's elicitation/create request with a POSTed response.
    answers = [body for body in posts if "method" not in body]
    assert [answer["result"]["content"] for answer in answers] == [{"name": "Ada"}]

    # The initialize response issued a session id: visible ASCII, hard to guess.
    status, head = wire.responses[0]
    assert status == 200
    session_id = head.get("mcp-session-id")
    assert session_id is not None, f"initialize issued no Mcp-Session-Id: {head}"
    assert len(session_id) >= 16
    assert all(0x21 <= ord(char) <= 0x7E for char in session_id)
    assert "mcp-session-id" not in wire.requests[0][0]
    # Every later request (POSTs, the GET stream, the closing DELETE) carries it back, with
    # the negotiated version.
    for headers, body in wire.requests[1:]:
        assert headers.get("mcp-session-id") == session_id, body
        assert headers.get("mcp-protocol-version") == HANDSHAKE, body
        assert "mcp-method" not in headers  # a 2026-07-28 header; the handshake era has none
    assert "GET" in wire.methods  # the stream for server-initiated messages
    assert wire.methods[-1] == "DELETE"  # the client ended its session on exit
    for status, _head in wire.responses:
        assert status in (200, 202), wire.responses


async def test_handshake_era_over_stdio() -> None:
    await _exercise_handshake_era(stdio_command())


async def test_auto_mode_over_stdio_negotiates_modern() -> None:
    """`mode="auto"` over stdio probes `server/discover` first; millimcp answers it, so the
    connection is 2026-07-28 with no initialize handshake."""
    peer = Peer("Grace")
    async with official_client(stdio_command(), mode="auto", **peer.options()) as client:
        version = client.protocol_version
        discovered = client.session.discover_result
        handshake = client.session.initialize_result
        echoed = await client.call_tool("echo", {"text": "auto"})
        # In the modern era an elicitation is an MRTR round trip, still answered by the
        # same callback.
        asked = await client.call_tool("ask_name", {})
    assert version == MODERN
    assert handshake is None
    assert discovered is not None
    assert MODERN in discovered.supported_versions
    assert texts(echoed.content) == ["auto"]
    assert texts(asked.content) == ["hello Grace"]

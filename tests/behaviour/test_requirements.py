"""One test per requirement of the spec, each run over memory, HTTP and stdio, in both eras.

The requirements are listed in :data:`REQUIREMENTS` (what the spec asks, and where); each has
one test below named after it, and a guard checks that the two lists agree. The server is
``tests/servers/behaviour_server.py``; the ``peer`` fixture (``conftest.py``) is a connected
:class:`~millimcp.Client` for one (transport, era).
"""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest

from millimcp import Client
from millimcp.errors import CallTimeout, InvalidParams
from millimcp.protocol.types import (
    BlobResourceContents,
    CompletionRef,
    TextContent,
    TextResourceContents,
)

REQUIREMENTS: dict[str, str] = {
    "lifecycle": "the client and server agree on an era and a version; the server says who it "
    "is (2026-07-28 server/discover; 2025-11-25 initialize)",
    "tools_list": "tools/list returns every tool with its input schema, across pages "
    "(pagination: nextCursor)",
    "tools_call_text": "tools/call returns content blocks",
    "tools_call_structured": "a tool with an output schema returns structuredContent and, for "
    "compatibility, the same JSON as text",
    "tools_call_error": "a tool's own failure is a result with isError, not a protocol error",
    "tools_call_unknown": "calling an unknown tool is -32602 (Invalid params)",
    "tools_call_invalid_arguments": "arguments that do not match the schema fail the call",
    "progress": "a request with a progressToken gets notifications/progress before its result",
    "logging": "notifications/message at the level the client asked for (2025-11-25: the "
    "session's, info by default; 2026-07-28: per request, none unless _meta asks)",
    "the_client_asks_for_a_log_level": "the client's level reaches the server: "
    "io.modelcontextprotocol/logLevel in each request's _meta (2026-07-28), "
    "logging/setLevel (2025-11-25)",
    "elicitation": "a server asks the user through the client (2026-07-28: MRTR, "
    "input_required then a retry; 2025-11-25: elicitation/create on the request's stream)",
    "sampling": "a server asks the client's model (sampling/createMessage)",
    "roots": "a server asks the client's roots (roots/list)",
    "resources_list": "resources/list and resources/templates/list",
    "resources_read": "resources/read of text and blob contents, and of a template's URI",
    "resources_unknown": "reading an unknown resource is -32602",
    "prompts": "prompts/list and prompts/get with arguments",
    "completion": "completion/complete of a prompt argument",
    "list_changed": "a subscriber hears notifications/tools/list_changed when the tools change",
    "resource_updated": "a subscriber hears notifications/resources/updated for its resource",
    "deadline": "a call past its deadline is cancelled on the server, which goes on serving",
}


def test_every_requirement_has_one_test_and_every_test_a_requirement() -> None:
    module = sys.modules[__name__]
    tests = {
        name.removeprefix("test_")
        for name in dir(module)
        if name.startswith("test_")
        and name != test_every_requirement_has_one_test_and_every_test_a_requirement.__name__
    }
    assert tests == set(REQUIREMENTS)


async def test_lifecycle(peer: Client) -> None:
    assert peer.era in ("modern", "handshake")
    expected = "2026-07-28" if peer.era == "modern" else "2025-11-25"
    assert peer.protocol_version == expected
    assert peer.server_info is not None
    assert (peer.server_info.name, peer.server_info.version) == ("behaviour", "1.0.0")
    assert peer.instructions == "Tools, resources and prompts for the behaviour suite."
    assert peer.server_capabilities.tools is not None


async def test_tools_list(peer: Client) -> None:
    tools = {tool.name: tool for tool in await peer.list_tools()}
    assert {"echo", "add", "fail", "count", "greet", "sleepy", "grow", "touch"} <= set(tools)
    assert tools["echo"].input_schema["properties"]["text"]["type"] == "string"
    assert tools["echo"].annotations is not None
    assert tools["echo"].annotations.read_only_hint
    assert tools["add"].output_schema is not None


async def test_tools_call_text(peer: Client) -> None:
    result = await peer.call_tool("echo", {"text": "ünïcode ✓"})
    assert not result.is_error
    assert result.content == [TextContent(text="ünïcode ✓")]


async def test_tools_call_structured(peer: Client) -> None:
    result = await peer.call_tool("add", {"a": 2, "b": 40})
    assert result.structured_content == {"sum": 42}
    assert result.text == '{"sum":42}'


async def test_tools_call_error(peer: Client) -> None:
    result = await peer.call_tool("fail")
    assert result.is_error
    assert result.text == "it failed on purpose"


async def test_tools_call_unknown(peer: Client) -> None:
    with pytest.raises(InvalidParams) as raised:
        await peer.call_tool("no_such_tool")
    assert raised.value.code == -32602


async def test_tools_call_invalid_arguments(peer: Client) -> None:
    result = await peer.call_tool("add", {"a": "two", "b": 40})
    assert result.is_error
    assert "Invalid arguments for tool 'add'" in result.text


async def test_progress(peer: Client) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    result = await peer.call_tool("count", {"to": 3}, on_progress=on_progress)
    assert result.text == "counted to 3"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


async def test_logging(peer: Client, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="millimcp.client.server"):
        result = await peer.call_tool("chatty")
    assert result.text == "logged"
    logged = [r.getMessage() for r in caplog.records if r.name == "millimcp.client.server"]
    if peer.era == "handshake":
        assert logged == ["hello from the server"]
    else:
        assert logged == []  # the request's _meta asked for no log level


async def test_the_client_asks_for_a_log_level(
    peer: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """``set_log_level``: the modern ``_meta`` carries it, a handshake session is told by
    ``logging/setLevel``; a level above the message's keeps it from being sent at all."""

    def logged() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "millimcp.client.server"]

    with caplog.at_level(logging.DEBUG, logger="millimcp.client.server"):
        await peer.set_log_level("warning")
        assert (await peer.call_tool("chatty")).text == "logged"
        assert logged() == []
        await peer.set_log_level("debug")
        assert (await peer.call_tool("chatty")).text == "logged"
        assert logged() == ["hello from the server"]


async def test_elicitation(peer: Client) -> None:
    result = await peer.call_tool("greet")
    assert result.text == "hello Ada"


async def test_sampling(peer: Client) -> None:
    result = await peer.call_tool("ask_model")
    assert result.text == "the model said hi"


async def test_roots(peer: Client) -> None:
    result = await peer.call_tool("where")
    assert result.text == "file:///srv/a,file:///srv/b"


async def test_resources_list(peer: Client) -> None:
    resources = {resource.uri: resource for resource in await peer.list_resources()}
    assert set(resources) == {"info://about", "data://blob"}
    assert resources["info://about"].mime_type == "text/plain"
    templates = await peer.list_resource_templates()
    assert [template.uri_template for template in templates] == ["greeting://{name}"]


async def test_resources_read(peer: Client) -> None:
    about = await peer.read_resource("info://about")
    assert about.contents == [
        TextResourceContents(
            uri="info://about", text="a server for the behaviour suite", mime_type="text/plain"
        )
    ]
    if peer.era == "modern":
        assert (about.ttl_ms, about.cache_scope) == (5000, "public")
    blob = await peer.read_resource("data://blob")
    assert blob.contents == [
        BlobResourceContents(
            uri="data://blob", blob="AAECAwQFBgc=", mime_type="application/octet-stream"
        )
    ]
    greeting = await peer.read_resource("greeting://Ada")
    assert [item.text for item in greeting.contents] == ["hello Ada"]


async def test_resources_unknown(peer: Client) -> None:
    with pytest.raises(InvalidParams):
        await peer.read_resource("nowhere://at/all")


async def test_prompts(peer: Client) -> None:
    prompts = {prompt.name: prompt for prompt in await peer.list_prompts()}
    assert set(prompts) == {"summary", "two_messages"}
    arguments = prompts["summary"].arguments or []
    assert [(a.name, a.required) for a in arguments] == [("topic", True), ("style", False)]
    got = await peer.get_prompt("summary", {"topic": "MCP"})
    assert [m.content for m in got.messages] == [TextContent(text="Write a short summary of MCP.")]
    assert got.description == "Summarize a topic."
    two = await peer.get_prompt("two_messages")
    assert [m.content for m in two.messages] == [
        TextContent(text="first"),
        TextContent(text="second"),
    ]


async def test_completion(peer: Client) -> None:
    ref = CompletionRef(type="ref/prompt", name="summary")
    completion = await peer.complete(ref, ("topic", "m"))
    assert completion.values == ["mcp", "msgspec", "millimcp"]
    assert completion.total == 3


async def test_list_changed(peer: Client, request: pytest.FixtureRequest) -> None:
    name = "grown_" + request.node.callspec.id.replace("-", "_")
    async with peer.subscribe(tools_list_changed=True) as notes:
        await peer.call_tool("grow", {"name": name})
        async with asyncio.timeout(10):
            note = await anext(notes)
    assert note.method == "notifications/tools/list_changed"
    if request.node.callspec.id.startswith("memory"):
        return  # the in-memory server is this process's: the tool stays for the next runs
    assert name in {tool.name for tool in await peer.list_tools()}


async def test_resource_updated(peer: Client) -> None:
    async with peer.subscribe(resources=["info://about"]) as notes:
        await peer.call_tool("touch", {"uri": "info://about"})
        async with asyncio.timeout(10):
            note = await anext(notes)
    assert (note.method, note.uri) == ("notifications/resources/updated", "info://about")


async def test_deadline(peer: Client) -> None:
    with pytest.raises(CallTimeout):
        await peer.call_tool("sleepy", {"seconds": 30}, timeout=0.5)
    result = await peer.call_tool("echo", {"text": "still here"})
    assert result.text == "still here"

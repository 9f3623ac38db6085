"""Interop: millimcp's `Client` against servers it did not grow up with.

- the official SDK's `MCPServer` (`mcp` 2.3.0, tests/servers/official_server.py): both eras,
  over Streamable HTTP and over stdio;
- `@modelcontextprotocol/server-everything` (2026.8.31, the TypeScript SDK's reference
  server; handshake era only): over stdio, and over HTTP bound to 127.0.0.1;
- the millimcp server over stdio (examples/conformance_server.py --stdio), both eras.

Each run lists and calls tools (one with structured content, one with progress), reads
resources and templates, gets prompts, and answers the server's elicitation, sampling and
roots requests with the client's handlers (server-to-client requests in the handshake era,
MRTR rounds in the modern era).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millimcp import Client
from millimcp.protocol.types import (
    CompletionRef,
    CreateMessageParams,
    CreateMessageResult,
    ElicitParams,
    ElicitResult,
    GetPromptResult,
    ReadResourceResult,
    TextContent,
    TextResourceContents,
)
from tests.conftest import free_port, start_server, stop_server, wait_for_port
from tests.integration.interop.peers import LOOPBACK_ONLY, server_everything_argv

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[3]
OFFICIAL = str(ROOT / "tests" / "servers" / "official_server.py")
CONFORMANCE = str(ROOT / "examples" / "conformance_server.py")
TIMEOUT_S = 30.0
ROOTS = ["file:///srv/agent-project"]


class Peer:
    """The client's handlers, recording what the server asked."""

    def __init__(self) -> None:
        self.elicited: list[str] = []
        self.sampled: list[Any] = []

    async def elicit(self, params: ElicitParams) -> ElicitResult:
        self.elicited.append(params.message)
        return ElicitResult(action="accept", content={"name": "Ada", "check": True})

    async def sample(self, params: CreateMessageParams) -> CreateMessageResult:
        self.sampled.append(params.messages[0].content)
        return CreateMessageResult(
            role="assistant", content={"type": "text", "text": "Paris"}, model="test-model"
        )

    def options(self, era: str = "auto") -> dict[str, Any]:
        return {
            "era": era,
            "timeout": TIMEOUT_S,
            "elicitation": self.elicit,
            "sampling": self.sample,
            "roots": ROOTS,
        }


def python_env() -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def text_in(read: ReadResourceResult) -> str:
    """The text of a resource read's first contents (which must be text)."""
    text = read.contents[0].text
    assert text is not None, read
    return text


def prompt_text(prompt: GetPromptResult) -> str:
    """The text of a prompt's first message (which must be text)."""
    content = prompt.messages[0].content
    assert isinstance(content, TextContent), content
    return content.text


class Progress:
    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []

    def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))


# -- the official SDK's MCPServer -------------------------------------------------------------


@pytest.fixture(scope="module")
def official_url() -> Iterator[str]:
    port = free_port()
    process = start_server([OFFICIAL, "--port", str(port)], port)
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


@pytest.mark.parametrize("transport", ["http", "stdio"])
@pytest.mark.parametrize("era", ["auto", "handshake"])
async def test_official_server(official_url: str, transport: str, era: str) -> None:
    peer = Peer()
    if transport == "http":
        client = Client.over_http(official_url, **peer.options(era))
    else:
        client = Client.over_stdio(
            sys.executable, [OFFICIAL, "--stdio"], env=python_env(), **peer.options(era)
        )
    async with client:
        assert client.era == ("modern" if era == "auto" else "handshake")
        assert client.protocol_version == ("2026-07-28" if era == "auto" else "2025-11-25")
        assert client.server_info is not None
        assert client.server_info.name == "official-interop"

        tools = {tool.name: tool for tool in await client.list_tools()}
        assert set(tools) == {"echo", "weather", "count", "ask_name", "ask_model", "my_roots"}
        assert tools["weather"].output_schema is not None

        echoed = await client.call_tool("echo", {"text": "héllo"})
        assert echoed.content == [TextContent(text="héllo")]
        assert echoed.is_error is False

        weather = await client.call_tool("weather", {"city": "Oslo"})
        assert weather.structured_content == {
            "city": "Oslo",
            "temperature": 21.5,
            "conditions": "sunny",
        }

        progress = Progress()
        counted = await client.call_tool("count", {"steps": 3}, on_progress=progress)
        assert text_of(counted) == "counted to 3"
        assert progress.seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]

        assert text_of(await client.call_tool("ask_name")) == "Hello, Ada!"
        assert peer.elicited == ["What is your name?"]
        assert text_of(await client.call_tool("ask_model")) == "The model said: Paris"
        assert peer.sampled == [{"type": "text", "text": "What is the capital of France?"}]
        assert text_of(await client.call_tool("my_roots")) == ROOTS[0]

        failed = await client.call_tool("weather", {})
        assert failed.is_error is True

        assert [r.uri for r in await client.list_resources()] == ["test://static-text"]
        text = await client.read_resource("test://static-text")
        assert text.contents == [
            TextResourceContents(
                uri="test://static-text",
                text="static text from the official SDK",
                mime_type="text/plain",
            )
        ]
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates] == ["orders://{order_id}"]
        order = await client.read_resource("orders://7")
        assert order.contents[0].text == '{"order": "7"}'

        assert [p.name for p in await client.list_prompts()] == ["greet"]
        prompt = await client.get_prompt("greet", {"name": "Bo"})
        assert prompt.messages[0].content == TextContent(text="Please greet Bo.")


# -- server-everything (TypeScript SDK, handshake era) -----------------------------------------


@pytest.fixture(scope="module")
def everything(missing_tool: Any) -> list[str]:
    return server_everything_argv(missing_tool)


@pytest.fixture(scope="module")
def everything_url(
    everything: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """server-everything's Streamable HTTP transport, made to listen on 127.0.0.1 only."""
    node, entry = everything
    port = free_port()
    log = tmp_path_factory.mktemp("everything") / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [node, "--import", LOOPBACK_ONLY.as_uri(), entry, "streamableHttp"],
            env={**os.environ, "PORT": str(port)},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, process)
        address = outward_address()
        if address is not None:  # the preload bound it to 127.0.0.1, not to every interface
            with (
                pytest.raises(ConnectionRefusedError),
                socket.create_connection((address, port), timeout=5),
            ):
                pass
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_server(process)


def outward_address() -> str | None:
    """This machine's address on its default route, if it has one that is not loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: a UDP connect sends nothing
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


async def _exercise_everything(client: Client, peer: Peer) -> None:
    assert client.era == "handshake"  # found by falling back from server/discover
    assert client.protocol_version == "2025-11-25"
    assert client.server_info is not None
    assert client.server_info.name == "mcp-servers/everything"
    assert client.instructions

    names = {tool.name for tool in await client.list_tools()}
    # The last three are registered only for a client that declares those capabilities.
    assert {
        "echo",
        "get-sum",
        "get-structured-content",
        "trigger-long-running-operation",
        "trigger-elicitation-request",
        "trigger-sampling-request",
        "get-roots-list",
    } <= names

    assert text_of(await client.call_tool("echo", {"message": "héllo"})) == "Echo: héllo"
    assert text_of(await client.call_tool("get-sum", {"a": 2, "b": 3})) == (
        "The sum of 2 and 3 is 5."
    )

    weather = await client.call_tool("get-structured-content", {"location": "Chicago"})
    assert weather.structured_content is not None
    assert set(weather.structured_content) == {"temperature", "conditions", "humidity"}

    progress = Progress()
    done = await client.call_tool(
        "trigger-long-running-operation", {"duration": 0.2, "steps": 3}, on_progress=progress
    )
    assert "Steps: 3" in text_of(done)
    assert [(p, t) for p, t, _ in progress.seen] == [(1, 3), (2, 3), (3, 3)]

    elicited = await client.call_tool("trigger-elicitation-request")
    assert "Name: Ada" in text_of(elicited)
    assert peer.elicited == ["Please provide inputs for the following fields:"]

    sampled = await client.call_tool("trigger-sampling-request", {"prompt": "capital?"})
    assert '"text": "Paris"' in text_of(sampled)
    assert peer.sampled[-1] == {
        "type": "text",
        "text": "Resource trigger-sampling-request context: capital?",
    }

    listed = await client.call_tool("get-roots-list")
    assert f"URI: {ROOTS[0]}" in text_of(listed)

    missing = await client.call_tool("no-such-tool", {})  # the TypeScript SDK's way
    assert missing.is_error is True
    assert "no-such-tool" in text_of(missing)

    resources = await client.list_resources()
    document = next(r for r in resources if r.uri.endswith("/architecture.md"))
    read = await client.read_resource(document.uri)
    assert "Architecture" in text_in(read)
    templates = {t.uri_template for t in await client.list_resource_templates()}
    assert "demo://resource/dynamic/text/{resourceId}" in templates
    dynamic = await client.read_resource("demo://resource/dynamic/text/3")
    assert dynamic.contents[0].uri == "demo://resource/dynamic/text/3"

    assert {"simple-prompt", "args-prompt"} <= {p.name for p in await client.list_prompts()}
    prompt = await client.get_prompt("args-prompt", {"city": "Oslo"})
    assert "Oslo" in prompt_text(prompt)
    completion = await client.complete(
        CompletionRef(type="ref/prompt", name="completable-prompt"), ("department", "Eng")
    )
    assert completion.values == ["Engineering"]


async def test_server_everything_over_stdio(everything: list[str]) -> None:
    peer = Peer()
    node, entry = everything
    async with Client.over_stdio(node, [entry, "stdio"], **peer.options()) as client:
        await _exercise_everything(client, peer)


async def test_server_everything_over_http(everything_url: str) -> None:
    peer = Peer()
    async with Client.over_http(everything_url, **peer.options()) as client:
        # get-roots-list asks outside any call: the request comes on the GET stream.
        await _exercise_everything(client, peer)


# -- the millimcp server over stdio -------------------------------------------------------------


@pytest.mark.parametrize("era", ["auto", "handshake"])
async def test_millimcp_server_over_stdio(era: str) -> None:
    peer = Peer()
    async with Client.over_stdio(
        sys.executable, [CONFORMANCE, "--stdio"], env=python_env(), **peer.options(era)
    ) as client:
        modern = era == "auto"
        assert client.era == ("modern" if modern else "handshake")
        assert client.server_info is not None
        assert client.server_info.name == "millimcp-conformance"

        names = {tool.name for tool in await client.list_tools()}
        assert {"test_simple_text", "test_tool_with_progress", "test_elicitation"} <= names
        simple = await client.call_tool("test_simple_text")
        assert text_of(simple) == "This is a simple text response for testing."

        progress = Progress()
        done = await client.call_tool("test_tool_with_progress", on_progress=progress)
        assert text_of(done) == "Progress complete"
        assert [p for p, _, _ in progress.seen] == [0, 50, 100]

        failed = await client.call_tool("test_error_handling")
        assert failed.is_error is True

        if modern:
            asked = await client.call_tool("test_input_required_result_elicitation")
            assert text_of(asked) == "Hello, Ada!"
        else:
            asked = await client.call_tool("test_elicitation", {"message": "Who?"})
            assert "action=accept" in text_of(asked)
        assert len(peer.elicited) == 1
        sampled = await client.call_tool("test_sampling", {"prompt": "capital?"})
        assert text_of(sampled) == "LLM response: Paris"

        text = await client.read_resource("test://static-text")
        assert text.contents[0].text == ("This is the content of the static text resource.")
        templated = await client.read_resource("test://template/42/data")
        assert '"id":"42"' in text_in(templated).replace(" ", "")
        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        assert "arg1='a'" in prompt_text(prompt)
        completion = await client.complete(
            CompletionRef(type="ref/prompt", name="test_prompt_with_arguments"), ("arg1", "te")
        )
        assert completion.values == ["test", "testing", "tested"]

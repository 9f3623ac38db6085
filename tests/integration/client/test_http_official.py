"""millimcp's client against the official SDK's ``MCPServer`` (``mcp`` 2.3.0) over HTTP,
in both eras: tools, progress, resources, prompts; elicitation in the handshake era (the
SDK's ``MCPServer`` has no MRTR for ``ctx.elicit`` in the modern era: it refuses with
"no back-channel")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import pytest

from millimcp import Client
from millimcp.protocol.types import ElicitParams, TextContent, TextResourceContents
from tests.conftest import free_port, start_server, stop_server

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("http_kind")]


@pytest.fixture(scope="module")
def official_url() -> Iterator[str]:
    port = free_port()
    process = start_server(
        [
            "-m",
            "uvicorn",
            "tests.servers.official_client_peer:app",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        port,
    )
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


async def _elicit(params: ElicitParams) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Ada"}}


@pytest.mark.parametrize("era", ["auto", "handshake"])
async def test_the_official_server_in_both_eras(
    official_url: str, era: Literal["auto", "handshake"]
) -> None:
    progress: list[float] = []
    async with Client.over_http(official_url, era=era, elicitation=_elicit) as client:
        assert client.era == ("modern" if era == "auto" else "handshake")
        assert client.server_info is not None
        assert client.server_info.name == "official-peer"
        assert [t.name for t in await client.list_tools()] == ["echo", "count", "greet"]
        assert (await client.call_tool("echo", {"text": "hé"})).content == [TextContent(text="hé")]
        counted = await client.call_tool(
            "count", {"steps": 2}, on_progress=lambda p, t, m: progress.append(p)
        )
        assert counted.text == "2 steps"
        assert progress == [1.0, 2.0]
        note = await client.read_resource("peer://note")
        assert note.contents == [
            TextResourceContents(uri="peer://note", text="a note", mime_type="text/plain")
        ]
        prompt = await client.get_prompt("ask", {"topic": "eras"})
        assert prompt.messages[0].content == TextContent(text="Tell me about eras.")
        if client.era == "handshake":
            assert (await client.call_tool("greet")).text == "hello Ada"

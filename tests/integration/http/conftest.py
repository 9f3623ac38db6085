"""Helpers to speak 2026-07-28 Streamable HTTP by hand, with httpx, to a real server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import free_port, start_server, stop_server

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "millimcp-tests", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}


def headers_for(method: str, name: str | None = None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def body_for(method: str, params: dict[str, Any] | None = None, request_id: int = 1) -> str:
    params = dict(params or {})
    params["_meta"] = {**META, **params.get("_meta", {})}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


class Rpc:
    """A kept-alive httpx client with one method per kind of MCP exchange."""

    def __init__(self, client: httpx.Client, url: str) -> None:
        self.client = client
        self.url = url

    def post(self, body: bytes | str, headers: dict[str, str]) -> httpx.Response:
        return self.client.post(self.url, content=body, headers=headers)

    def call(
        self, method: str, params: dict[str, Any] | None = None, request_id: int = 1
    ) -> dict[str, Any]:
        name = (params or {}).get("name") or (params or {}).get("uri")
        response = self.post(body_for(method, params, request_id), headers_for(method, name))
        assert response.headers["content-type"].startswith("application/json"), response.text
        return dict(response.json())

    def tool(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.call("tools/call", {"name": name, "arguments": arguments or {}})
        assert "result" in reply, reply
        return dict(reply["result"])

    def works(self) -> None:
        """The server still answers a normal request."""
        assert self.tool("echo", {"text": "still here"})["content"][0]["text"] == "still here"


def sse_messages(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


@pytest.fixture
def rpc(server_url: str) -> Iterator[Rpc]:
    with httpx.Client(timeout=30) as client:
        yield Rpc(client, server_url)


@pytest.fixture(scope="session")
def fast_url() -> Iterator[str]:
    """tests/servers/fastpath_server.py (backpressure, timeouts, offloading, big results)."""
    port = free_port()
    process = start_server(
        ["-m", "millimcp", "serve", "tests.servers.fastpath_server:server", "--port", str(port)],
        port,
    )
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


@pytest.fixture
def fast(fast_url: str) -> Iterator[Rpc]:
    with httpx.Client(timeout=30) as client:
        yield Rpc(client, fast_url)

"""Helpers to speak 2026-07-28 Streamable HTTP by hand, with httpx, to a real server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from millimcp.protocol.types import META_CLIENT_CAPABILITIES, META_CLIENT_INFO
from millimcp.testing import modern_request
from tests.conftest import FRONT, serve_python

CLIENT_META: dict[str, Any] = {
    META_CLIENT_INFO: {"name": "millimcp-tests", "version": "0"},
    META_CLIENT_CAPABILITIES: {"elicitation": {}},
}
"""What these tests' requests say of their client, besides the protocol version."""


def request_for(
    method: str,
    params: dict[str, Any] | None = None,
    request_id: int = 1,
    name: str | None = None,
) -> tuple[bytes, dict[str, str]]:
    """A modern request (:func:`millimcp.testing.modern_request`) from the tests' client."""
    fields = dict(params or {})
    fields["_meta"] = {**CLIENT_META, **fields.get("_meta", {})}
    return modern_request(method, fields, request_id=request_id, name=name)


def headers_for(method: str, name: str | None = None) -> dict[str, str]:
    """The MCP headers of a request for ``method`` (lower-case names)."""
    return request_for(method, name=name)[1]


def body_for(method: str, params: dict[str, Any] | None = None, request_id: int = 1) -> bytes:
    return request_for(method, params, request_id)[0]


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
        response = self.post(*request_for(method, params, request_id))
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


FRONTS = (FRONT,)
"""The HTTP front every test here runs against (``millimcp serve --http ...``): native in
``make test``; ``make test-fronts`` (CI runs it too) runs them all again on uvicorn
(``MILLIMCP_HTTP_FRONT=uvicorn``)."""


@pytest.fixture(scope="session", params=FRONTS)
def front(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def server_url(front: str) -> Iterator[str]:
    """tests/servers/basic_server.py on each front (overrides the one in tests/conftest.py)."""
    command = ["-m", "millimcp", "serve", "tests.servers.basic_server:server", "--port", "{port}"]
    with serve_python([*command, "--http", front]) as served:
        yield served.url()


@pytest.fixture
def rpc(server_url: str) -> Iterator[Rpc]:
    with httpx.Client(timeout=30) as client:
        yield Rpc(client, server_url)


@pytest.fixture(scope="session")
def fast_url(front: str) -> Iterator[str]:
    """tests/servers/fastpath_server.py (backpressure, timeouts, offloading, big results)."""
    target = "tests.servers.fastpath_server:server"
    command = ["-m", "millimcp", "serve", target, "--port", "{port}", "--http", front]
    with serve_python(command) as served:
        yield served.url()


@pytest.fixture
def fast(fast_url: str) -> Iterator[Rpc]:
    with httpx.Client(timeout=30) as client:
        yield Rpc(client, fast_url)

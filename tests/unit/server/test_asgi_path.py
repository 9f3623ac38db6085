"""``Server.asgi()``: which path the endpoint answers at, from ``path=`` and ``HttpConfig.path``.

``path=`` wins when given, else ``http.path``, else ``/mcp``; any other path is a 404.
"""

from __future__ import annotations

from typing import Any

import pytest

from millimcp import Server
from millimcp.transports.http import HttpConfig
from tests.unit.server.asgi_calls import post


def pinging() -> Server:
    server = Server("paths")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    return server


async def answers_at(app: Any, path: str) -> bool:
    """Whether ``path`` is the MCP endpoint (a 404 otherwise)."""
    status, _, body = await post(app, "tools/list", {}, path=path)
    assert status in (200, 404), (status, body)
    if status == 200:
        assert body["result"]["tools"][0]["name"] == "echo"
    return bool(status == 200)


@pytest.mark.parametrize(
    ("asgi", "endpoint", "elsewhere"),
    [
        ({}, "/mcp", "/x"),
        ({"http": HttpConfig()}, "/mcp", "/x"),
        ({"http": HttpConfig(path="/x")}, "/x", "/mcp"),
        ({"path": "/y"}, "/y", "/mcp"),
        ({"path": "/y", "http": HttpConfig(sse_keepalive_s=1.0)}, "/y", "/mcp"),
        ({"path": "/y", "http": HttpConfig(path="/x")}, "/y", "/x"),  # path= wins
    ],
)
async def test_the_endpoint_path(asgi: dict[str, Any], endpoint: str, elsewhere: str) -> None:
    server = pinging()
    app = server.asgi(**asgi)
    assert await answers_at(app, endpoint)
    assert not await answers_at(app, elsewhere)
    server.close()


@pytest.mark.parametrize("asgi", [{"path": None}, {"http": HttpConfig(path=None)}])
async def test_no_path_answers_on_every_path(asgi: dict[str, Any]) -> None:
    server = pinging()
    app = server.asgi(**asgi)
    assert await answers_at(app, "/mcp")
    assert await answers_at(app, "/anything/at/all")
    server.close()


def test_the_http_config_keeps_its_other_fields() -> None:
    server = pinging()
    config = HttpConfig(path="/x", sse_keepalive_s=1.5)
    assert server.asgi(http=config).config == config
    assert server.asgi(path="/y", http=config).config == HttpConfig(path="/y", sse_keepalive_s=1.5)
    server.close()

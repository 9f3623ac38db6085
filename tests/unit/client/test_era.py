"""Which era the client speaks: found by the probe, remembered, forced, renegotiated after
-32022, and a handshake-era session initialized again when the server lost it."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import httpx
import pytest

from millimcp import Client, Server
from millimcp.client.asgi_link import AsgiLink
from millimcp.client.era import remembered
from millimcp.errors import ConfigurationError
from millimcp.testing import connect
from tests.unit.client.conftest import Era

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


async def test_the_modern_era_is_found_and_remembered(core_server: Server) -> None:
    async with connect(core_server) as client:
        assert client.era == "modern"
        assert client.protocol_version == "2026-07-28"
        assert client.server_info is not None
        assert client.server_info.name == "client-core-test-server"
        assert client.instructions == "Tools for the client core's tests."
        assert client.server_capabilities.tools is not None
        key = client._core.key
    assert remembered(key) == ("modern", "2026-07-28")


async def test_the_era_can_be_forced(core_server: Server, era: Era) -> None:
    async with connect(core_server, era=era) as client:
        assert client.era == era
        if era == "handshake":
            assert client.protocol_version == "2025-11-25"
            assert client.server_info is not None
            assert client.server_info.version == "2.0.0"
        key = client._core.key
    assert remembered(key) is None  # a forced era says nothing of the server's preference


async def test_a_handshake_only_server_is_found_by_the_fallback() -> None:
    """``server/discover`` refused without a modern error: the client initializes."""
    seen: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await send({"type": "http.response.start", "status": 405, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        body = json.loads((await receive())["body"])
        seen.append(body.get("method", "(response)"))
        if "id" not in body:
            status, reply = 202, b""
        elif body["method"] == "initialize":
            status = 200
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "old", "version": "1"},
            }
            reply = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result}).encode()
        else:  # what a handshake-era server says to a request outside a session
            status = 400
            error = {"code": -32600, "message": "Bad Request: no valid session ID"}
            reply = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
        headers = [(b"content-type", b"application/json")]
        if body.get("method") == "initialize":
            headers.append((b"mcp-session-id", b"s1"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": reply})

    async with Client(AsgiLink(app), key="memory:handshake-only", retry=None) as client:
        assert client.era == "handshake"
        assert client.protocol_version == "2025-11-25"
        assert client.server_info is not None
        assert client.server_info.name == "old"
    assert seen == ["server/discover", "initialize", "notifications/initialized"]
    assert remembered("memory:handshake-only") == ("handshake", "2025-11-25")


async def test_an_unsupported_version_is_renegotiated_once(core_server: Server) -> None:
    async with connect(core_server) as client:
        client._core.use_modern("1999-01-01")  # as if the client had started too new
        result = await client.call_tool("echo", {"text": "again"})
        assert result.text == "again"
        assert client.protocol_version == "2026-07-28"


async def test_a_lost_session_is_initialized_again(core_server: Server) -> None:
    async with core_server.running():
        app = core_server.asgi()
        link = AsgiLink(app)
        async with Client(link, key="memory:lost-session", era="handshake") as client:
            old = link.session_id
            assert old is not None
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
                response = await http.delete(
                    "/mcp", headers={"Mcp-Session-Id": old, "MCP-Protocol-Version": "2025-11-25"}
                )
                assert response.status_code == 200
            result = await client.call_tool("echo", {"text": "after"})
            assert result.text == "after"
            assert link.session_id not in (None, old)


def test_a_bad_era_is_a_configuration_error(core_server: Server) -> None:
    with pytest.raises(ConfigurationError, match="era must be"):
        Client(AsgiLink(core_server.asgi()), key="memory:bad", era="legacy")  # type: ignore[arg-type]

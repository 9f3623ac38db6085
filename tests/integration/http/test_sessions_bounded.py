"""Handshake-era sessions are bounded: a cap with a clear error, and idle ones end.

These drive the real ASGI app in-process: 10,000 sessions over loopback sockets would
measure the machine, not the session store.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from typing import Any

import httpx
import pytest

from millimcp import Context, Server, ServerConfig
from millimcp.session import SessionConfig
from millimcp.session import sessions as sessions_module
from millimcp.testing import http_scope

HELLO = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
JSON_ONLY = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def make_server(**sessions: Any) -> Server:
    server = Server("bounded", config=ServerConfig(sessions=SessionConfig(**sessions)))

    @server.tool()
    async def echo(text: str) -> str:
        return text

    @server.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("name?", {"type": "object", "properties": {}})
        return str(answer.action)

    return server


async def _initialize(app: Any) -> tuple[int, dict[bytes, bytes], bytes]:
    """One ``initialize`` through the ASGI app, the way uvicorn would deliver it."""
    sent: list[dict[str, Any]] = []
    body = json.dumps(HELLO).encode()
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(http_scope(), receive, send)
    start, *chunks = sent
    return start["status"], dict(start["headers"]), b"".join(c["body"] for c in chunks)


async def test_ten_thousand_abandoned_sessions_are_capped_then_reaped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = make_server(max_sessions=10_000, idle_timeout_s=60)
    app = server.asgi()
    store = app.handler.sessions
    status, _, _ = await _initialize(app)  # warm every cache
    assert status == 200
    assert store.reap() == 0
    gc.collect()
    baseline = sys.getallocatedblocks()
    for _ in range(9_999):
        status, headers, _ = await _initialize(app)
        assert status == 200
    assert len(store) == 10_000
    gc.collect()
    full = sys.getallocatedblocks()
    status, headers, body = await _initialize(app)
    assert status == 503
    assert int(headers[b"retry-after"]) >= 1
    error = json.loads(body)["error"]
    assert error["code"] == -32002
    assert error["data"] == {"maxSessions": 10_000}
    # An hour later, the reaper's sweep ends every one of them.
    real_now = sessions_module._now
    monkeypatch.setattr(sessions_module, "_now", lambda: real_now() + 3600)
    assert store.reap() == 10_000
    assert len(store) == 0
    gc.collect()
    after = sys.getallocatedblocks()
    assert full - baseline > 100_000, "10,000 sessions should hold many objects"
    assert after - baseline < (full - baseline) / 50, (baseline, full, after)
    status, headers, _ = await _initialize(app)  # room again
    assert status == 200
    assert headers[b"mcp-session-id"]
    server.close()


async def test_an_active_session_is_not_reaped() -> None:
    server = make_server(idle_timeout_s=0.4)
    app = server.asgi()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        opened = await client.post("/mcp", json=HELLO, headers=JSON_ONLY)
        headers = {**JSON_ONLY, "mcp-session-id": opened.headers["mcp-session-id"]}
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        call["params"] = {"name": "echo", "arguments": {"text": "hi"}}
        for _ in range(8):  # 0.8 s in all, never 0.4 s idle
            await asyncio.sleep(0.1)
            reply = await client.post("/mcp", json=call, headers=headers)
            assert reply.status_code == 200, reply.text
        await asyncio.sleep(0.8)
        gone = await client.post("/mcp", json=call, headers=headers)
        assert gone.status_code == 404
    server.close()


async def test_the_stateless_option_keeps_nothing() -> None:
    server = make_server(stateless=True)
    app = server.asgi()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        opened = await client.post("/mcp", json=HELLO, headers=JSON_ONLY)
        assert opened.status_code == 200
        assert "mcp-session-id" not in opened.headers
        assert opened.json()["result"]["protocolVersion"] == "2025-11-25"
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        call["params"] = {"name": "echo", "arguments": {"text": "hi"}}
        headers = {**JSON_ONLY, "mcp-protocol-version": "2025-11-25"}
        reply = await client.post("/mcp", json=call, headers=headers)
        assert reply.headers["content-type"] == "application/json"
        assert reply.json()["result"]["content"][0]["text"] == "hi"
        # No session: no capabilities were declared, so no elicitation.
        call["params"] = {"name": "ask", "arguments": {}}
        refused = await client.post("/mcp", json=call, headers=headers)
        assert refused.json()["error"]["code"] == -32021
        bad = await client.post(
            "/mcp", json=call, headers={**JSON_ONLY, "mcp-protocol-version": "1999-01-01"}
        )
        assert bad.status_code == 400
        assert len(app.handler.sessions) == 0
    server.close()


async def test_a_server_without_the_handshake_era_names_its_versions() -> None:
    server = make_server(enabled=False)
    transport = httpx.ASGITransport(app=server.asgi())
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        refused = await client.post("/mcp", json=HELLO, headers=JSON_ONLY)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == -32022
    assert error["data"]["supported"] == ["2026-07-28"]
    assert "2026-07-28" in error["message"]
    server.close()

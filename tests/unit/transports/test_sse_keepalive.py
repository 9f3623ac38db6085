"""Long SSE streams carry keep-alive comments; run in-process through the real ASGI app."""

from __future__ import annotations

import asyncio
from typing import Any

from millimcp import Context, HttpConfig, Server
from millimcp.testing import http_scope, modern_request


async def test_quiet_stream_gets_keepalive_comments() -> None:
    server = Server("keepalive")

    @server.tool()
    async def slow_progress(ctx: Context) -> str:
        await ctx.report_progress(1, total=2)
        await asyncio.sleep(0.35)
        await ctx.report_progress(2, total=2)
        return "done"

    app = server.asgi(http=HttpConfig(sse_keepalive_s=0.1))
    params = {"name": "slow_progress", "_meta": {"progressToken": 1}}
    body, headers = modern_request("tools/call", params)
    scope = http_scope(
        [(k.encode(), v.encode()) for k, v in headers.items() if k.startswith("mcp-")]
    )
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    assert sent[0]["status"] == 200
    assert (b"x-accel-buffering", b"no") in sent[0]["headers"]
    chunks = [m.get("body", b"") for m in sent[1:]]
    assert b":\r\n\r\n" in chunks  # at least one keep-alive comment during the quiet 0.35 s
    events = [c for c in chunks if c.startswith(b"event: message")]
    assert len(events) == 3  # two progress notifications and the result
    assert b'"result"' in events[-1]
    assert sent[-1] == {"type": "http.response.body", "body": b""}

"""The server is a plain ASGI app: it mounts inside a Starlette application."""

from __future__ import annotations

import httpx
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from millimcp import Server
from tests.integration.http.conftest import body_for, headers_for


async def test_mounted_in_starlette() -> None:
    server = Server("mounted")

    @server.tool()
    async def shout(text: str) -> str:
        return text.upper()

    async def health(request: object) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/health", health), Mount("/api", app=server.asgi())])
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        assert (await client.get("/health")).text == "ok"
        body = body_for("tools/call", {"name": "shout", "arguments": {"text": "hi"}})
        response = await client.post(
            "/api/mcp", content=body, headers=headers_for("tools/call", "shout")
        )
        missing = await client.post(
            "/api/other", content=body, headers=headers_for("tools/call", "shout")
        )
    assert response.status_code == 200
    assert response.json()["result"]["content"][0]["text"] == "HI"
    assert missing.status_code == 404

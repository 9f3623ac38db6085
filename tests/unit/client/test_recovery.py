"""What the client does after a refusal: a lost handshake-era session is opened again, and
nothing else is mistaken for one."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import pytest

from millimcp import Client, Server
from millimcp.client.asgi_link import AsgiLink
from millimcp.errors import MethodNotFound

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class Refusing:
    """Passes everything to the app, but answers ``tools/call`` of ``gone`` as a server that
    lacks the method does: HTTP 404 with -32601. Counts the ``initialize`` requests."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app
        self.initializes = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        request = json.loads(body)
        if request.get("method") == "initialize":
            self.initializes += 1
        if request.get("method") == "tools/call" and request["params"]["name"] == "gone":
            error = {"code": -32601, "message": "Method not found: tools/call"}
            reply = json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": error}).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 404, "headers": headers})
            await send({"type": "http.response.body", "body": reply})
            return
        delivered = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_a_404_with_method_not_found_is_not_a_lost_session(era: str) -> None:
    server = Server("refusing")

    @server.tool
    async def gone() -> str:
        return "never reached"

    async with server.running():
        app = Refusing(server.asgi())
        async with Client(AsgiLink(app), key=f"refusing-{era}", era=era) as client:  # type: ignore[arg-type]
            opened = app.initializes
            with pytest.raises(MethodNotFound):
                await client.call_tool("gone")
            assert app.initializes == opened  # no new session for a method the server lacks

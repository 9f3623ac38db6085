"""The auth gate hands its headers dict to millimcp's endpoint, and calls any other ASGI app
by the plain ASGI signature."""

from __future__ import annotations

from typing import Any

from millimcp.auth import Principal, ProtectedResource, StaticTokens
from millimcp.transports.auth_gate import AuthGate
from millimcp.transports.http import StreamableHTTPApp

RESOURCE = "http://127.0.0.1/mcp"


def _resource() -> ProtectedResource:
    return ProtectedResource(
        resource=RESOURCE,
        authorization_servers=["https://issuer.example"],
        verifier=StaticTokens({"t": Principal("alice", scopes=frozenset())}),
    )


async def _request(app: Any) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", b"Bearer t")],
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


async def test_any_asgi_app_behind_the_gate_is_called_with_three_arguments() -> None:
    seen: list[int] = []

    async def plain(scope: Any, receive: Any, send: Any) -> None:  # exactly ASGI's signature
        seen.append(len(scope["headers"]))
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    sent = await _request(AuthGate(plain, _resource()))
    assert seen == [2]
    assert sent[0]["status"] == 204


async def test_the_endpoint_gets_the_gates_headers_dict() -> None:
    given: list[Any] = []

    class Recording(StreamableHTTPApp):
        async def __call__(
            self, scope: Any, receive: Any, send: Any, headers: dict[bytes, bytes] | None = None
        ) -> None:
            given.append(headers)
            await super().__call__(scope, receive, send, headers)

    class Nothing:
        async def handle_http(self, body: bytes, headers: Any, exchange: Any) -> None:
            await exchange.reply(200, b"{}")

    sent = await _request(AuthGate(Recording(Nothing()), _resource()))  # type: ignore[arg-type]
    assert given == [{b"host": b"127.0.0.1", b"authorization": b"Bearer t"}]
    assert sent[0]["status"] in (200, 415)

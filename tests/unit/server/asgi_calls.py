"""Calling a server's ASGI app in-process: one modern-era request, and the ASGI lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from millimcp.testing import http_scope

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def request(
    method: str, params: dict[str, Any], request_id: int | None = 1, *, path: str = "/mcp"
) -> tuple[Any, bytes]:
    """The scope and body of one modern-era request (a notification when no id)."""
    headers = [(b"mcp-protocol-version", b"2026-07-28"), (b"mcp-method", method.encode())]
    name = params.get("name", params.get("uri"))
    if name is not None:
        headers.append((b"mcp-name", name.encode()))
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if request_id is not None:
        message["id"] = request_id
        params["_meta"] = META
    return http_scope(headers, path=path), json.dumps(message).encode()


async def post(
    app: Any,
    method: str,
    params: dict[str, Any],
    request_id: int | None = 1,
    *,
    path: str = "/mcp",
) -> Any:
    """(status, headers, decoded body or None) of one request through the ASGI app."""
    scope, body = request(method, params, request_id, path=path)
    sent: list[dict[str, Any]] = []
    delivered = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if not delivered.is_set():
            delivered.set()
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays connected
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = sent[0]["status"]
    headers = dict(sent[0]["headers"])
    payload = b"".join(m.get("body", b"") for m in sent[1:])
    try:
        decoded = json.loads(payload) if payload else None
    except ValueError:  # a plain-text answer (404, 405...)
        decoded = payload.decode()
    return status, headers, decoded


async def result(app: Any, method: str, params: dict[str, Any]) -> Any:
    """The ``result`` of one request that must succeed."""
    status, _, body = await post(app, method, params)
    assert status == 200, body
    assert "result" in body, body
    return body["result"]


@contextlib.asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    """Run the app's ASGI lifespan around the block, as an HTTP server does."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started = asyncio.Event()
    stopped = asyncio.Event()
    failures: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"].endswith(".failed"):
            failures.append(message)
        if message["type"].startswith("lifespan.startup"):
            started.set()
        elif message["type"].startswith("lifespan.shutdown"):
            stopped.set()

    task = asyncio.ensure_future(app({"type": "lifespan", "state": {}}, inbox.get, send))
    await inbox.put({"type": "lifespan.startup"})
    await started.wait()
    assert not failures, failures
    try:
        yield
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await stopped.wait()
        await task
    assert not failures, failures

"""The HTTP fronts: a client that leaves cancels its request, and nothing lingers."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from millimcp import Context, HttpConfig, Server
from millimcp.testing import http_scope, modern_request


def call(tool: str) -> tuple[bytes, dict[str, str]]:
    """A modern ``tools/call`` of ``tool`` that asks for progress (so replies stream)."""
    return modern_request(
        "tools/call", {"name": tool, "arguments": {}, "_meta": {"progressToken": 1}}
    )


def scope_for(tool: str) -> dict[str, Any]:
    _, headers = call(tool)
    return http_scope(
        [(k.encode(), v.encode()) for k, v in headers.items() if k.startswith("mcp-")]
    )


def call_body(tool: str) -> bytes:
    return call(tool)[0]


def hanging_server() -> tuple[Server, dict[str, Any]]:
    server = Server("disconnects")
    seen: dict[str, Any] = {"cancelled": False, "started": asyncio.Event()}

    @server.tool()
    async def hang(ctx: Context) -> str:
        await ctx.report_progress(1, total=2)  # opens the SSE stream
        seen["started"].set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise
        return "never"

    return server, seen


async def run_until_disconnect(
    app: Any, tool: str, disconnect_after: float
) -> tuple[list[dict[str, Any]], set[asyncio.Task[Any]]]:
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": call_body(tool), "more_body": False}
        await asyncio.sleep(disconnect_after)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    before = asyncio.all_tasks()
    guard = asyncio.timeout(10)
    async with guard:
        await app(scope_for(tool), receive, send)
    # The guard's cancellation would also end the handler: it must not be what did.
    assert not guard.expired(), "the disconnect did not cancel the handler"
    return sent, asyncio.all_tasks() - before


async def cancel_all(tasks: set[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_client_that_disconnects_cancels_its_handler() -> None:
    server, seen = hanging_server()
    app = server.asgi(http=HttpConfig(sse_keepalive_s=0))
    sent, leftover = await run_until_disconnect(app, "hang", disconnect_after=0.2)
    try:
        assert seen["started"].is_set()
        assert seen["cancelled"]
        assert sent[0]["status"] == 200
        assert (b"content-type", b"text/event-stream") in sent[0]["headers"]
        assert b"notifications/progress" in sent[1]["body"]
    finally:
        await cancel_all(leftover)
        server.close()


async def test_nothing_is_sent_after_the_app_returns_from_a_disconnected_stream() -> None:
    """The keep-alive task of an SSE response stops when the client leaves mid-stream."""
    server, _ = hanging_server()
    app = server.asgi(http=HttpConfig(sse_keepalive_s=0.05))
    sent, leftover = await run_until_disconnect(app, "hang", disconnect_after=0.2)
    try:
        count = len(sent)
        await asyncio.sleep(0.3)
        assert len(sent) == count, f"{len(sent) - count} sends after the app returned"
    finally:
        await cancel_all(leftover)
        server.close()


async def test_a_body_with_an_id_but_no_method_is_refused_with_its_id() -> None:
    server = Server("refuse")
    app = server.asgi()
    sent: list[dict[str, Any]] = []
    body = b'{"jsonrpc":"2.0","id":11}'

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = scope_for("x")
    await app(scope, receive, send)
    assert sent[0]["status"] == 400
    reply = json.loads(sent[1]["body"])
    assert reply["error"]["code"] == -32600
    assert reply["id"] == 11


async def test_the_task_table_answers_as_current_task() -> None:
    """inflight.TASKS (3.11) gives the modern front the same task as asyncio.current_task."""
    from millimcp.session.inflight import TASKS

    if TASKS is None:
        assert sys.version_info >= (3, 12)
        return

    async def which() -> bool:
        return TASKS.get(asyncio.get_running_loop()) is asyncio.current_task() is not None

    assert await asyncio.create_task(which())
    assert await which()

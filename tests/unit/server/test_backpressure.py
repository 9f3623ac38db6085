"""Server backpressure in-process: 200 calls against 10 in flight + 20 queued.

The excess is refused at once with 503 + Retry-After while the admitted calls are still held;
every call is answered or refused (none lost); cheap methods and notifications never wait
behind the queue; afterwards the server answers normally.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from millimcp import Server, ServerConfig
from millimcp.resilience import ConcurrencyLimit
from tests.unit.server.asgi_calls import post, request


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never met")


def gated_server(**config: Any) -> tuple[Server, asyncio.Event, list[int]]:
    server = Server("limited", config=ServerConfig(**config))
    gate = asyncio.Event()
    running: list[int] = []

    @server.tool()
    async def held(n: int) -> str:
        running.append(n)
        await gate.wait()
        return f"done {n}"

    @server.resource("test://thing")
    async def thing() -> str:
        await gate.wait()
        return "thing"

    return server, gate, running


async def test_200_calls_against_10_in_flight_and_20_queued() -> None:
    server, gate, running = gated_server(limit=ConcurrencyLimit(10, 20, retry_after_s=2))
    app = server.asgi()
    calls = [
        asyncio.create_task(post(app, "tools/call", {"name": "held", "arguments": {"n": n}}, n))
        for n in range(200)
    ]
    await until(lambda: sum(c.done() for c in calls) >= 170)  # while the 30 are held
    refused = [c.result() for c in calls if c.done()]
    assert len(running) == 10
    assert all(status == 503 for status, _, _ in refused)
    assert all(headers[b"retry-after"] == b"2" for _, headers, _ in refused)
    error = refused[0][2]["error"]
    assert error["code"] == -32050
    assert error["data"] == {"retryAfterMs": 2000}
    assert "overloaded" in error["message"]
    # Cheap methods and notifications do not wait behind the queue.
    status, _, listed = await asyncio.wait_for(post(app, "tools/list", {}), 5)
    assert status == 200
    assert listed["result"]["tools"][0]["name"] == "held"
    cancel = {"requestId": 3, "reason": "user"}
    status, _, _ = await asyncio.wait_for(post(app, "notifications/cancelled", cancel, None), 5)
    assert status == 202
    # Other work methods share the limit.
    status, _, body = await post(app, "resources/read", {"uri": "test://thing"})
    assert status == 503
    assert body["error"]["code"] == -32050

    gate.set()
    results = await asyncio.wait_for(asyncio.gather(*calls), 10)
    ok = [r for r in results if r[0] == 200]
    assert len(ok) == 30
    assert len(results) - len(ok) == 170
    assert sorted(running) == sorted(r[2]["id"] for r in ok)
    assert all(r[2]["result"]["content"][0]["text"] == f"done {r[2]['id']}" for r in ok)
    status, _, body = await post(app, "tools/call", {"name": "held", "arguments": {"n": 7}})
    assert status == 200
    assert body["result"]["content"][0]["text"] == "done 7"
    assert server._limiter is not None
    assert server._limiter.in_flight == 0


async def test_a_tool_limit_refuses_only_that_tool() -> None:
    server, gate, running = gated_server(limit=None)

    @server.tool(concurrency=ConcurrencyLimit(max_in_flight=1, max_queued=0))
    async def single() -> str:
        await gate.wait()
        return "single"

    app = server.asgi()
    first = asyncio.create_task(post(app, "tools/call", {"name": "single", "arguments": {}}))
    await until(lambda: server._tool_limiters["single"].in_flight == 1)
    status, headers, body = await post(app, "tools/call", {"name": "single", "arguments": {}})
    assert status == 503
    assert headers[b"retry-after"] == b"1"
    assert "tool single" in body["error"]["message"]
    other = asyncio.create_task(post(app, "tools/call", {"name": "held", "arguments": {"n": 1}}))
    await until(lambda: bool(running))  # the other tool is not limited by this one
    gate.set()
    assert (await first)[0] == 200
    assert (await other)[0] == 200


async def test_no_limit_means_none() -> None:
    server, _, _ = gated_server(limit=None)
    assert server._limiter is None


async def test_a_queued_call_whose_client_leaves_gives_its_place_back() -> None:
    server, gate, running = gated_server(limit=ConcurrencyLimit(1, 1))
    app = server.asgi()
    first = asyncio.create_task(post(app, "tools/call", {"name": "held", "arguments": {"n": 1}}))
    await until(lambda: running == [1])
    scope, body = request("tools/call", {"name": "held", "arguments": {"n": 2}})
    delivered = False

    async def leaves() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(0.2)
        return {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    limiter = server._limiter
    assert limiter is not None
    gone = asyncio.create_task(app(scope, leaves, send))
    await until(lambda: limiter.queued == 1)
    await asyncio.wait_for(gone, 10)  # the client left: the queued call was cancelled
    assert sent == []  # nobody to answer
    assert limiter.queued == 0
    third = asyncio.create_task(post(app, "tools/call", {"name": "held", "arguments": {"n": 3}}))
    await until(lambda: limiter.queued == 1)  # its place in the queue was free again
    gate.set()
    assert (await first)[0] == 200
    assert (await third)[2]["result"]["content"][0]["text"] == "done 3"
    assert running == [1, 3]
    assert limiter.in_flight == 0

"""SIGTERM drains the server: calls in progress finish, streams end cleanly, exit 0."""

from __future__ import annotations

import asyncio
import http.client
import json
import signal
import time
from typing import Any

import aiohttp

from tests.integration.hardening.conftest import Front
from tests.integration.http.conftest import request_for

IN_FLIGHT = 50


async def call(session: aiohttp.ClientSession, url: str, name: str, **args: Any) -> Any:
    body, headers = request_for("tools/call", {"name": name, "arguments": args})
    async with session.post(url, data=body, headers=headers) as response:
        assert response.status == 200, await response.text()
        reply = json.loads(await response.read())
        result = reply["result"]
        if "structuredContent" in result:
            return result["structuredContent"]["result"]
        return result["content"][0]["text"]


async def test_sigterm_lets_calls_in_flight_finish(fresh_front: Front) -> None:
    url = fresh_front.url
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        listen_body, listen_headers = request_for(
            "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, 9
        )
        listen = await session.post(url, data=listen_body, headers=listen_headers)
        assert listen.headers["content-type"] == "text/event-stream"
        calls = [asyncio.create_task(call(session, url, "sleep", ms=200)) for _ in range(IN_FLIGHT)]
        async with aiohttp.ClientSession() as probe:  # its own connection
            while await call(probe, url, "sleeping") < IN_FLIGHT:
                assert not any(task.done() for task in calls)
        fresh_front.served.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        results = await asyncio.gather(*calls)
        assert results == ["slept 200"] * IN_FLIGHT
        stream = (await asyncio.wait_for(listen.read(), 10)).decode()  # ends, cleanly
        listen.release()
        assert '"id":9' in stream.replace(" ", "")  # the listen request's final result
        after = await late_call(url)
        assert after in ("503", "refused"), after
    status = await asyncio.to_thread(fresh_front.served.process.wait, 10)
    assert status == 0
    assert time.monotonic() - signalled < 5 + 3  # within the grace period (and start-up slack)


async def late_call(url: str) -> str:
    """A call that arrives after the signal: "503", "refused", or what else happened."""
    body, headers = request_for("tools/call", {"name": "sleep", "arguments": {"ms": 1}})
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=body, headers=headers) as response,
        ):
            await response.read()
            if response.status == 503:
                assert response.headers["retry-after"] == "1"
            return str(response.status)
    except aiohttp.ClientConnectorError:
        return "refused"


def test_a_kept_alive_connection_gets_the_draining_503_not_a_close(fresh_front: Front) -> None:
    """A client may be writing its next request into an idle kept-alive connection just as
    the drain begins: that request gets the draining 503 (-32050: it did not run, retry it)
    and ``Connection: close``, not a connection closed under it (which the client could not
    tell from a call that ran)."""
    body, headers = request_for("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    connection = http.client.HTTPConnection("127.0.0.1", fresh_front.port, timeout=10)
    connection.request("POST", "/mcp", body=body, headers=headers)
    with connection.getresponse() as first:
        assert first.status == 200
        first.read()
    fresh_front.served.process.send_signal(signal.SIGTERM)
    time.sleep(0.5)  # the drain has begun (uvicorn looks at its exit flag every 0.1 s)
    connection.request("POST", "/mcp", body=body, headers=headers)
    with connection.getresponse() as refused:
        assert refused.status == 503
        assert refused.getheader("retry-after") == "1"
        assert refused.getheader("connection") == "close"
        assert json.loads(refused.read())["error"]["code"] == -32050
    connection.close()
    assert fresh_front.served.process.wait(10) == 0


def test_the_readiness_endpoint_answers_alike_on_every_front(front: Front) -> None:
    """``/healthz`` while serving: 200, ``ok`` and a newline, as text (what probes match)."""
    connection = http.client.HTTPConnection("127.0.0.1", front.port, timeout=10)
    try:
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        assert (response.status, response.read()) == (200, b"ok\n")
        assert response.getheader("content-type") == "text/plain; charset=utf-8"
    finally:
        connection.close()

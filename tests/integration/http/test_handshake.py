"""The handshake era (2025-11-25 and earlier) on the same endpoint, spoken by hand over real HTTP.

The server is tests/servers/basic_server.py under uvicorn (the `server_url` fixture). Each
test opens its own session with ``initialize``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from millimcp.testing import modern_request

LEGACY = "2025-11-25"
HELLO = {
    "protocolVersion": LEGACY,
    "capabilities": {"elicitation": {}},
    "clientInfo": {"name": "millimcp-tests", "version": "0"},
}
JSON_ONLY = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


class Event(dict[str, str]):
    """One SSE event: its fields (id, event, data, retry)."""

    @property
    def message(self) -> dict[str, Any] | None:
        data = self.get("data", "")
        return json.loads(data) if data.strip() else None


async def events(response: httpx.Response) -> AsyncIterator[Event]:
    event = Event()
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = Event()
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            event[field] = event.get(field, "") + value.removeprefix(" ")


class Session:
    """A handshake-era client session, driven by hand."""

    def __init__(self, client: httpx.AsyncClient, url: str) -> None:
        self.client = client
        self.url = url
        self.id = ""
        self.next_id = 100

    def headers(self) -> dict[str, str]:
        return {**JSON_ONLY, "mcp-session-id": self.id, "mcp-protocol-version": LEGACY}

    async def open(self, hello: dict[str, Any] = HELLO) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}
        response = await self.client.post(self.url, json=body, headers=JSON_ONLY)
        assert response.status_code == 200, response.text
        self.id = response.headers["mcp-session-id"]
        await self.notify("notifications/initialized")
        return dict(response.json()["result"])

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> int:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = params
        response = await self.client.post(self.url, json=body, headers=self.headers())
        return response.status_code

    def body(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}

    async def request(self, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
        return await self.client.post(
            self.url, json=self.body(method, params), headers=self.headers()
        )

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        response = await self.request("tools/call", {"name": tool, "arguments": arguments or {}})
        assert response.status_code == 200, response.text
        reply = response.json()
        assert "result" in reply, reply
        return dict(reply["result"])

    async def text(self, tool: str, arguments: dict[str, Any] | None = None) -> str:
        return str((await self.call(tool, arguments))["content"][0]["text"])


@asynccontextmanager
async def session(url: str) -> AsyncIterator[Session]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield Session(client, url)


async def test_initialize_negotiates_the_version_and_opens_a_session(server_url: str) -> None:
    async with session(server_url) as s:
        result = await s.open({**HELLO, "protocolVersion": "2025-06-18"})
        assert result["protocolVersion"] == "2025-06-18"
        assert result["serverInfo"]["name"] == "basic-test-server"
        assert result["capabilities"]["tools"] == {"listChanged": True}
        assert result["capabilities"]["logging"] == {}
        assert "resultType" not in result  # the handshake era does not know it
        assert re.fullmatch(r"[\x21-\x7e]{32,}", s.id), s.id
        called = await s.call("echo", {"text": "hi"})
        assert called["content"][0]["text"] == "hi"
        assert "resultType" not in called
        other = Session(s.client, server_url)
        unknown = await other.open({**HELLO, "protocolVersion": "1999-01-01"})
        assert unknown["protocolVersion"] == LEGACY  # ours, for the client to accept or not
        assert other.id != s.id


async def test_delete_ends_the_session_and_it_is_then_unknown(server_url: str) -> None:
    async with session(server_url) as s:
        await s.open()
        deleted = await s.client.delete(server_url, headers=s.headers())
        assert deleted.status_code == 200
        after = await s.request("tools/list")
        assert after.status_code == 404
        assert after.json()["error"]["code"] == -32001
        again = await s.client.delete(server_url, headers=s.headers())
        assert again.status_code == 404
        forged = await s.client.post(
            server_url, json=s.body("tools/list"), headers={**s.headers(), "mcp-session-id": "x"}
        )
        assert forged.status_code == 404


async def test_requests_without_a_session_or_modern_meta_are_refused(server_url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        response = await client.post(server_url, json=body, headers=JSON_ONLY)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32000
        assert "initialize" in response.json()["error"]["message"]
        # No GET stream and no DELETE outside a session (the modern era has neither).
        for method in ("GET", "DELETE"):
            refused = await client.request(method, server_url, headers={"accept": "*/*"})
            assert refused.status_code == 405
            assert "POST" in refused.headers["allow"]
        # A modern request that names a removed method gets -32601 / 404.
        ping, headers = modern_request("ping", request_id=2)
        response = await client.post(server_url, content=ping, headers=headers)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == -32601


async def test_ping_set_level_and_log_messages(server_url: str) -> None:
    async with session(server_url) as s:
        await s.open()
        pong = await s.request("ping")
        assert pong.json()["result"] == {}
        assert (await s.request("logging/setLevel", {"level": "error"})).json()["result"] == {}
        quiet = await s.request("tools/call", {"name": "progress", "arguments": {"steps": 2}})
        assert "notifications/message" not in quiet.text
        assert (await s.request("logging/setLevel", {"level": "debug"})).status_code == 200
        params = {"name": "progress", "arguments": {"steps": 2}, "_meta": {"progressToken": "p"}}
        async with s.client.stream(
            "POST", server_url, json=s.body("tools/call", params), headers=s.headers()
        ) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            got = [event async for event in events(response)]
        assert got[0]["data"] == ""
        assert got[0]["id"]
        assert got[0]["retry"]
        messages = [event.message for event in got[1:]]
        methods = [m.get("method") for m in messages if m]
        assert methods.count("notifications/progress") == 2
        assert methods.count("notifications/message") == 2
        assert messages[-1] is not None
        assert messages[-1]["result"]["content"][0]["text"] == ("2 steps")
        ids = [event["id"] for event in got]
        assert len(set(ids)) == len(ids)  # every event has its own id


async def test_elicitation_is_a_request_on_the_stream_answered_by_a_post(server_url: str) -> None:
    async with session(server_url) as s:
        await s.open()
        body = s.body("tools/call", {"name": "ask_name", "arguments": {}})
        async with s.client.stream("POST", server_url, json=body, headers=s.headers()) as response:
            stream = events(response)
            priming = await anext(stream)
            assert priming["data"] == ""
            ask = (await anext(stream)).message
            assert ask is not None
            assert ask["method"] == "elicitation/create"
            assert ask["params"]["message"] == "Your name?"
            answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}}
            answer["result"]["content"] = {"name": "Ada"}
            posted = await s.client.post(server_url, json=answer, headers=s.headers())
            assert posted.status_code == 202
            final = (await anext(stream)).message
        assert final is not None
        assert final["id"] == body["id"]
        assert final["result"]["content"][0]["text"] == "hello Ada"


async def test_elicitation_needs_the_capability(server_url: str) -> None:
    async with session(server_url) as s:
        await s.open({**HELLO, "capabilities": {}})
        response = await s.request("tools/call", {"name": "ask_name", "arguments": {}})
        assert response.json()["error"]["code"] == -32021


async def _wait_for_tag(s: Session, tag: str) -> None:
    for _ in range(200):
        if tag in (await s.call("cancelled_tags"))["structuredContent"]["result"]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{tag} was never cancelled")


async def test_cancelled_notification_stops_the_call_without_an_answer(server_url: str) -> None:
    async with session(server_url) as s:
        await s.open()
        body = s.body("tools/call", {"name": "slow", "arguments": {"seconds": 30, "tag": "c-1"}})
        call = asyncio.ensure_future(s.client.post(server_url, json=body, headers=s.headers()))
        cancel = {"requestId": body["id"], "reason": "changed my mind"}
        for _ in range(50):  # a cancel that arrives before the call started is ignored
            assert await s.notify("notifications/cancelled", cancel) == 202
            done, _ = await asyncio.wait({call}, timeout=0.2)
            if done:
                break
        response = await asyncio.wait_for(call, 10)
        assert response.status_code == 202
        assert not response.content
        await _wait_for_tag(s, "c-1")


async def test_a_client_that_drops_the_stream_cancels_the_call_and_nothing_leaks(
    server_url: str,
) -> None:
    async with session(server_url) as s:
        await s.open()
        baseline = (await s.call("tasks"))["structuredContent"]["result"]
        params = {"name": "slow", "arguments": {"seconds": 30, "tag": "drop-1"}}
        async with httpx.AsyncClient(timeout=30) as other:
            body = s.body("tools/call", params)
            call = asyncio.ensure_future(other.post(server_url, json=body, headers=s.headers()))
            await asyncio.sleep(0.5)
            call.cancel()  # closes the connection mid-call
            with pytest.raises(asyncio.CancelledError):
                await call
        await _wait_for_tag(s, "drop-1")
        await _wait_for_tasks(s, baseline)
        # Mid-SSE: the call is waiting for an elicitation answer on its open stream.
        async with httpx.AsyncClient(timeout=30) as other:
            body = s.body("tools/call", {"name": "ask_name", "arguments": {}})
            async with other.stream("POST", server_url, json=body, headers=s.headers()) as r:
                stream = events(r)
                await anext(stream)  # priming
                ask = (await anext(stream)).message
                assert ask is not None
                assert ask["method"] == "elicitation/create"
            # leaving the block closed the stream without answering
        await _wait_for_tasks(s, baseline)
        late = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}}
        assert (await s.client.post(server_url, json=late, headers=s.headers())).status_code == 202


async def _wait_for_tasks(s: Session, baseline: int) -> None:
    for _ in range(100):
        if (await s.call("tasks"))["structuredContent"]["result"] <= baseline:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("a task outlived its cancelled call")


@asynccontextmanager
async def get_stream(
    s: Session, last_event_id: str | None = None
) -> AsyncIterator[AsyncIterator[Event]]:
    headers = {"accept": "text/event-stream", "mcp-session-id": s.id}
    if last_event_id is not None:
        headers["last-event-id"] = last_event_id
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("GET", s.url, headers=headers) as response,
    ):
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = events(response)
        priming = await anext(stream)
        assert priming["data"] == ""
        assert priming["id"]
        yield stream


async def _next_message(stream: AsyncIterator[Event]) -> tuple[str, dict[str, Any]]:
    event = await asyncio.wait_for(anext(stream), 10)
    assert event.message is not None
    return event["id"], event.message


async def test_the_get_stream_carries_list_changes_and_subscribed_updates(
    server_url: str,
) -> None:
    async with session(server_url) as s:
        await s.open()
        subscribed = await s.request("resources/subscribe", {"uri": "test://static-text"})
        assert subscribed.json()["result"] == {}
        async with get_stream(s) as stream:
            second = await s.client.get(
                server_url, headers={"accept": "text/event-stream", "mcp-session-id": s.id}
            )
            assert second.status_code == 409  # one GET stream per session
            await s.call("touch", {"uri": "test://static-text"})
            await s.call("touch", {"uri": "test://not-subscribed"})
            await s.call("announce")
            _, first = await _next_message(stream)
            _, then = await _next_message(stream)
        assert first["method"] == "notifications/resources/updated"
        assert first["params"]["uri"] == "test://static-text"
        assert then["method"] == "notifications/tools/list_changed"
        await s.request("resources/unsubscribe", {"uri": "test://static-text"})


async def test_last_event_id_replays_exactly_the_missed_events(server_url: str) -> None:
    async with session(server_url) as s:
        await s.open()
        subscribed = [f"test://r/{n}" for n in range(5)]
        for uri in subscribed:
            await s.request("resources/subscribe", {"uri": uri})
        async with get_stream(s) as stream:
            await s.call("touch", {"uri": subscribed[0]})
            seen, message = await _next_message(stream)
            assert message["params"]["uri"] == subscribed[0]
        # The connection is gone; these four are kept for the session's stream.
        for uri in subscribed[1:]:
            await s.call("touch", {"uri": uri})
        async with get_stream(s, last_event_id=seen) as stream:
            replayed = [await _next_message(stream) for _ in range(4)]
            await s.call("touch", {"uri": subscribed[0]})  # live again after the replay
            live_id, live = await _next_message(stream)
        assert [m["params"]["uri"] for _, m in replayed] == subscribed[1:]
        assert live["params"]["uri"] == subscribed[0]
        ids = [seen, *(event_id for event_id, _ in replayed), live_id]
        assert len(set(ids)) == 6
        # Resuming from the middle replays only what came after it.
        async with get_stream(s, last_event_id=replayed[2][0]) as stream:
            rest = [await _next_message(stream) for _ in range(2)]
        assert [m["params"]["uri"] for _, m in rest] == [subscribed[4], subscribed[0]]
        unknown = await s.client.get(
            server_url,
            headers={"accept": "text/event-stream", "mcp-session-id": s.id, "last-event-id": "z-9"},
        )
        assert unknown.status_code == 400

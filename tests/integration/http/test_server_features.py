"""Server features over real HTTP: typed results, offloading, timeouts, progress, logging,
cancellation on disconnect, pagination, MRTR, subscriptions, resources and prompts."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.integration.http.conftest import Rpc, body_for, headers_for, sse_messages
from tests.servers.basic_server import server as basic_server


def test_discover(rpc: Rpc) -> None:
    result = rpc.call("server/discover")["result"]
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == ["2026-07-28"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {
        "name": "basic-test-server",
        "version": "1.2.3",
    }
    assert set(result["capabilities"]) >= {"tools", "resources", "prompts"}
    assert result["instructions"] == "Tools for millimcp's own tests."
    # The served value is the server's configured list TTL (a minute by default), not any
    # number: a server that drops or zeroes it fails here.
    assert result["ttlMs"] == basic_server.config.list_ttl_ms > 0
    assert result["cacheScope"] in ("public", "private")


def _all_tools(rpc: Rpc) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    cursor = None
    for _ in range(20):
        reply = rpc.call("tools/list", {"cursor": cursor} if cursor else {})["result"]
        assert len(reply["tools"]) <= 5  # page_size=5 in the test server
        tools += reply["tools"]
        cursor = reply.get("nextCursor")
        if cursor is None:
            return tools
    raise AssertionError("pagination did not end")


def test_pagination_covers_every_tool_once(rpc: Rpc) -> None:
    names = [tool["name"] for tool in _all_tools(rpc)]
    assert len(names) == len(set(names))
    assert len(names) > 10
    assert names[0] == "echo"
    assert "filler_5" in names
    reply = rpc.call("tools/list", {"cursor": "not-a-cursor"})
    assert reply["error"]["code"] == -32602


def test_schemas_from_type_hints(rpc: Rpc) -> None:
    tools = {tool["name"]: tool for tool in _all_tools(rpc)}
    echo = tools["echo"]
    assert echo["inputSchema"] == {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }
    assert echo["annotations"] == {"readOnlyHint": True}
    assert echo["description"] == "Return the text unchanged."
    assert "outputSchema" not in echo
    order = tools["get_order"]
    assert order["outputSchema"]["properties"]["items"] == {
        "type": "array",
        "items": {"type": "string"},
    }
    assert tools["too_slow"]["_meta"] == {"dev.millimcp/timeoutMs": 200}
    move = tools["move"]
    assert move["inputSchema"]["properties"]["point"] == {"$ref": "#/$defs/Point"}
    assert move["inputSchema"]["$defs"]["Point"]["required"] == ["x", "y"]


def test_structured_content_with_text_mirror(rpc: Rpc) -> None:
    result = rpc.tool("get_order", {"order_id": 7})
    expected = {"id": 7, "items": ["apple", "pear"], "total": 3.5}
    assert result["structuredContent"] == expected
    assert json.loads(result["content"][0]["text"]) == expected
    moved = rpc.tool("move", {"point": {"x": 1, "y": 2}, "dx": 3})
    assert moved["structuredContent"] == {"x": 4, "y": 2}
    assert moved["content"] == []  # text_mirror=False


def test_sync_tools_run_off_the_event_loop(rpc: Rpc) -> None:
    assert rpc.tool("which_thread")["content"][0]["text"].startswith("millimcp-sync")


def test_a_blocking_sync_tool_does_not_delay_async_calls(server_url: str) -> None:
    finished: list[str] = []

    def call(name: str, arguments: dict[str, object]) -> None:
        with httpx.Client(timeout=30) as client:
            Rpc(client, server_url).tool(name, arguments)
        finished.append(name)

    with ThreadPoolExecutor(2) as pool:
        blocked = pool.submit(call, "block", {"seconds": 2.0})
        time.sleep(0.3)
        quick = pool.submit(call, "echo", {"text": "hi"})
        quick.result(timeout=30)
        blocked.result(timeout=30)
    assert finished == ["echo", "block"]


def test_tool_errors_are_results(rpc: Rpc) -> None:
    failed = rpc.tool("fail", {"message": "nope"})
    assert failed == {
        "resultType": "complete",
        "_meta": failed["_meta"],
        "content": [{"type": "text", "text": "nope"}],
        "isError": True,
    }
    crashed = rpc.tool("crash")
    assert crashed["isError"] is True
    assert "boom" in crashed["content"][0]["text"]


def test_per_tool_timeout(rpc: Rpc) -> None:
    started = time.monotonic()
    result = rpc.tool("too_slow")
    assert result["isError"] is True
    assert "timed out" in result["content"][0]["text"]
    assert time.monotonic() - started < 4  # the tool sleeps 5 s; its timeout is 0.2 s


def test_progress_and_logs_stream_as_sse(rpc: Rpc) -> None:
    params = {
        "name": "progress",
        "arguments": {"steps": 3},
        "_meta": {"progressToken": "p-1", "io.modelcontextprotocol/logLevel": "info"},
    }
    response = rpc.post(body_for("tools/call", params, 5), headers_for("tools/call", "progress"))
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["x-accel-buffering"] == "no"
    messages = sse_messages(response.text)
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [
        ("p-1", 1, 3),
        ("p-1", 2, 3),
        ("p-1", 3, 3),
    ]
    logs = [m["params"]["data"] for m in messages if m.get("method") == "notifications/message"]
    assert logs == ["step 1", "step 2", "step 3"]
    assert messages[-1]["id"] == 5
    assert messages[-1]["result"]["content"][0]["text"] == "3 steps"


def test_no_progress_token_and_no_log_level_means_plain_json(rpc: Rpc) -> None:
    response = rpc.post(
        body_for("tools/call", {"name": "progress", "arguments": {"steps": 2}}),
        headers_for("tools/call", "progress"),
    )
    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"] == "2 steps"


def test_closing_the_stream_cancels_the_handler(server_url: str, rpc: Rpc) -> None:
    tag = f"cancel-{time.monotonic_ns()}"

    def doomed() -> None:
        # The client gives up after 0.5 s and closes the connection.
        with (
            httpx.Client(timeout=httpx.Timeout(30, read=0.5)) as client,
            contextlib.suppress(httpx.ReadTimeout),
        ):
            Rpc(client, server_url).tool("slow", {"seconds": 30, "tag": tag})

    thread = threading.Thread(target=doomed)
    thread.start()
    thread.join(timeout=30)
    for _ in range(100):
        tags = rpc.tool("cancelled_tags")["structuredContent"]["result"]
        if tag in tags:
            return
        time.sleep(0.05)
    raise AssertionError(f"the handler was not cancelled; cancelled tags: {tags}")


def test_mrtr_round_trip_and_tampering(rpc: Rpc) -> None:
    first = rpc.tool("ask_name")
    assert first["resultType"] == "input_required"
    ((key, request),) = first["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    state = first["requestState"]
    answer = {key: {"action": "accept", "content": {"name": "Alice"}}}
    params = {"name": "ask_name", "arguments": {}, "inputResponses": answer}
    done = rpc.call("tools/call", {**params, "requestState": state}, 2)["result"]
    assert done["resultType"] == "complete"
    assert done["content"][0]["text"] == "hello Alice"
    tampered = rpc.call("tools/call", {**params, "requestState": state[:-2] + "AA"}, 3)
    assert tampered["error"]["code"] == -32602
    # A state sealed for one tool is refused by another.
    other = rpc.call(
        "tools/call", {"name": "echo", "arguments": {"text": "x"}, "requestState": state}, 4
    )
    assert other["error"]["code"] == -32602


def test_mrtr_needs_the_client_capability(rpc: Rpc) -> None:
    params = {
        "name": "ask_name",
        "arguments": {},
        "_meta": {"io.modelcontextprotocol/clientCapabilities": {}},
    }
    response = rpc.post(body_for("tools/call", params), headers_for("tools/call", "ask_name"))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"elicitation": {}}}


def test_resources(rpc: Rpc) -> None:
    listed = rpc.call("resources/list")["result"]
    assert [r["uri"] for r in listed["resources"]] == ["test://static-text"]
    templates = rpc.call("resources/templates/list")["result"]["resourceTemplates"]
    assert templates[0]["uriTemplate"] == "orders://{order_id}"
    read = rpc.call("resources/read", {"uri": "orders://42"})["result"]
    assert read["contents"] == [
        {"uri": "orders://42", "text": '{"order_id":"42"}', "mimeType": "application/json"}
    ]
    assert {"ttlMs", "cacheScope"} <= set(read)
    missing = rpc.call("resources/read", {"uri": "nope://1"})
    assert missing["error"]["code"] == -32602
    assert missing["error"]["data"] == {"uri": "nope://1"}


def test_prompts(rpc: Rpc) -> None:
    prompts = {p["name"]: p for p in rpc.call("prompts/list")["result"]["prompts"]}
    assert prompts["summarize"]["arguments"] == [
        {"name": "topic", "required": True},
        {"name": "style", "required": False},
    ]
    got = rpc.call("prompts/get", {"name": "summarize", "arguments": {"topic": "MCP"}})
    assert got["result"]["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Summarize MCP in a short way."}}
    ]
    missing = rpc.call("prompts/get", {"name": "summarize", "arguments": {}})
    assert missing["error"]["code"] == -32602


def test_subscription_stream(server_url: str, rpc: Rpc) -> None:
    params = {"notifications": {"resourceSubscriptions": ["orders://1"], "toolsListChanged": True}}
    frames: list[dict[str, Any]] = []
    with (
        httpx.Client(timeout=10) as client,
        client.stream(
            "POST",
            server_url,
            content=body_for("subscriptions/listen", params, 77),
            headers=headers_for("subscriptions/listen"),
        ) as stream,
    ):
        assert stream.headers["content-type"] == "text/event-stream"
        lines = stream.iter_lines()
        for line in lines:
            if line.startswith("data:"):
                frames.append(json.loads(line[5:]))
                break
        rpc.tool("touch", {"uri": "orders://2"})  # not subscribed: nothing arrives
        rpc.tool("touch", {"uri": "orders://1"})
        for line in lines:
            if line.startswith("data:"):
                frames.append(json.loads(line[5:]))
                break
    ack, update = frames
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": 77}
    assert update == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "orders://1", "_meta": {"io.modelcontextprotocol/subscriptionId": 77}},
    }


def test_completion_without_handler_is_empty(rpc: Rpc) -> None:
    params = {
        "ref": {"type": "ref/prompt", "name": "summarize"},
        "argument": {"name": "topic", "value": "M"},
    }
    reply = rpc.call("completion/complete", params)["result"]
    assert reply["completion"]["values"] == []


def test_keep_alive_reuses_one_connection(server_url: str) -> None:
    with httpx.Client() as client:
        rpc = Rpc(client, server_url)
        for _ in range(5):
            rpc.works()
        transport = client._transport
        assert isinstance(transport, httpx.HTTPTransport)
        assert len(transport._pool.connections) == 1

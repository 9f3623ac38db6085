"""The server fast path over real HTTP (uvicorn): backpressure, timeouts, offloading."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import free_port, start_server, stop_server
from tests.integration.http.conftest import Rpc, body_for, headers_for


def call_args(name: str, arguments: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    return {
        "content": body_for("tools/call", {"name": name, "arguments": arguments}, request_id),
        "headers": headers_for("tools/call", name),
    }


async def test_200_concurrent_calls_against_a_limit_of_10_with_a_queue_of_20(
    fast_url: str,
) -> None:
    limits = httpx.Limits(max_connections=250, max_keepalive_connections=250)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        calls = [
            asyncio.create_task(
                client.post(fast_url, **call_args("gated", {"tag": "t200", "n": n}, n))
            )
            for n in range(200)
        ]
        # The 170 refusals arrive while the 30 admitted calls are still held at the gate.
        while sum(c.done() for c in calls) < 170:
            await asyncio.sleep(0.05)
            failed = [c for c in calls if c.done() and c.exception() is not None]
            assert not failed, failed[0].exception()
        refused = [c.result() for c in calls if c.done()]
        assert all(r.status_code == 503 for r in refused), {r.status_code for r in refused}
        assert all(r.headers["retry-after"] == "2" for r in refused)
        assert all(r.json()["error"]["code"] == -32050 for r in refused)
        assert {r.json()["id"] for r in refused} <= set(range(200))
        await asyncio.sleep(0.2)
        assert sum(c.done() for c in calls) == 170  # the admitted 30 still wait

        opened = await client.post(fast_url, **call_args("open_gate", {"tag": "t200"}))
        assert opened.json()["result"]["content"][0]["text"] == "open"
        responses = await asyncio.wait_for(asyncio.gather(*calls), 30)
    ok = [r.json() for r in responses if r.status_code == 200]
    assert len(ok) == 30  # every call answered (30) or refused (170): none lost
    assert {m["id"] for m in ok} | {r.json()["id"] for r in refused} == set(range(200))
    assert all(m["result"]["content"][0]["text"] == f"t200 {m['id']}" for m in ok)


def test_the_server_answers_normally_after_an_overload(fast: Rpc) -> None:
    fast.works()
    assert fast.tool("open_gate", {"tag": "after"})["content"][0]["text"] == "open"
    assert fast.tool("gated", {"tag": "after", "n": 1})["content"][0]["text"] == "after 1"


def test_timeouts_are_advertised_with_a_server_default(fast: Rpc) -> None:
    tools = {t["name"]: t for t in fast.call("tools/list")["result"]["tools"]}
    assert tools["stuck"]["_meta"] == {"dev.millimcp/timeoutMs": 300}
    assert tools["echo"]["_meta"] == {"dev.millimcp/timeoutMs": 20_000}  # tool_timeout_s


def test_a_tool_over_its_timeout_is_cancelled_and_reported(fast: Rpc) -> None:
    result = fast.tool("stuck", {"tag": "t1"})
    assert result["isError"] is True
    assert result["content"][0]["text"] == "Tool 'stuck' timed out after 0.3 s"
    assert "t1" in fast.tool("cancelled")["structuredContent"]["result"]


def test_a_sync_tool_over_its_timeout_is_reported(fast: Rpc) -> None:
    result = fast.tool("stuck_sync", {"seconds": 3.0})
    assert result["isError"] is True
    assert "timed out after 0.3 s" in result["content"][0]["text"]
    fast.works()  # its thread still sleeps; the loop does not


def test_a_blocking_sync_tool_leaves_async_calls_undelayed(fast_url: str) -> None:
    """The sync tool blocks its thread until an async call releases it: if it blocked the
    event loop, the release could never run and the tool would report "never released"."""

    def call(name: str, arguments: dict[str, Any]) -> str:
        with httpx.Client(timeout=60) as client:
            text: str = Rpc(client, fast_url).tool(name, arguments)["content"][0]["text"]
            return text

    with ThreadPoolExecutor(2) as pool:
        blocked = pool.submit(call, "wait_in_thread", {"tag": "b1"})
        with httpx.Client(timeout=60) as client:
            rpc = Rpc(client, fast_url)
            for _ in range(5):
                rpc.works()
            assert not blocked.done()
            assert rpc.tool("release_thread", {"tag": "b1"})["content"][0]["text"] == "set"
        assert blocked.result(timeout=30) == "released"


def test_a_process_tool_runs_in_another_process(fast: Rpc) -> None:
    total, pid = fast.tool("cpu_bound", {"n": 1000})["structuredContent"]["result"]
    assert total == sum(i * i for i in range(1000))
    assert pid != fast.tool("server_pid")["structuredContent"]["result"]


@pytest.mark.interop
async def test_the_official_client_sees_a_refusal_as_an_mcp_error(fast_url: str) -> None:
    """The official SDK client turns the 503 into MCPError(-32050) with ``retryAfterMs``."""
    from mcp import Client, MCPError

    limits = httpx.Limits(max_connections=50)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        held = [
            asyncio.create_task(
                client.post(fast_url, **call_args("gated", {"tag": "sdk", "n": n}, n))
            )
            for n in range(30)  # 10 running + 20 queued: the tool is full
        ]
        try:
            for _ in range(500):
                await asyncio.sleep(0.02)
                load = await client.post(fast_url, **call_args("gated_load", {}))
                if load.json()["result"]["structuredContent"]["result"] == [10, 20]:
                    break
            refusal: MCPError | None = None
            async with Client(fast_url, mode="2026-07-28", cache=None) as sdk:
                try:
                    await sdk.call_tool("gated", {"tag": "sdk", "n": 100})
                except MCPError as exc:
                    refusal = exc
        finally:
            await client.post(fast_url, **call_args("open_gate", {"tag": "sdk"}))
            responses = await asyncio.gather(*held)
    assert refusal is not None
    assert refusal.error.code == -32050
    assert refusal.error.data == {"retryAfterMs": 2000}
    assert all(r.status_code == 200 for r in responses)


def test_stopping_the_server_stops_its_process_workers() -> None:
    """uvicorn ends the process by re-raising SIGTERM after the lifespan: the workers must be
    stopped by the lifespan itself, or they (and the forkserver) outlive the server."""
    port = free_port()
    target = "tests.servers.fastpath_server:server"
    process = start_server(["-m", "millimcp", "serve", target, "--port", str(port)], port)
    try:
        with httpx.Client(timeout=30) as client:
            rpc = Rpc(client, f"http://127.0.0.1:{port}/mcp")
            worker = rpc.tool("cpu_bound", {"n": 10})["structuredContent"]["result"][1]
        assert alive(worker)
    finally:
        stop_server(process)
    for _ in range(200):
        if not alive(worker):
            break
        time.sleep(0.05)
    assert not alive(worker), f"worker {worker} outlived the server"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state

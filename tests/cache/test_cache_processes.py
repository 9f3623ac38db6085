"""Two real server processes (``python -m millimcp serve``) sharing one Redis."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from tests.conftest import ROOT, free_port, start_server, stop_server
from tests.servers.inprocess import request


@pytest.fixture
def two_servers(redis_url: str) -> Iterator[tuple[str, str]]:
    env = {
        "MILLIMCP_TEST_REDIS_URL": redis_url,
        "MILLIMCP_TEST_CACHE_NS": f"procs-{uuid.uuid4().hex[:8]}",
    }
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    ports = [free_port(), free_port()]
    processes = []
    try:
        for port in ports:
            args = ["-m", "millimcp", "serve", "tests.servers.cache_server:server"]
            processes.append(start_server([*args, "--port", str(port)], port))
        yield tuple(f"http://127.0.0.1:{port}/mcp" for port in ports)  # type: ignore[misc]
    finally:
        for process in processes:
            stop_server(process)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def text(client: httpx.Client, url: str, tool: str, arguments: dict[str, object]) -> str:
    body, headers = request(tool, arguments)
    reply = client.post(url, content=body, headers=headers).json()
    assert "result" in reply, reply
    return str(reply["result"]["content"][0]["text"])


def test_an_invalidation_in_one_process_reaches_the_other(two_servers: tuple[str, str]) -> None:
    a, b = two_servers
    assert ROOT.is_dir()
    with httpx.Client(timeout=30) as client:
        filled = text(client, a, "orders", {"user_id": 42})
        assert " run 1" in filled
        # B finds A's entry in Redis, then keeps it in its own L1.
        assert text(client, b, "orders", {"user_id": 42}) == filled
        assert text(client, b, "orders", {"user_id": 42}) == filled
        stats = client.post(
            b, content=request("cache_stats", {})[0], headers=request("cache_stats", {})[1]
        ).json()["result"]["structuredContent"]
        assert stats["hits_l2"] == 1
        assert stats["hits_l1"] == 1
        # A write on A invalidates the tag: B drops its L1 entry when the message arrives.
        assert text(client, a, "place_order", {"user_id": 42}) == "placed"
        deadline = time.monotonic() + 5
        fresh = filled
        while fresh == filled and time.monotonic() < deadline:
            fresh = text(client, b, "orders", {"user_id": 42})
            time.sleep(0.01)
        assert fresh != filled
        assert " run 1" in fresh  # B ran the tool itself: the entry in Redis was stale too
        assert fresh.split(" from pid ")[1] != filled.split(" from pid ")[1]

"""Two real server processes (``python -m millimcp serve``) sharing one Redis."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import free_port, start_server, stop_server
from tests.servers.inprocess import request


@pytest.fixture
def two_servers(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """Two ``millimcp serve`` processes of tests/servers/cache_server.py on one Redis."""
    monkeypatch.setenv("MILLIMCP_TEST_REDIS_URL", redis_url)
    monkeypatch.setenv("MILLIMCP_TEST_CACHE_NS", f"procs-{uuid.uuid4().hex[:8]}")
    urls: list[str] = []
    processes = []
    try:
        for _ in range(2):
            port = free_port()
            args = ["-m", "millimcp", "serve", "tests.servers.cache_server:server"]
            processes.append(start_server([*args, "--port", str(port)], port))
            urls.append(f"http://127.0.0.1:{port}/mcp")
        yield urls[0], urls[1]
    finally:
        for process in processes:
            stop_server(process)


def result(client: httpx.Client, url: str, tool: str, arguments: dict[str, object]) -> Any:
    body, headers = request(tool, arguments)
    reply = client.post(url, content=body, headers=headers).json()
    assert "result" in reply, reply
    return reply["result"]


def text(client: httpx.Client, url: str, tool: str, arguments: dict[str, object]) -> str:
    return str(result(client, url, tool, arguments)["content"][0]["text"])


def test_an_invalidation_in_one_process_reaches_the_other(two_servers: tuple[str, str]) -> None:
    a, b = two_servers
    with httpx.Client(timeout=30) as client:
        filled = text(client, a, "orders", {"user_id": 42})
        assert " run 1" in filled
        # B finds A's entry in Redis, then keeps it in its own L1.
        assert text(client, b, "orders", {"user_id": 42}) == filled
        assert text(client, b, "orders", {"user_id": 42}) == filled
        stats = result(client, b, "cache_stats", {})["structuredContent"]
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

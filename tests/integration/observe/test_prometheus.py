"""/metrics: parsed by prometheus-client's own parser, in one process and across workers."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from millimcp import Cache, Server, ServerConfig, ToolError
from tests.conftest import free_port, start_server, stop_server
from tests.servers.inprocess import Caller, request


def families(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def sample(family: Any, suffix: str, **labels: str) -> float:
    for s in family.samples:
        if s.name == family.name + suffix and all(s.labels.get(k) == v for k, v in labels.items()):
            return float(s.value)
    raise AssertionError(f"no sample {family.name}{suffix} {labels}")


async def test_metrics_are_served_and_parse() -> None:
    tool = f"m_{uuid.uuid4().hex[:8]}"  # the metrics are per process: a name of our own
    server = Server("metered", config=ServerConfig(metrics_path="/metrics"))

    @server.tool(name=tool, cache=Cache(ttl=30))
    async def lookup(n: int) -> str:
        await asyncio.sleep(0.01)
        if n < 0:
            raise ToolError("negative")
        return str(n)

    app = server.asgi()
    async with Caller(app) as caller:
        for n in (1, 1, 1, 2, -1):
            await caller.post(tool, {"n": n})
        refused = await caller.client.post(
            caller.url, content=b"{}", headers={"content-type": "text/xml"}
        )
        assert refused.status_code == 415
        response = await caller.client.get("http://127.0.0.1:8000/metrics")
        wrong = await caller.client.post("http://127.0.0.1:8000/metrics")
    assert wrong.status_code == 405
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    found = families(response.text)
    duration = found["millimcp_request_duration_seconds"]
    assert sample(duration, "_count", method="tools/call", target=tool) == 5
    assert sample(duration, "_sum", method="tools/call", target=tool) >= 0.03
    assert sample(duration, "_bucket", method="tools/call", target=tool, le="+Inf") == 5
    cache = found["millimcp_cache_lookups"]
    assert sample(cache, "_total", tool=tool, outcome="miss") == 3
    assert sample(cache, "_total", tool=tool, outcome="hit-l1") == 2
    errors = found["millimcp_request_errors"]
    assert sample(errors, "_total", target=tool, status="tool_error") == 1
    assert sample(found["millimcp_rejected"], "_total", status="415") >= 1
    assert sample(found["millimcp_requests_in_flight"], "") == 0
    stages = found["millimcp_stage_seconds"]
    for stage in ("decode", "validate", "cache", "handler", "encode", "compress"):
        assert sample(stages, "_total", stage=stage) > 0
    handler = sample(stages, "_total", stage="handler")
    assert handler >= 0.03
    # The responses here are too short to compress: that stage is only the hand-off to the
    # transport, less than the handlers' 10 ms sleeps (handler time counted there fails this).
    assert sample(stages, "_total", stage="compress") < handler
    share = sample(found["millimcp_serialization_share"], "")
    assert 0 < share < 1
    assert "millimcp_event_loop_lag_seconds" in found


def test_metrics_of_every_worker_are_aggregated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``millimcp serve --workers 2`` with PROMETHEUS_MULTIPROC_DIR: one /metrics for both."""
    port = free_port()
    with monkeypatch.context() as env:
        env.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
        process = start_server(
            [
                "-m",
                "millimcp",
                "serve",
                "tests.servers.metered_server:server",
                "--port",
                str(port),
                "--workers",
                "2",
            ],
            port,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        pids: set[str] = set()
        calls = 0
        # New connections land on either worker; go on until both have answered.
        while len(pids) < 2 and calls < 200:
            with httpx.Client(timeout=30) as client:
                body, headers = request("whoami", {})
                reply = client.post(f"{url}/mcp", content=body, headers=headers).json()
                pids.add(reply["result"]["content"][0]["text"])
                calls += 1
        assert len(pids) == 2
        # Each worker flushes what it counted every 0.25 s (and the scraped one at once).
        counted = 0.0
        deadline = time.monotonic() + 5
        while counted != calls and time.monotonic() < deadline:
            time.sleep(0.1)
            with httpx.Client(timeout=30) as client:
                found = families(client.get(f"{url}/metrics").text)
            duration = found["millimcp_request_duration_seconds"]
            counted = sample(duration, "_count", method="tools/call", target="whoami")
    finally:
        stop_server(process)
    assert counted == calls

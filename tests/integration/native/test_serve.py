"""``serve_native`` in this process (lifespan, signals, drain) and the bridge to other routes."""

from __future__ import annotations

import asyncio
import os
import signal

import httpx
import pytest

from millimcp import Server, ServerConfig
from millimcp.errors import ConfigurationError
from millimcp.testing.processes import free_port
from millimcp.transports.native import NativeServer, serve_native
from tests.integration.http.conftest import request_for

server = Server("native-serve", config=ServerConfig(metrics_path="/metrics"))


@server.tool()
async def echo(text: str) -> str:
    return text


async def test_serve_native_until_sigterm_with_the_metrics_route() -> None:
    port = free_port()
    serving = asyncio.ensure_future(serve_native(server.asgi(), port=port, announce=False))
    url = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(timeout=10) as client:
        for _ in range(200):
            try:
                await client.get(f"{url}/metrics")
                break
            except httpx.ConnectError:
                await asyncio.sleep(0.02)
        body, headers = request_for("tools/call", {"name": "echo", "arguments": {"text": "m"}})
        reply = await client.post(f"{url}/mcp", content=body, headers=headers)
        assert reply.json()["result"]["content"][0]["text"] == "m"
        metrics = await client.get(f"{url}/metrics")
        assert metrics.status_code == 200
        assert "tools/call" in metrics.text
    os.kill(os.getpid(), signal.SIGTERM)  # the loop's handler starts the drain
    assert await asyncio.wait_for(serving, 10) == 0


def test_the_native_front_needs_the_endpoint_app() -> None:
    with pytest.raises(ConfigurationError, match="millimcp endpoint app"):
        NativeServer(object())

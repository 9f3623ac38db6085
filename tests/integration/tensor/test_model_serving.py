"""Model serving over real HTTP: a busy model leaves the event loop free, and the example
server gives concurrent callers their own correct logits."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from millimcp.codec.attachment import frame, split
from millimcp.protocol.types import META_CLIENT_CAPABILITIES
from millimcp.tensor import ATTACHMENT_MEDIA_TYPE, EXTENSION, decode_result, encode_arguments
from millimcp.testing import modern_request
from tests.conftest import free_port, start_server, stop_server

ROOT = Path(__file__).resolve().parents[3]
META: dict[str, Any] = {META_CLIENT_CAPABILITIES: {"extensions": {EXTENSION: {}}}}
"""A client that declares the tensor extension."""


def raw_call(
    name: str, arguments: dict[str, Any], request_id: int = 1
) -> tuple[bytes, dict[str, str]]:
    """A tools/call whose tensor arguments travel as an attachment (body, headers)."""
    args, attachment = encode_arguments(arguments, raw=True)
    params = {"name": name, "arguments": args, "_meta": META}
    body, headers = modern_request("tools/call", params, request_id=request_id)
    if attachment is not None:
        headers["content-type"] = ATTACHMENT_MEDIA_TYPE
        body = b"".join(frame(body, attachment))
    return body, headers


async def call(http: httpx.AsyncClient, url: str, name: str, arguments: dict[str, Any]) -> Any:
    """One raw-path tools/call; returns (result JSON, tensors)."""
    body, headers = raw_call(name, arguments)
    headers["accept"] = f"application/json, {ATTACHMENT_MEDIA_TYPE}"
    response = await http.post(url, content=body, headers=headers)
    assert response.status_code == 200, response.text
    data = None
    if response.headers["content-type"] == ATTACHMENT_MEDIA_TYPE:
        text, data = split(bytearray(response.content), 1 << 20)
        reply = json.loads(text)
    else:
        reply = response.json()
    return reply["result"], decode_result(reply["result"], data, "torch")


async def test_a_busy_model_does_not_delay_echo(tensor_url: str) -> None:
    """The model sleeps a full second per batch on its own thread; echo answers meanwhile."""
    async with httpx.AsyncClient(timeout=30) as http:
        await call(http, tensor_url, "echo", {"text": "warm"})
        inference = asyncio.create_task(
            call(http, tensor_url, "busy_double", {"x": torch.ones(2, 2)})
        )
        await asyncio.sleep(0.2)  # the model is now busy
        started = time.perf_counter()
        result, _ = await call(http, tensor_url, "echo", {"text": "still fast"})
        echo_s = time.perf_counter() - started
        assert not inference.done()
        _, tensors = await inference
    assert result["content"][0]["text"] == "still fast"
    assert torch.equal(tensors["result"], torch.full((2, 2), 2.0))
    assert echo_s < 0.5  # generous: the model holds its thread for 1 s


async def test_a_full_model_queue_refuses_at_once_with_503(tensor_url: str) -> None:
    """One call runs, one waits (max_queue_size=1), the third is refused without waiting."""
    async with httpx.AsyncClient(timeout=30) as http:
        running = asyncio.create_task(call(http, tensor_url, "narrow_double", {"x": torch.ones(1)}))
        await asyncio.sleep(0.3)
        queued = asyncio.create_task(call(http, tensor_url, "narrow_double", {"x": torch.ones(1)}))
        await asyncio.sleep(0.3)
        body, headers = raw_call("narrow_double", {"x": torch.ones(1)}, request_id=9)
        assert headers["content-type"] == ATTACHMENT_MEDIA_TYPE
        started = time.perf_counter()
        response = await http.post(tensor_url, content=body, headers=headers)
        refused_s = time.perf_counter() - started
        for task in (running, queued):
            _, tensors = await task
            assert torch.equal(tensors["result"], torch.full((1,), 2.0))
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    error = response.json()["error"]
    assert error["code"] == -32050
    assert "queue is full" in error["message"]
    assert refused_s < 0.5  # refused at once, not after the model frees up


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("model_server", ROOT / "examples/model_server.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def model_url() -> Iterator[str]:
    port = free_port()
    process = start_server(["examples/model_server.py", "--port", str(port)], port)
    yield f"http://127.0.0.1:{port}/mcp"
    stop_server(process)


async def test_the_example_gives_each_concurrent_caller_its_own_logits(model_url: str) -> None:
    reference = load_example().build_classifier().eval()
    images = [
        torch.rand(1, 3, 224, 224, generator=torch.Generator().manual_seed(i)) for i in range(16)
    ]
    with torch.inference_mode():
        expected = [reference(image) for image in images]
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=16)) as http:
        replies = await asyncio.gather(
            *(call(http, model_url, "classify", {"image": image}) for image in images)
        )
        info, _ = await call(http, model_url, "model_info", {})
    for (_, tensors), want in zip(replies, expected, strict=True):
        got = tensors["result"]
        assert got.shape == (1, 1000)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    batches = {int(k): v for k, v in info["structuredContent"]["batches"].items()}
    assert sum(k * v for k, v in batches.items()) == 16
    assert max(batches) > 1  # concurrent callers shared batches


async def test_the_example_refuses_a_wrong_shape_as_a_tool_error(model_url: str) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        result, _ = await call(http, model_url, "classify", {"image": torch.zeros(1, 3, 32, 32)})
    assert result["isError"] is True
    assert "expected float32 N x 3 x 224 x 224" in result["content"][0]["text"]

"""Interop: the official ``mcp`` 2.3.0 client against millimcp's tensor tools.

The official client does not know ``dev.millimcp/tensor``: it sends tensors as base64
safetensors blobs and gets each result tensor as an embedded resource with a base64 blob and
mimeType ``application/x-safetensors``, which it (here: the reference ``safetensors``
package) decodes to the same values.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager

import numpy as np
import pytest
import safetensors.numpy
from mcp import Client
from mcp.types import BlobResourceContents, EmbeddedResource, Implementation

from millimcp.tensor import EXTENSION, MEDIA_TYPE, encode_arguments
from tests.integration.interop.peers import MODERN, official_client, stdio_command

pytestmark = pytest.mark.interop


@asynccontextmanager
async def official(url: str) -> AsyncIterator[Client]:
    async with AsyncExitStack() as stack:
        yield await stack.enter_async_context(
            Client(
                url,
                mode="2026-07-28",
                cache=None,
                client_info=Implementation(name="tensor-interop", version="0"),
                read_timeout_seconds=60,
            )
        )


def tensors_of(content: Sequence[object]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for block in content:
        assert isinstance(block, EmbeddedResource)
        resource = block.resource
        assert isinstance(resource, BlobResourceContents)
        assert resource.mime_type == MEDIA_TYPE
        out.update(safetensors.numpy.load(base64.b64decode(resource.blob)))
    return out


async def test_official_client_gets_base64_tensors_with_the_same_values(tensor_url: str) -> None:
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    arguments, attachment = encode_arguments({"x": x, "factor": 0.5}, raw=False)
    assert attachment is None
    async with official(tensor_url) as client:
        result = await client.call_tool("scale", arguments)
        assert result.is_error is not True
        np.testing.assert_array_equal(tensors_of(result.content)["result"], x * 0.5)
        result = await client.call_tool("split", encode_arguments({"x": np.arange(9)}, False)[0])
        parts = tensors_of(result.content)
        np.testing.assert_array_equal(parts["low"], np.arange(4))
        np.testing.assert_array_equal(parts["high"], np.arange(4, 9))
        assert parts["sum"] == 36


async def test_official_client_receives_a_million_floats(tensor_url: str) -> None:
    async with official(tensor_url) as client:
        result = await client.call_tool("zeros", {"n": 1_000_000})
    values = tensors_of(result.content)["result"]
    np.testing.assert_array_equal(values, np.arange(1_000_000, dtype=np.float32) / 1e6)


async def test_official_client_sees_tensor_schemas(tensor_url: str) -> None:
    async with official(tensor_url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    schema = tools["identity"].input_schema["properties"]["x"]
    assert schema["x-millimcp-tensor"] == {"library": "numpy"}
    assert tools["identity"].meta is not None
    assert tools["identity"].meta[EXTENSION]["result"] is True


@pytest.mark.parametrize("mode", [MODERN, "legacy"], ids=["modern", "handshake"])
async def test_over_stdio_and_in_the_handshake_era_tensors_travel_as_base64(mode: str) -> None:
    x = np.arange(10, dtype=np.int16)
    async with official_client(
        stdio_command("tests.servers.tensor_server:server"), mode=mode
    ) as client:
        result = await client.call_tool("split", encode_arguments({"x": x}, raw=False)[0])
    parts = tensors_of(result.content)
    np.testing.assert_array_equal(parts["low"], x[:5])
    np.testing.assert_array_equal(parts["high"], x[5:])


async def test_handshake_era_over_http_gets_base64(tensor_url: str) -> None:
    async with official_client(tensor_url, mode="legacy") as client:
        result = await client.call_tool("scale", encode_arguments({"x": np.ones(3)}, False)[0])
    np.testing.assert_array_equal(tensors_of(result.content)["result"], np.full(3, 2.0))

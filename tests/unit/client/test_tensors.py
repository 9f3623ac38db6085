"""Tensors in memory: raw both ways in both eras when both sides declare the extension
(framed request and reply bodies, result tensors that are views of the one reply buffer),
base64 with ``tensors=False``."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import pytest
import torch

from millimcp import Client, Server
from millimcp.client.asgi_link import AsgiLink
from millimcp.client.tensors import TensorType
from millimcp.protocol.types import EmbeddedResource, ResourceLink
from millimcp.tensor import ATTACHMENT_MEDIA_TYPE
from millimcp.testing import connect
from tests.unit.client.conftest import Era

server = Server("tensors-in-memory")


@server.tool()
def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A sync tool: runs on the thread pool."""
    return a + b


@server.tool()
async def scale(x: np.ndarray, factor: float = 2.0) -> np.ndarray:
    return x * factor


@server.tool()
async def split(x: np.ndarray) -> dict[str, np.ndarray]:
    half = len(x) // 2
    return {"low": x[:half], "high": x[half:]}


@server.tool()
async def zeros(n: int) -> np.ndarray:
    return np.zeros(n, dtype=np.float32)


Exchanges = list[tuple[str, str, str]]
"""(HTTP method, request Content-Type, response Content-Type) of each call of the app."""
_KEYS = itertools.count()


@asynccontextmanager
async def recorded(era: Era, *, tensors: bool = True) -> AsyncIterator[tuple[Client, Exchanges]]:
    """A client of the tensor test server whose every exchange with the app is recorded."""
    seen: Exchanges = []
    async with server.running():
        app = server.asgi()

        async def recording(
            scope: MutableMapping[str, Any],
            receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
            send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
        ) -> None:
            sent = dict(scope["headers"]).get(b"content-type", b"").decode()

            async def watched(message: MutableMapping[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    got = dict(message["headers"]).get(b"content-type", b"").decode()
                    seen.append((scope["method"], sent, got))
                await send(message)

            await app(scope, receive, watched)

        link = AsgiLink(recording, tensors=tensors)
        key = f"memory:tensors#{next(_KEYS)}"
        async with Client(link, key=key, era=era, tensors=tensors) as client:
            yield client, seen


def _is_raw(content: list[Any]) -> bool:
    kinds = {type(block) for block in content}
    assert kinds in ({ResourceLink}, {EmbeddedResource}), kinds
    return kinds == {ResourceLink}


async def test_raw_both_ways_in_both_eras(era: Era) -> None:
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    async with recorded(era) as (client, seen):
        assert client.era == era
        result = await client.call_tool("add", {"a": x, "b": x})
    assert _is_raw(result.content)
    assert result.tensors is not None
    assert torch.equal(result.tensors["result"], x * 2)
    framed = [(sent, got) for _, sent, got in seen if sent == ATTACHMENT_MEDIA_TYPE]
    assert framed == [(ATTACHMENT_MEDIA_TYPE, ATTACHMENT_MEDIA_TYPE)]  # the call, both ways


async def test_without_the_extension_tensors_go_as_base64(era: Era) -> None:
    x = np.arange(5, dtype=np.float32)
    async with recorded(era, tensors=False) as (client, seen):
        result = await client.call_tool("scale", {"x": x, "factor": 3.0})
    assert not _is_raw(result.content)
    assert result.tensors is not None
    np.testing.assert_array_equal(result.tensors["result"], x * 3)
    assert all(ATTACHMENT_MEDIA_TYPE not in (sent, got) for _, sent, got in seen)


async def test_raw_results_are_views_of_one_buffer() -> None:
    async with connect(server) as client:
        result = await client.call_tool("split", {"x": np.arange(9)})
    assert _is_raw(result.content)
    assert result.tensors is not None
    low, high = result.tensors["low"], result.tensors["high"]
    np.testing.assert_array_equal(low, np.arange(4))
    np.testing.assert_array_equal(high, np.arange(4, 9))
    assert low.flags.writeable
    assert _bottom(low) is _bottom(high)
    assert isinstance(_bottom(low), bytearray)


def _bottom(array: np.ndarray) -> Any:
    base: Any = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return base.obj if isinstance(base, memoryview) else base


@pytest.mark.parametrize("tensor_type", ["numpy", "torch"])
async def test_the_result_type_is_as_asked(tensor_type: TensorType) -> None:
    async with connect(server, tensor_type=tensor_type) as client:
        result = await client.call_tool("zeros", {"n": 3})
    assert result.tensors is not None
    expected = np.ndarray if tensor_type == "numpy" else torch.Tensor
    assert isinstance(result.tensors["result"], expected)

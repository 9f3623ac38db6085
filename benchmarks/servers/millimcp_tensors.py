"""millimcp serving float32 tensors as ``numpy.ndarray``: raw bytes for clients that declare
``dev.millimcp/tensor``, base64 safetensors blobs for every other client."""

from __future__ import annotations

import numpy as np

from millimcp import HttpConfig, Server

DATA = np.random.default_rng(0).standard_normal(10_000_000).astype(np.float32)
server = Server("bench-tensors", version="1.0.0")


@server.tool()
async def out(n: int) -> np.ndarray:
    """n float32 values."""
    return DATA[:n]


@server.tool()
async def take(x: np.ndarray) -> int:
    return int(x.size)


@server.tool()
async def infer(x: np.ndarray) -> np.ndarray:
    """An image in, 1,000 floats out: the transport cost of a classifier."""
    logits: np.ndarray = DATA[:1000] + x[0, 0, 0, 0]
    return logits


@server.tool()
async def roundtrip(x: np.ndarray) -> np.ndarray:
    """The tensor back, unchanged (the transport both ways, nothing else)."""
    return x


@server.tool()
async def ping() -> str:
    """A trivial call: the MCP and HTTP cost with no tensor."""
    return "pong"


_FROM = DATA[:1_000_000].copy()
_INTO = np.empty_like(_FROM)


@server.tool()
async def copy() -> str:
    """A trivial call whose tool makes one 4 MB copy (numpy ``copyto``, 1M float32)."""
    np.copyto(_INTO, _FROM)
    return "copied"


app = server.asgi(http=HttpConfig(max_body_bytes=64 << 20))

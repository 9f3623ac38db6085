"""The official MCP Python SDK serving float32 tensors the two ways its users can: JSON text of
nested lists (``json.dumps(x.tolist())``, Q1 of SEEDS) and base64 strings of the raw bytes,
both as text content only (``structured_output=False``: by default the SDK would send a str
result twice, as text and as ``structuredContent``). Stateless, JSON responses (the SDK's
default SSE mode fails on results over 1 MiB: its client caps an SSE event at 1 MiB).
Request bodies up to 256 MiB (the default, 4 MiB, refuses 1M floats as a JSON list)."""

from __future__ import annotations

import base64
import json

import numpy as np
from mcp.server.mcpserver import MCPServer

DATA = np.random.default_rng(0).standard_normal(10_000_000).astype(np.float32)
server = MCPServer("bench-tensors", version="1.0.0")


@server.tool(structured_output=False)
async def out_list(n: int) -> str:
    """n float32 values as the JSON text of a list."""
    return json.dumps(DATA[:n].tolist())


@server.tool(structured_output=False)
async def out_b64(n: int) -> str:
    """n float32 values as base64 of their little-endian bytes."""
    return base64.b64encode(DATA[:n].tobytes()).decode("ascii")


@server.tool()
async def in_list(x: list[float]) -> int:
    return int(np.asarray(x, dtype=np.float32).size)


@server.tool()
async def in_b64(x: str) -> int:
    return int(np.frombuffer(base64.b64decode(x), dtype=np.float32).size)


@server.tool(structured_output=False)
async def infer_list(x: list[float]) -> str:
    """An image in (as a flat list), 1,000 floats out: the transport cost of a classifier."""
    image = np.asarray(x, dtype=np.float32).reshape(1, 3, 224, 224)
    return json.dumps((DATA[:1000] + image[0, 0, 0, 0]).tolist())


@server.tool(structured_output=False)
async def infer_b64(x: str) -> str:
    image = np.frombuffer(base64.b64decode(x), dtype=np.float32).reshape(1, 3, 224, 224)
    return base64.b64encode((DATA[:1000] + image[0, 0, 0, 0]).tobytes()).decode("ascii")


app = server.streamable_http_app(
    json_response=True, stateless_http=True, max_request_body_size=256 << 20
)

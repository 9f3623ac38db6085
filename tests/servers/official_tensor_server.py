"""The official MCP Python SDK (``mcp`` 2.3.0) with tensors the plain-MCP way, as a peer of
millimcp's client: ``--stdio``, or ``--port N`` for its Streamable HTTP app on 127.0.0.1.

It knows nothing of ``dev.millimcp/tensor``. Its tools return a tensor as an embedded
resource whose ``blob`` is base64 of a safetensors document (written by the reference
``safetensors`` package), and take one as ``{"blob": ..., "mimeType": ...}``.
"""

from __future__ import annotations

import argparse
import base64
from typing import Any

import numpy as np
import safetensors.numpy
from mcp.server.mcpserver import MCPServer
from mcp.types import BlobResourceContents, EmbeddedResource

MEDIA_TYPE = "application/x-safetensors"

server = MCPServer("official-tensors", version="2.3.0")


def tensor_block(name: str, array: np.ndarray) -> EmbeddedResource:
    blob = base64.b64encode(safetensors.numpy.save({name: array})).decode("ascii")
    return EmbeddedResource(
        type="resource",
        resource=BlobResourceContents(uri=f"tensor:{name}", mime_type=MEDIA_TYPE, blob=blob),
    )


@server.tool(structured_output=False)
async def ramp(n: int) -> list[EmbeddedResource]:
    """n float32 values i / n, and their int64 indices."""
    values = np.arange(n, dtype=np.float32) / np.float32(max(n, 1))
    return [tensor_block("values", values), tensor_block("index", np.arange(n))]


@server.tool(structured_output=False)
async def double(x: dict[str, Any]) -> EmbeddedResource:
    """Twice a tensor sent as {"blob": base64 safetensors, "mimeType": ...}."""
    (array,) = safetensors.numpy.load(base64.b64decode(x["blob"])).values()
    return tensor_block("result", array * 2)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int)
    parser.add_argument("--stdio", action="store_true")
    args = parser.parse_args()
    if args.stdio:
        server.run("stdio")
    else:
        import uvicorn

        app = server.streamable_http_app(json_response=True, max_request_body_size=64 << 20)
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")

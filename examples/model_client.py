"""Call examples/model_server.py: raw tensors (``dev.millimcp/tensor``) or plain MCP base64.

    python examples/model_server.py --port 8000 &
    python examples/model_client.py --url http://127.0.0.1:8000/mcp --calls 20
    python examples/model_client.py --url http://127.0.0.1:8000/mcp --base64

A minimal client written with httpx and millimcp.tensor's encode/decode helpers (millimcp's
own client, which will return tensors from ``call_tool``, is a separate piece of work).
With ``--concurrency N`` it runs N callers at once; the server batches them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import httpx
import torch

from millimcp.codec.attachment import frame, split
from millimcp.tensor import ATTACHMENT_MEDIA_TYPE, EXTENSION, decode_result, encode_arguments

VERSION = "2026-07-28"


class TensorClient:
    """One MCP endpoint; tools/call with tensors in and out."""

    def __init__(self, http: httpx.AsyncClient, url: str, *, raw: bool = True) -> None:
        self.http = http
        self.url = url
        self.raw = raw
        self.next_id = 0

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """(the result's JSON, its tensors by name)."""
        self.next_id += 1
        args, attachment = encode_arguments(arguments, self.raw)
        capabilities = {"extensions": {EXTENSION: {}}} if self.raw else {}
        message = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "tools/call",
            "params": {
                "name": name,
                "arguments": args,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": VERSION,
                    "io.modelcontextprotocol/clientCapabilities": capabilities,
                },
            },
        }
        body = json.dumps(message).encode()
        headers = {
            "Accept": f"application/json, text/event-stream, {ATTACHMENT_MEDIA_TYPE}",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": name,
            "Content-Type": "application/json",
        }
        content: Any = body
        if attachment is not None:
            headers["Content-Type"] = ATTACHMENT_MEDIA_TYPE
            content = b"".join(frame(body, attachment))
        response = await self.http.post(self.url, content=content, headers=headers)
        response.raise_for_status()
        data: Any = None
        if response.headers["content-type"].startswith(ATTACHMENT_MEDIA_TYPE):
            text, data = split(bytearray(response.content), 1 << 24)
            reply = json.loads(text)
        else:
            reply = response.json()
        if "error" in reply:
            raise RuntimeError(reply["error"]["message"])
        result = reply["result"]
        return result, decode_result(result, data, "torch")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/mcp")
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--base64", action="store_true", help="plain MCP, no extension")
    args = parser.parse_args()
    limits = httpx.Limits(max_connections=args.concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        client = TensorClient(http, args.url, raw=not args.base64)
        image = torch.rand(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
        latencies: list[float] = []

        async def caller(n: int) -> None:
            for _ in range(n):
                started = time.perf_counter()
                result, tensors = await client.call_tool("classify", {"image": image})
                latencies.append(time.perf_counter() - started)
                if result.get("isError"):
                    raise RuntimeError(result["content"][0]["text"])
                logits = tensors["result"]
                assert logits.shape == (1, 1000)

        started = time.perf_counter()
        await asyncio.gather(*(caller(args.calls) for _ in range(args.concurrency)))
        elapsed = time.perf_counter() - started
        _, tensors = await client.call_tool("classify", {"image": image})
        top = torch.topk(tensors["result"][0], 5)
        info, _ = await client.call_tool("model_info", {})
    mode = "base64" if args.base64 else "raw"
    total = args.calls * args.concurrency
    print(f"{total} calls ({mode}, {args.concurrency} at once) in {elapsed:.2f} s")
    print(f"  throughput {total / elapsed:.1f} calls/s")
    print(f"  p50 {statistics.median(latencies) * 1000:.1f} ms")
    print(f"  top-5 classes {top.indices.tolist()}")
    print(f"  server: {info['structuredContent']}")


if __name__ == "__main__":
    asyncio.run(main())

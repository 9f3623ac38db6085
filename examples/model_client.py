"""Call examples/model_server.py with millimcp's client: raw tensors or plain MCP base64.

    python examples/model_server.py --port 8000 &
    python examples/model_client.py --url http://127.0.0.1:8000/mcp --calls 20
    python examples/model_client.py --url http://127.0.0.1:8000/mcp --base64

``call_tool`` takes the image as a ``torch.Tensor`` and the logits come back in
``result.tensors``. Both sides declare ``dev.millimcp/tensor``, so the image and the logits
travel as raw bytes in the HTTP exchange; ``--base64`` turns the extension off on the client
(``tensors=False``) and they travel as base64 safetensors blobs, as with any other MCP peer.
With ``--concurrency N`` it runs N callers at once over one client; the server batches them.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import torch

from millimcp import Client, Limits


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/mcp")
    parser.add_argument("--calls", type=int, default=10, help="calls per caller")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--base64", action="store_true", help="plain MCP, no extension")
    args = parser.parse_args()
    image = torch.rand(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    latencies: list[float] = []
    async with Client.over_http(
        args.url,
        tensors=not args.base64,
        limits=Limits(max_in_flight=max(args.concurrency, 1)),
        timeout=60.0,
        max_message_bytes=32 << 20,  # base64 replies; raw ones are capped separately
    ) as client:

        async def caller(n: int) -> None:
            for _ in range(n):
                started = time.perf_counter()
                result = await client.call_tool("classify", {"image": image})
                latencies.append(time.perf_counter() - started)
                if result.is_error:
                    raise RuntimeError(result.text)
                assert result.tensors is not None
                assert result.tensors["result"].shape == (1, 1000)

        started = time.perf_counter()
        await asyncio.gather(*(caller(args.calls) for _ in range(args.concurrency)))
        elapsed = time.perf_counter() - started
        result = await client.call_tool("classify", {"image": image})
        assert result.tensors is not None
        top = torch.topk(result.tensors["result"][0], 5)
        info = await client.call_tool("model_info")
    mode = "base64" if args.base64 else "raw"
    total = args.calls * args.concurrency
    print(f"{total} calls ({mode}, {args.concurrency} at once) in {elapsed:.2f} s")
    print(f"  throughput {total / elapsed:.1f} calls/s")
    print(f"  p50 {statistics.median(latencies) * 1000:.1f} ms")
    print(f"  top-5 classes {top.indices.tolist()}")
    print(f"  server: {info.structured_content}")


if __name__ == "__main__":
    asyncio.run(main())

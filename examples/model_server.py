"""A PyTorch model behind MCP: a small CNN classifier on 1x3x224x224 images, 1,000 logits out.

    python examples/model_server.py --port 8000              # batching on (max 32, 2 ms)
    python examples/model_server.py --port 8000 --no-batching
    python examples/model_server.py --port 8000 --workers 2  # two processes, a copy each

The model is defined here and its weights come from a fixed seed (no download); it is loaded
once when the server starts, on CUDA when there is a GPU (``--device auto``), and runs on a
dedicated inference thread (or worker processes), never on the event loop. Concurrent calls
are batched (Triton semantics: ``--max-batch-size``, ``--max-queue-delay-ms``,
``--max-queue-size``). Clients that declare ``dev.millimcp/tensor`` exchange raw tensor bytes;
every other MCP client gets base64 safetensors blobs. See examples/model_client.py.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn

from millimcp import HttpConfig, Server
from millimcp.server.serve import run_app
from millimcp.tensor import Batching, Model

SEED = 0
BATCHING = Batching(max_batch_size=32, max_queue_delay_ms=2.0)


def build_classifier() -> nn.Module:
    """Three strided convolutions and a two-layer head: 8.4M parameters, seeded weights."""
    torch.manual_seed(SEED)
    return nn.Sequential(
        nn.Conv2d(3, 32, 5, stride=4, padding=2),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(7),
        nn.Flatten(),
        nn.Linear(64 * 7 * 7, 2048),
        nn.ReLU(),
        nn.Linear(2048, 1000),
    )


def make_server(
    *,
    batching: Batching | None = BATCHING,
    workers: int = 0,
    device: str = "auto",
) -> tuple[Server, Model]:
    model = Model(build_classifier, device=device, batching=batching, workers=workers)
    server = Server(
        "model-server",
        version="1.0.0",
        instructions="An image classifier: classify(image) returns 1,000 logits per image.",
        lifespan=model.lifespan,
    )

    @server.tool(annotations={"readOnlyHint": True})
    async def classify(image: torch.Tensor) -> torch.Tensor:
        """Logits (N x 1000) for a batch of N images, each 3 x 224 x 224 float32."""
        if image.dtype != torch.float32 or tuple(image.shape[1:]) != (3, 224, 224):
            raise ValueError(f"expected float32 N x 3 x 224 x 224, got {image.dtype} {image.shape}")
        return await model(image)

    @server.tool(annotations={"readOnlyHint": True})
    async def echo(text: str) -> str:
        """Return the text unchanged (shows the event loop stays free while the model runs)."""
        return text

    @server.tool(annotations={"readOnlyHint": True})
    async def model_info() -> dict[str, object]:
        """Where the model runs and how batches have formed so far."""
        batcher = model.batcher
        return {
            "device": model.device,
            "workers": model.workers,
            "batching": None if batching is None else str(batching),
            "batches": {} if batcher is None else dict(batcher.batches),
            "pid": os.getpid(),
            "time": time.time(),
        }

    return server, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--no-batching", action="store_true")
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--max-queue-delay-ms", type=float, default=2.0)
    parser.add_argument("--max-queue-size", type=int, default=1024)
    args = parser.parse_args()
    batching = (
        None
        if args.no_batching
        else Batching(args.max_batch_size, args.max_queue_delay_ms, args.max_queue_size)
    )
    server, _ = make_server(batching=batching, workers=args.workers, device=args.device)
    # base64 clients send a 1x3x224x224 image as ~0.8 MB of JSON; raw ones up to 64 MiB
    app = server.asgi(http=HttpConfig(max_body_bytes=32 << 20))
    run_app(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()

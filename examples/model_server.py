"""A PyTorch model behind MCP: a small CNN classifier on 1x3x224x224 images, 1,000 logits out.

    python examples/model_server.py --port 8000              # adaptive batching (up to 32)
    python examples/model_server.py --port 8000 --no-batching
    python examples/model_server.py --port 8000 --batching fixed --max-queue-delay-ms 2
    python examples/model_server.py --port 8000 --workers 2  # two processes, a copy each
    python examples/model_server.py --port 8000 --model mlp  # a wide MLP: N x 1024 -> N x 1000

The model is defined here and its weights come from a fixed seed (no download); it is loaded
once when the server starts, on CUDA when there is a GPU (``--device auto``), and runs on a
dedicated inference thread (or worker processes), never on the event loop. Concurrent calls
are batched: adaptively by default (the batcher learns each batch size's cost; optional
``--latency-objective-ms``), or with Triton's fixed knobs (``--batching fixed``,
``--max-batch-size``, ``--max-queue-delay-ms``); ``--max-queue-size`` bounds the queue.
Clients that declare ``dev.millimcp/tensor`` exchange raw tensor bytes; every other MCP
client gets base64 safetensors blobs. See examples/model_client.py.
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
BATCHING = Batching(max_batch_size=32)
MLP_WIDTH = 2048
MLP_INPUT = 1024


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


def build_mlp() -> nn.Module:
    """A wide MLP (1,024 -> 2,048 -> 2,048 -> 1,000, 8.3M parameters, seeded): memory-bound at
    one row, so batching pays much more than on the CNN."""
    torch.manual_seed(SEED)
    return nn.Sequential(
        nn.Linear(MLP_INPUT, MLP_WIDTH),
        nn.ReLU(),
        nn.Linear(MLP_WIDTH, MLP_WIDTH),
        nn.ReLU(),
        nn.Linear(MLP_WIDTH, 1000),
    )


SHAPES = {"cnn": (3, 224, 224), "mlp": (MLP_INPUT,)}


def make_server(
    *,
    batching: Batching | None = BATCHING,
    workers: int = 0,
    device: str = "auto",
    model_name: str = "cnn",
) -> tuple[Server, Model]:
    build = build_classifier if model_name == "cnn" else build_mlp
    shape = SHAPES[model_name]
    model = Model(build, device=device, batching=batching, workers=workers, name=model_name)
    server = Server(
        "model-server",
        version="1.0.0",
        instructions="An image classifier: classify(image) returns 1,000 logits per image.",
        lifespan=model.lifespan,
    )

    @server.tool(annotations={"readOnlyHint": True})
    async def classify(image: torch.Tensor) -> torch.Tensor:
        """Logits (N x 1000) for a batch of N inputs, each 3 x 224 x 224 float32 (the CNN)
        or 1,024 float32 (the MLP)."""
        if image.dtype != torch.float32 or tuple(image.shape[1:]) != shape:
            want = " x ".join(map(str, shape))
            raise ValueError(f"expected float32 N x {want}, got {image.dtype} {image.shape}")
        logits: torch.Tensor = await model(image)
        return logits

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
            "model": model_name,
            "batching": None if batching is None else str(batching),
            "batches": {} if batcher is None else dict(batcher.batches),
            "stats": {} if batcher is None else batcher.stats(),
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
    parser.add_argument("--model", choices=sorted(SHAPES), default="cnn")
    parser.add_argument("--no-batching", action="store_true")
    parser.add_argument("--batching", choices=["adaptive", "fixed"], default="adaptive")
    parser.add_argument("--latency-objective-ms", type=float, default=None)
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--max-queue-delay-ms", type=float, default=0.0, help="fixed mode")
    parser.add_argument("--max-queue-size", type=int, default=1024)
    args = parser.parse_args()
    batching = (
        None
        if args.no_batching
        else Batching(
            args.max_batch_size,
            args.max_queue_delay_ms,
            args.max_queue_size,
            mode=args.batching,
            latency_objective_ms=args.latency_objective_ms,
        )
    )
    server, _ = make_server(
        batching=batching, workers=args.workers, device=args.device, model_name=args.model
    )
    # base64 clients send a 1x3x224x224 image as ~0.8 MB of JSON; raw ones up to 64 MiB
    app = server.asgi(http=HttpConfig(max_body_bytes=32 << 20))
    run_app(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()

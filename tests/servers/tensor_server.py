"""A millimcp server with tensor tools for the tests: ``python tests/servers/tensor_server.py``.

Bodies up to 64 MiB so that base64 tensors of a few million floats fit.
"""

from __future__ import annotations

import argparse
import contextlib
import mmap
import resource
import time
from collections.abc import AsyncIterator

import numpy as np
import torch

from millimcp import Context, HttpConfig, Server, ServerConfig
from millimcp.server.serve import run_app
from millimcp.tensor import Batching, Model

BUSY_S = 1.0


class Busy(torch.nn.Module):
    """A model that keeps its inference thread busy for BUSY_S per batch (sleep + compute)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(BUSY_S)
        return x * 2


busy = Model(Busy, device="cpu", batching=Batching(max_batch_size=8))
narrow = Model(Busy, device="cpu", batching=Batching(max_batch_size=1, max_queue_size=1))


@contextlib.asynccontextmanager
async def lifespan(server: Server) -> AsyncIterator[None]:
    async with busy.lifespan(), narrow.lifespan():
        yield


server = Server("tensor-test-server", config=ServerConfig(state_key=b"t" * 32), lifespan=lifespan)


@server.tool()
async def narrow_double(x: torch.Tensor) -> torch.Tensor:
    """Like busy_double, on a model that queues at most one call."""
    doubled: torch.Tensor = await narrow(x)  # a Model returns what its module's forward does
    return doubled


@server.tool()
async def busy_double(x: torch.Tensor) -> torch.Tensor:
    """Twice x, after keeping the model busy for a second."""
    doubled: torch.Tensor = await busy(x)
    return doubled


@server.tool()
async def echo(text: str) -> str:
    return text


@server.tool()
async def identity(x: np.ndarray) -> np.ndarray:
    """Return the array unchanged."""
    return x


@server.tool()
async def identity_torch(x: torch.Tensor) -> torch.Tensor:
    return x


@server.tool()
async def scale(x: np.ndarray, factor: float = 2.0) -> np.ndarray:
    return x * factor


@server.tool()
def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A sync tool: runs on the thread pool."""
    return a + b


@server.tool()
async def mixed(a: torch.Tensor, x: np.ndarray) -> dict[str, str]:
    """A torch and a numpy parameter fed from one attachment."""
    return {"a": str(a.dtype), "x": str(x.dtype)}


@server.tool()
async def describe(xs: dict[str, np.ndarray]) -> dict[str, str]:
    return {name: f"{x.dtype}{list(x.shape)}" for name, x in xs.items()}


@server.tool()
async def split(x: np.ndarray) -> dict[str, np.ndarray]:
    """Halves of a 1-D array, and its sum as a 0-d array."""
    half = len(x) // 2
    return {"low": x[:half], "high": x[half:], "sum": np.array(x.sum())}


@server.tool()
async def zeros(n: int) -> np.ndarray:
    """n float32 values i / n (n up to 10M)."""
    return np.arange(n, dtype=np.float32) / np.float32(max(n, 1))


@server.tool()
async def page_faults(x: np.ndarray) -> int:
    """The page faults this thread takes reading every byte of x (a fresh mapping of 4 MB:
    about 1,000; a mapping kept from an earlier call: none)."""
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    float(x.sum())
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before


@server.tool()
async def process_faults() -> int:
    """The minor page faults this server process has taken so far, all threads."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@server.tool()
async def where(x: np.ndarray) -> str:
    """ "shm" when x is mapped from a shared-memory segment, else "message"."""
    base = x
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return "shm" if isinstance(getattr(base, "obj", None), mmap.mmap) else "message"


@server.tool()
async def maybe(x: np.ndarray | None = None) -> str:
    return "none" if x is None else str(x.shape)


@server.tool()
async def with_progress(x: np.ndarray, ctx: Context) -> np.ndarray:
    """Reports progress first, so the reply is an SSE stream: tensors go as base64."""
    await ctx.report_progress(1, 2)
    return x + 1


app = server.asgi(http=HttpConfig(max_body_bytes=64 << 20))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    run_app(app, port=parser.parse_args().port)

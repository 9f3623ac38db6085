"""Model hosting on a device: placement, one copy to the host per batch into pinned buffers,
results left on the device for in-process callers.

What runs on a CPU runs here; what needs CUDA is skipped without a GPU and runs in
``benchmarks/gpu_check.sh`` (step 6), the first time a GPU is lent.
"""

from __future__ import annotations

import asyncio

import pytest
import torch

from millimcp.errors import ConfigurationError
from millimcp.tensor import Batching, Model

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(
    not CUDA, reason="needs a CUDA device (torch sees none): benchmarks/gpu_check.sh runs it"
)


class Affine(torch.nn.Module):
    """y = 2x + 1 as a tensor, and as a dict and a tuple of two outputs (rows split alike)."""

    def __init__(self, shape: str = "tensor") -> None:
        super().__init__()
        self.shape = shape
        self.scale = torch.nn.Parameter(torch.tensor(2.0))

    def forward(self, x: torch.Tensor) -> object:
        y = x * self.scale + 1
        if self.shape == "dict":
            return {"y": y, "sum": y.sum(dim=1)}
        if self.shape == "tuple":
            return (y, y.sum(dim=1))
        return y


def build_tensor() -> Affine:
    return Affine("tensor")


def build_dict() -> Affine:
    return Affine("dict")


def build_tuple() -> Affine:
    return Affine("tuple")


def test_keep_on_device_needs_the_inference_thread() -> None:
    with pytest.raises(ConfigurationError, match="workers=0"):
        Model(build_tensor, keep_on_device=True, workers=2)


@pytest.mark.parametrize("keep", [False, True])
async def test_on_the_cpu_results_are_the_outputs_rows_with_no_copy(keep: bool) -> None:
    """On the CPU nothing is copied: each caller gets views of the batch output."""
    model = Model(
        build_tensor,
        device="cpu",
        batching=Batching.fixed(max_batch_size=8, max_queue_delay_ms=20),
        keep_on_device=keep,
    )
    async with model.lifespan():
        inputs = [torch.full((2, 3), float(i)) for i in range(6)]
        outputs = await asyncio.gather(*(model(x) for x in inputs))
        for x, y in zip(inputs, outputs, strict=True):
            assert y.device.type == "cpu"
            assert torch.equal(y, x * 2 + 1)
        storages = [y.untyped_storage().data_ptr() for y in outputs]
        assert len(set(storages)) < len(storages)  # callers batched together share the output


@needs_cuda
@pytest.mark.parametrize("build", [build_tensor, build_dict, build_tuple])
async def test_auto_places_the_model_on_cuda_and_results_come_back_pinned(build: object) -> None:
    model = Model(build, device="auto", batching=Batching(max_batch_size=16))  # type: ignore[arg-type]
    async with model.lifespan():
        assert model.device == "cuda"
        inputs = [torch.full((1 + i % 3, 4), float(i)) for i in range(24)]
        outputs = await asyncio.gather(*(model(x) for x in inputs))
        for x, out in zip(inputs, outputs, strict=True):
            y = out["y"] if isinstance(out, dict) else out[0] if isinstance(out, tuple) else out
            assert y.device.type == "cpu"
            assert y.is_pinned()  # one transfer per batch into page-locked memory, split as views
            assert torch.equal(y, x * 2 + 1)


@needs_cuda
async def test_keep_on_device_leaves_results_on_cuda_for_in_process_callers() -> None:
    model = Model(
        build_tensor, device="cuda", batching=Batching(max_batch_size=8), keep_on_device=True
    )
    async with model.lifespan():
        x = torch.arange(12.0).reshape(3, 4)
        y = await model(x)
        assert y.device.type == "cuda"
        assert torch.equal(y.cpu(), x * 2 + 1)


@needs_cuda
async def test_pinned_buffers_are_reused_from_batch_to_batch() -> None:
    """torch's caching host allocator hands a batch's pinned buffer to a later batch once no
    caller holds its rows: many batches, few distinct buffers."""
    model = Model(build_tensor, device="cuda")
    async with model.lifespan():
        pointers = set()
        for i in range(20):
            y = await model(torch.full((4, 256), float(i)))
            pointers.add(y.data_ptr())
            del y
        assert len(pointers) <= 2

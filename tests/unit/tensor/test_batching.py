"""Dynamic batching (Triton semantics) and model hosting, in-process with real torch models."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import numpy as np
import pytest
import torch

from millimcp.errors import ConfigurationError, Overloaded, ToolError
from millimcp.tensor import Batching, DynamicBatcher, Model, resolve_device
from millimcp.tensor.batching import Ran


class Gate:
    """A batch runner that waits for the test to open it, recording every batch."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.batches: list[list[Any]] = []

    async def run(self, items: list[Any]) -> list[Any]:
        self.batches.append(items)
        await self.open.wait()
        return [item * 10 for item in items]


async def test_sixty_four_concurrent_callers_each_get_their_own_result() -> None:
    gate = Gate()
    batcher: DynamicBatcher[int, int] = DynamicBatcher(gate.run, Batching.fixed(max_batch_size=16))
    calls = [asyncio.create_task(batcher.submit(i)) for i in range(64)]
    await asyncio.sleep(0.01)  # the first caller's batch runs alone; the rest queue behind it
    gate.open.set()
    assert await asyncio.gather(*calls) == [i * 10 for i in range(64)]
    sizes = [len(batch) for batch in gate.batches]
    assert sum(sizes) == 64
    assert max(sizes) == 16  # queued callers were joined, up to max_batch_size
    assert [item for batch in gate.batches for item in batch] == list(range(64))  # in order
    await batcher.close()


async def test_max_batch_size_counts_rows_not_requests() -> None:
    gate = Gate()
    gate.open.set()
    batcher: DynamicBatcher[np.ndarray, np.ndarray] = DynamicBatcher(
        gate.run, Batching.fixed(max_batch_size=5, max_queue_delay_ms=50), rows=len
    )
    arrays = [np.full(3, i) for i in range(4)]  # 3 rows each: never two in one batch of 5
    results = await asyncio.gather(*(batcher.submit(a) for a in arrays))
    for i, result in enumerate(results):
        np.testing.assert_array_equal(result, np.full(3, i * 10))
    assert [len(batch) for batch in gate.batches] == [1, 1, 1, 1]
    with pytest.raises(ToolError, match="larger than max_batch_size"):
        await batcher.submit(np.zeros(6))
    await batcher.close()


async def test_the_queue_is_bounded_and_refuses_at_once() -> None:
    gate = Gate()
    batcher: DynamicBatcher[int, int] = DynamicBatcher(
        gate.run, Batching(max_batch_size=1, max_queue_size=2)
    )
    running = asyncio.create_task(batcher.submit(0))
    await asyncio.sleep(0.01)  # in the model, not queued
    queued = [asyncio.create_task(batcher.submit(i)) for i in (1, 2)]
    await asyncio.sleep(0.01)
    with pytest.raises(Overloaded, match="queue is full") as refused:
        await batcher.submit(3)
    assert refused.value.http_status == 503
    gate.open.set()
    assert await asyncio.gather(running, *queued) == [0, 10, 20]
    await batcher.close()


async def test_queue_delay_waits_for_more_requests_and_zero_does_not() -> None:
    for delay_ms, expected in ((1000.0, [3]), (0.0, [1, 2])):
        gate = Gate()
        gate.open.set()
        batcher: DynamicBatcher[int, int] = DynamicBatcher(
            gate.run, Batching.fixed(max_batch_size=8, max_queue_delay_ms=delay_ms)
        )
        first = asyncio.create_task(batcher.submit(1))
        await asyncio.sleep(0.02)  # arrives while the first waits (delay) or runs (no delay)
        await asyncio.gather(first, batcher.submit(2), batcher.submit(3))
        assert [len(b) for b in gate.batches] == expected, delay_ms
        await batcher.close()


async def test_a_full_batch_does_not_wait_for_the_delay() -> None:
    gate = Gate()
    gate.open.set()
    batcher: DynamicBatcher[int, int] = DynamicBatcher(
        gate.run, Batching.fixed(max_batch_size=2, max_queue_delay_ms=60_000)
    )
    async with asyncio.timeout(5):
        assert list(await asyncio.gather(batcher.submit(1), batcher.submit(2))) == [10, 20]
    await batcher.close()


async def test_cancelled_callers_are_dropped_and_failures_reach_every_caller() -> None:
    gate = Gate()
    batcher: DynamicBatcher[int, int] = DynamicBatcher(gate.run, Batching(max_batch_size=8))
    first = asyncio.create_task(batcher.submit(0))
    await asyncio.sleep(0.01)
    leaving = asyncio.create_task(batcher.submit(1))
    staying = asyncio.create_task(batcher.submit(2))
    await asyncio.sleep(0.01)
    leaving.cancel()
    gate.open.set()
    assert list(await asyncio.gather(first, staying)) == [0, 20]
    assert [1 in batch for batch in gate.batches] == [False, False]
    await batcher.close()

    async def broken(items: list[int]) -> list[int]:
        raise RuntimeError("model exploded")

    failing: DynamicBatcher[int, int] = DynamicBatcher(broken, Batching(max_batch_size=4))
    results = await asyncio.gather(*(failing.submit(i) for i in range(3)), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    await failing.close()


def test_bad_settings_are_refused() -> None:
    for bad in ({"max_batch_size": 0}, {"max_queue_size": 0}, {"max_queue_delay_ms": -1}):
        with pytest.raises(ConfigurationError):
            Batching(**bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="mode"):
        Batching(mode="eager")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="latency_objective_ms"):
        Batching(latency_objective_ms=0)


async def test_the_policy_learns_the_run_time_that_run_reports() -> None:
    """A run that reports its own time (:class:`Ran`) is costed at that time, not at what the
    batcher's clock saw; a plain list, at the batcher's clock."""

    async def timed(items: list[int]) -> list[int]:
        await asyncio.sleep(0.03)
        return Ran([item * 10 for item in items], 0.002)

    async def plain(items: list[int]) -> list[int]:
        await asyncio.sleep(0.03)
        return [item * 10 for item in items]

    for run, low, high in ((timed, 0.002, 0.002), (plain, 0.03, 10.0)):
        batcher: DynamicBatcher[int, int] = DynamicBatcher(run, Batching(max_batch_size=8))
        assert await batcher.submit(4) == 40
        assert batcher.policy is not None
        (cost,) = batcher.policy.costs.measured().values()
        assert low <= cost <= high, run
        assert low * 1e3 <= batcher.stats()["per_row_ms"] <= high * 1e3
        await batcher.close()


# -- Model: load once, a dedicated thread, inference mode, batches split per caller -----------

BUILDS: list[str] = []


class Affine(torch.nn.Module):
    """y = 2x + 1, recording the batch sizes, threads and inference mode it ran with."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, str, bool]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        name = threading.current_thread().name
        self.seen.append((int(x.shape[0]), name, torch.is_inference_mode_enabled()))
        return x * 2 + 1


def build_affine() -> Affine:
    BUILDS.append(threading.current_thread().name)
    return Affine()


def build_pair() -> torch.nn.Module:
    class Pair(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"sum": x.sum(dim=1), "max": x.amax(dim=1)}

    return Pair()


async def test_model_batches_64_callers_and_each_gets_its_own_rows() -> None:
    BUILDS.clear()
    model = Model(build_affine, batching=Batching.fixed(max_batch_size=32, max_queue_delay_ms=5))
    async with model.lifespan():
        assert model.device == "cpu"  # "auto" without a GPU
        inputs = [torch.full((1 + i % 3, 4), float(i)) for i in range(64)]
        outputs = await asyncio.gather(*(model(x) for x in inputs))
        for x, y in zip(inputs, outputs, strict=True):
            assert torch.equal(y, x * 2 + 1)
        module = model._module
        assert isinstance(module, Affine)
        assert max(rows for rows, _, _ in module.seen) > 4  # callers were batched together
        assert all(rows <= 32 for rows, _, _ in module.seen)
        assert {name for _, name, _ in module.seen} == {BUILDS[0]}  # one thread, the loader's
        assert BUILDS[0].startswith("millimcp-cpu")
        assert all(inference for _, _, inference in module.seen)
        await model(torch.zeros(1, 4))
    assert len(BUILDS) == 1  # loaded once


async def test_numpy_in_numpy_out_and_dict_outputs_split() -> None:
    model = Model(build_pair, device="cpu", batching=Batching(max_batch_size=8))
    async with model.lifespan():
        arrays = [np.arange(6, dtype=np.float32).reshape(2, 3) + i for i in range(5)]
        results = await asyncio.gather(*(model(a) for a in arrays))
        for a, result in zip(arrays, results, strict=True):
            assert isinstance(result["sum"], np.ndarray)
            np.testing.assert_array_equal(result["sum"], a.sum(axis=1))
            np.testing.assert_array_equal(result["max"], a.max(axis=1))


class Slow(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.02)
        return x + 1


def build_slow() -> Slow:
    return Slow()


async def test_the_model_is_costed_on_its_inference_thread() -> None:
    """A forward pass of 20 ms, and the event loop busy for 150 ms meanwhile: the batcher
    learns 20 ms (timed on the inference thread), not the 150 ms until the loop saw the end."""
    model = Model(build_slow, device="cpu", batching=Batching(max_batch_size=8))
    async with model.lifespan():
        call = asyncio.create_task(model(torch.ones(1, 2)))
        await asyncio.sleep(0.005)  # the call is on the inference thread now (run alone)
        time.sleep(0.15)  # noqa: ASYNC251 (on purpose: the loop is held past the pass)
        assert torch.equal(await call, torch.full((1, 2), 2.0))
        batcher = model.batcher
        assert batcher is not None
        assert batcher.policy is not None
        assert batcher.alone == 1
        cost = batcher.policy.costs.measured()[1]
        assert 0.02 <= cost < 0.1, cost


async def test_without_batching_each_call_is_one_forward_pass() -> None:
    model = Model(build_affine, device="cpu")
    async with model.lifespan():
        results = await asyncio.gather(*(model(torch.ones(2, 2) * i) for i in range(5)))
        assert [r[0, 0].item() for r in results] == [1.0, 3.0, 5.0, 7.0, 9.0]
        assert {rows for rows, _, _ in model._module.seen} == {2}
        with pytest.raises(ToolError, match="tensor or an array"):
            await model([1, 2])


async def test_a_model_loads_on_first_use_without_a_lifespan() -> None:
    model = Model(build_affine, device="cpu")
    try:
        assert torch.equal(await model(torch.zeros(1, 1)), torch.ones(1, 1))
    finally:
        await model.close()


@pytest.mark.slow
async def test_worker_processes_each_load_the_model_and_share_the_batches() -> None:
    model = Model(build_affine, device="cpu", workers=2, batching=Batching.fixed(max_batch_size=8))
    async with model.lifespan():
        inputs = [torch.full((2, 3), float(i)) for i in range(24)]
        outputs = await asyncio.gather(*(model(x) for x in inputs))
        for x, y in zip(inputs, outputs, strict=True):
            assert torch.equal(y, x * 2 + 1)
        assert model.batcher is not None
        assert sum(model.batcher.batches.values()) < 24  # batched


def test_worker_processes_need_an_importable_build() -> None:
    with pytest.raises(ConfigurationError, match="module-level"):
        Model(lambda: Affine(), workers=2)
    with pytest.raises(ConfigurationError, match="workers"):
        Model(build_affine, workers=-1)


def test_auto_device_is_cpu_without_a_gpu() -> None:
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == "cpu"

"""Adaptive batching with a real torch model: a lone caller never waits, concurrent callers
are batched and get their own rows, and the batches are exported as Prometheus metrics."""

from __future__ import annotations

import asyncio
import uuid

import torch
from prometheus_client.parser import text_string_to_metric_families

from millimcp import Server, ServerConfig
from millimcp.tensor import Batching, Model
from tests.servers.inprocess import Caller


def build_mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))


async def test_a_lone_caller_runs_alone_and_never_waits() -> None:
    model = Model(build_mlp, device="cpu", batching=Batching(max_batch_size=16))
    async with model.lifespan():
        reference = build_mlp().eval()
        for i in range(20):
            x = torch.full((1, 64), float(i) / 20)
            with torch.inference_mode():
                want = reference(x)
            torch.testing.assert_close(await model(x), want)
        batcher = model.batcher
        assert batcher is not None
        stats = batcher.stats()
    assert stats["mode"] == "adaptive"
    assert stats["batches"] == {1: 20}
    assert stats["waits"] == 0
    assert stats["alone"] == 20  # each ran at once in its caller's task: no queue, no hop
    assert stats["limit"] == 1  # never a full batch of more than one: no reason to grow
    assert list(stats["cost_ms"]) == [1]


async def test_concurrent_callers_are_batched_and_metrics_exported() -> None:
    name = f"mlp_{uuid.uuid4().hex[:8]}"  # the metrics are per process: a name of our own
    model = Model(build_mlp, device="cpu", batching=Batching(max_batch_size=12), name=name)
    server = Server(
        "adaptive", config=ServerConfig(metrics_path="/metrics"), lifespan=model.lifespan
    )

    @server.tool()
    async def score(seed: int) -> list[float]:
        x = torch.full((1, 64), float(seed) / 100)
        return [float(v) for v in (await model(x))[0]]

    reference = build_mlp().eval()
    app = server.asgi()
    async with Caller(app) as caller:
        # the lifespan runs under ASGI lifespan events; without them the model loads on first use

        async def loop(seed: int) -> None:
            for _ in range(12):
                result = await caller.call("score", {"seed": seed})
                with torch.inference_mode():
                    want = reference(torch.full((1, 64), float(seed) / 100))[0]
                got = torch.tensor(result["structuredContent"]["result"])
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)

        await asyncio.gather(*(loop(seed) for seed in range(24)))
        response = await caller.client.get("http://127.0.0.1:8000/metrics")
    batcher = model.batcher
    assert batcher is not None
    stats = batcher.stats()
    await model.close()
    sizes = stats["batches"]
    assert sum(size * count for size, count in sizes.items()) == 24 * 12
    assert max(sizes) > 1  # callers shared batches
    assert max(sizes) <= 12  # never past max_batch_size
    assert 1 <= stats["limit"] <= 12
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    counted = {
        s.labels["rows"]: s.value
        for s in families["millimcp_batches"].samples
        if s.name == "millimcp_batches_total" and s.labels["model"] == name
    }
    assert sum(float(rows) * n for rows, n in counted.items()) <= 24 * 12
    assert counted  # flushed at the scrape: the batches so far, by size
    for family in ("millimcp_batch_rows", "millimcp_batch_run_seconds"):
        values = [s.value for s in families[family].samples if s.labels["model"] == name]
        assert values, family
        assert values[0] > 0, family

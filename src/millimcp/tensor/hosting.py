"""Model hosting: load once at start, infer off the event loop, batch concurrent calls.

::

    model = Model(build, device="auto", batching=Batching(max_batch_size=32))  # adaptive
    server = Server("classifier", lifespan=model.lifespan)

    @server.tool()
    async def classify(image: torch.Tensor) -> torch.Tensor:
        return await model(image)

``build()`` returns a ``torch.nn.Module`` (or any callable on a batch tensor). It runs once,
when the server starts, on the thread (or in each worker process) that will run inference;
the module is moved to its device once and put in eval mode. ``device="auto"`` picks CUDA
when present, else the CPU.

Results on a GPU are copied to the host once per batch, before they are split per caller and
framed: into page-locked (pinned) memory from torch's caching host allocator, so the copy is
a direct transfer and the buffers are reused from batch to batch once the last one's callers
have let go of their rows. ``keep_on_device=True`` (one inference thread only) leaves them on
the device instead, for in-process callers that go on computing there.

Inference never runs on the event loop:

- ``workers=0`` (default): one dedicated thread per model (so one per device), every forward
  pass under ``torch.inference_mode()``;
- ``workers=N``: a pool of N processes, each with its own copy of the model (``build`` must
  be importable: a module-level function). Batches travel to them in the tensor wire format
  (no pickled tensors); N batches may run at once.

With ``batching`` set, concurrent calls are joined along the first dimension (see
:mod:`millimcp.tensor.batching`) and each caller gets its own rows of the output back: a
tensor, or a tuple or dict of tensors, split the same way. Without it, each call is one
forward pass. A numpy input gets numpy output.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Final

from millimcp.errors import ConfigurationError, ToolError
from millimcp.tensor._imports import kind_of, load_torch
from millimcp.tensor.batching import Batching, DynamicBatcher, Ran
from millimcp.tensor.wire import pack, unpack

__all__ = ["Model", "resolve_device"]

log: Final = logging.getLogger("millimcp.tensor")


def resolve_device(device: str) -> str:
    """``"auto"`` -> ``"cuda"`` when torch sees a GPU, else ``"cpu"``; others unchanged."""
    if device != "auto":
        return device
    torch = load_torch()
    return "cuda" if torch.cuda.is_available() else "cpu"


class Model:
    """A model loaded once and served to concurrent callers (see the module docstring)."""

    def __init__(
        self,
        build: Callable[[], Any],
        *,
        device: str = "auto",
        batching: Batching | None = None,
        workers: int = 0,
        name: str | None = None,
        keep_on_device: bool = False,
    ) -> None:
        if workers < 0:
            raise ConfigurationError("workers must be 0 (a thread) or a number of processes")
        if keep_on_device and workers:
            raise ConfigurationError(
                "keep_on_device needs workers=0: results from worker processes come as bytes"
            )
        if workers and "<" in getattr(build, "__qualname__", "<"):
            raise ConfigurationError(
                f"{build!r}: worker processes import build by name: use a module-level function"
            )
        self.build = build
        self.requested_device = device
        self.batching = batching
        self.workers = workers
        self.keep_on_device = keep_on_device
        self.name: str = name or str(getattr(build, "__name__", "model"))
        self.device: str | None = None
        self._module: Any = None
        self._executor: Executor | None = None
        self._batcher: DynamicBatcher[Any, Any] | None = None
        self._lock: asyncio.Lock | None = None

    def __repr__(self) -> str:
        state = "started" if self._executor is not None else "stopped"
        return f"<Model {self.name} {state} device={self.device} batcher={self._batcher!r}>"

    @property
    def batcher(self) -> DynamicBatcher[Any, Any] | None:
        return self._batcher

    async def start(self) -> None:
        """Load the model (once) on its inference thread or in every worker process."""
        if self._executor is not None:
            return
        loop = asyncio.get_running_loop()
        self.device = device = resolve_device(self.requested_device)
        if self.workers == 0:
            executor: Executor = ThreadPoolExecutor(1, thread_name_prefix=f"millimcp-{device}")
            self._module = await loop.run_in_executor(executor, _load, self.build, device)
            instances = 1
        else:
            executor = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),  # forking a torch process hangs
                initializer=_worker_init,
                initargs=(self.build, device),
            )
            # start every process now (each loads the model) rather than on the first calls
            await asyncio.gather(
                *(loop.run_in_executor(executor, _worker_ready) for _ in range(self.workers))
            )
            instances = self.workers
        self._executor = executor
        if self.batching is not None:
            self._batcher = DynamicBatcher(
                self._run_batch, self.batching, rows=_rows, instances=instances, name=self.name
            )
        log.info("model %s loaded on %s (%s)", self.name, device, executor)

    async def close(self) -> None:
        if self._batcher is not None:
            await self._batcher.close()
            self._batcher = None
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        self._module = None

    @contextlib.asynccontextmanager
    async def lifespan(self, server: Any = None) -> AsyncIterator[Model]:
        """For ``Server(lifespan=model.lifespan)``: loaded at start, released at shutdown."""
        await self.start()
        try:
            yield self
        finally:
            await self.close()

    async def __call__(self, inputs: Any) -> Any:
        """Run the model on ``inputs`` (a batch: first dimension = rows); same kind back."""
        if self._executor is None:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                await self.start()  # not started by a lifespan: load on first use
        kind = kind_of(inputs)
        if kind is None:
            raise ToolError(f"model input must be a tensor or an array, not {type(inputs)}")
        if self._batcher is not None:
            output = await self._batcher.submit(inputs)
        else:
            (output,) = await self._run_batch([inputs])
        return _to_kind(output, kind)

    async def _run_batch(self, items: list[Any]) -> list[Any]:
        loop = asyncio.get_running_loop()
        executor = self._executor
        assert executor is not None
        if self.workers == 0:
            return await loop.run_in_executor(
                executor, _forward_split, self._module, self.device, items, self.keep_on_device
            )
        batch = await loop.run_in_executor(None, _concat, items)
        payload = pack({"input": batch}).tobytes()
        reply = await loop.run_in_executor(executor, _worker_run, payload)
        outputs = unpack(bytearray(reply), "torch")
        output: Any = outputs["output"] if set(outputs) == {"output"} else outputs
        return _split(output, [_rows(item) for item in items])


def _rows(item: Any) -> int:
    shape = item.shape
    if not shape:
        raise ToolError("model input needs a batch dimension (a 0-d tensor has none)")
    return int(shape[0])


def _load(build: Callable[[], Any], device: str) -> Any:
    torch = load_torch()
    module = build()
    if isinstance(module, torch.nn.Module):
        module = module.to(device).eval()
    return module


def _concat(items: list[Any]) -> Any:
    torch = load_torch()
    tensors = [torch.from_numpy(i) if kind_of(i) == "numpy" else i for i in items]
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors)


def _forward(module: Any, device: str | None, batch: Any, keep_on_device: bool = False) -> Any:
    torch = load_torch()
    with torch.inference_mode():
        output = module(batch.to(device, non_blocking=True))
        if keep_on_device:
            return output
        copied: set[Any] = set()
        host = _to_host(output, copied)
        for source in copied:  # the copies were queued on each stream: wait for them, once
            torch.cuda.current_stream(source).synchronize()
        return host


def _forward_split(
    module: Any, device: str | None, items: list[Any], keep_on_device: bool = False
) -> Ran[Any]:
    """On the inference thread: join, run, bring back to the host, split per caller; timed
    there (the batcher learns the model's cost, not the event loop's delays)."""
    started = time.perf_counter()
    output = _forward(module, device, _concat(items), keep_on_device)
    return Ran(_split(output, [_rows(item) for item in items]), time.perf_counter() - started)


def _to_host(output: Any, copied: set[Any]) -> Any:
    """``output`` (a tensor, or a dict, tuple or list of them) on the host; the devices that
    copies were queued from are added to ``copied``. Each device tensor goes into a pinned
    buffer of its shape (``torch.empty(pin_memory=True)``: torch's caching host allocator
    hands back the buffers of earlier batches once nothing holds them), ``non_blocking``, so
    that several outputs transfer back to back and the caller synchronises once."""
    if isinstance(output, dict):
        return {k: _to_host(v, copied) for k, v in output.items()}
    if isinstance(output, tuple | list):
        return type(output)(_to_host(v, copied) for v in output)
    if output.device.type == "cpu":
        return output
    torch = load_torch()
    host = torch.empty(output.shape, dtype=output.dtype, pin_memory=True)
    host.copy_(output, non_blocking=True)
    copied.add(output.device)
    return host


def _split(output: Any, rows: list[int]) -> list[Any]:
    """Each caller's rows of a batch output (views, not copies)."""
    if len(rows) == 1:
        return [output]
    if isinstance(output, dict):
        parts = {k: _split(v, rows) for k, v in output.items()}
        return [{k: parts[k][i] for k in output} for i in range(len(rows))]
    if isinstance(output, tuple | list):
        columns = [_split(v, rows) for v in output]
        return [type(output)(column[i] for column in columns) for i in range(len(rows))]
    if int(output.shape[0]) != sum(rows):
        raise ToolError(f"model returned {output.shape[0]} rows for a batch of {sum(rows)}")
    return list(output.split(rows))


def _to_kind(output: Any, kind: str) -> Any:
    if kind == "torch":
        return output
    if isinstance(output, dict):
        return {k: _to_kind(v, kind) for k, v in output.items()}
    if isinstance(output, tuple | list):
        return type(output)(_to_kind(v, kind) for v in output)
    return output.numpy()


# -- worker processes (workers=N) --------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _worker_init(build: Callable[[], Any], device: str) -> None:
    _WORKER["module"] = _load(build, device)
    _WORKER["device"] = device


def _worker_ready() -> bool:
    return "module" in _WORKER


def _worker_run(payload: bytes) -> bytes:
    batch = unpack(bytearray(payload), "torch")["input"]
    output = _forward(_WORKER["module"], _WORKER["device"], batch)
    tensors = output if isinstance(output, dict) else {"output": output}
    return pack(tensors).tobytes()

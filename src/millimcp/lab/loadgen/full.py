"""The full generator: every call through :meth:`millimcp.Client.call_tool`.

Used for stdio targets, and on HTTP with ``--client full``, to measure with a realistic
client's cost. Each slot is a worker that runs one call at a time as a task; a failed call
is counted under :func:`millimcp.lab.results.error_kind`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from millimcp.lab.loadgen.loop import Loop, Plan, Ready, Slot, measure
from millimcp.lab.recording import LoadReport, Recorder, TickReport
from millimcp.lab.results import TOOL_ERROR, error_kind

if TYPE_CHECKING:
    from millimcp.client import Client

__all__ = ["call_kind", "prepare_full", "run_full"]


class _Worker(Slot):
    __slots__ = ("engine",)

    def __init__(self, engine: _FullLoop) -> None:
        self.engine = engine

    def start(self, t0: int) -> None:
        self.engine.spawn(self, t0)


class _FullLoop(Loop):
    def __init__(
        self,
        plan: Plan,
        recorder: Recorder,
        client: Client,
        tool: str,
        arguments: Mapping[str, Any] | None,
        as_task: bool = False,
    ) -> None:
        super().__init__(plan, recorder)
        self.client = client
        self.tool = tool
        self.arguments = arguments
        self.as_task = as_task
        self.tasks: set[asyncio.Task[None]] = set()

    def spawn(self, worker: _Worker, t0: int) -> None:
        task = self.loop.create_task(self._call(worker, t0))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _call(self, worker: _Worker, t0: int) -> None:
        kind = await call_kind(
            self.client, self.tool, self.arguments, self.plan.timeout_s, as_task=self.as_task
        )
        self.finished(worker, t0, kind)

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        for task in list(self.tasks):
            with contextlib.suppress(BaseException):
                await task


async def call_kind(
    client: Client,
    tool: str,
    arguments: Mapping[str, Any] | None,
    timeout_s: float | None,
    *,
    as_task: bool = False,
) -> str | None:
    """Call ``tool`` through ``client``; the error kind (:func:`error_kind`), or None.
    ``as_task``: start it as a task and wait for the task's result (within ``timeout_s``)."""
    try:
        if as_task:
            async with asyncio.timeout(timeout_s):
                task = await client.call_tool(tool, arguments, timeout=timeout_s, as_task=True)
                result = await task.result()
        else:
            result = await client.call_tool(tool, arguments, timeout=timeout_s)
    except Exception as exc:  # every failure is counted, none stops the run
        return error_kind(exc)
    return TOOL_ERROR if result.is_error else None


async def prepare_full(
    client: Client,
    tool: str,
    arguments: Mapping[str, Any] | None,
    plan: Plan,
    on_tick: Callable[[TickReport], None],
    *,
    as_task: bool = False,
) -> Ready:
    """``plan.concurrency`` workers calling through an open Client (``as_task``: each call a
    task, waited for)."""
    recorder = Recorder()
    engine = _FullLoop(plan, recorder, client, tool, arguments, as_task)
    slots: list[Slot] = [_Worker(engine) for _ in range(plan.concurrency)]

    async def go(start_ns: int) -> LoadReport:
        try:
            window_s, cpu_s = await measure(engine, slots, start_ns, on_tick)
        finally:
            await engine.close()
        return recorder.report(window_s=window_s, cpu_s=cpu_s)

    return Ready(go, engine.close)


async def run_full(
    client: Client,
    tool: str,
    arguments: Mapping[str, Any] | None,
    plan: Plan,
    on_tick: Callable[[TickReport], None],
) -> LoadReport:
    """Run ``plan`` at once through an open Client (a single-process run)."""
    ready = await prepare_full(client, tool, arguments, plan, on_tick)
    report: LoadReport = await ready.go(time.perf_counter_ns())
    return report

"""Event-loop lag: how late a timer fires is how long the loop was busy with other work."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["LagProbe"]


class LagProbe:
    """Sleeps ``interval_s`` again and again and reports each oversleep (seconds)."""

    __slots__ = ("_task", "interval_s", "report")

    def __init__(self, report: Callable[[float], None], interval_s: float = 0.25) -> None:
        self.report = report
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"<LagProbe every {self.interval_s} s {'running' if self.running else 'idle'}>"

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def ensure_running(self) -> None:
        """Start on the running loop (again, if the loop it ran on has gone)."""
        task = self._task
        if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
            return
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        interval = self.interval_s
        while True:
            before = time.monotonic()
            await asyncio.sleep(interval)
            self.report(max(0.0, time.monotonic() - before - interval))

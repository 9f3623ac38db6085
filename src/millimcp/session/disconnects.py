"""Cancel handlers whose client went away, without a per-request timer.

Closing the response stream is how a Streamable HTTP client cancels a request, but noticing
it takes a task that waits on the connection. Starting one per request would cost more than
a trivial tool call, so requests only register here (a set insertion), and one sweeper task
per event loop, waking every ``period`` seconds, starts a watcher for each request that has
been running for a full period. Fast calls finish before anyone looks at them.
"""

from __future__ import annotations

import asyncio
import contextlib

from millimcp.transports.http import Exchange

__all__ = ["DisconnectSweeper"]


def _start_watching(exchange: Exchange) -> None:
    watcher = asyncio.ensure_future(exchange.wait_disconnect())
    exchange.watcher = watcher

    def on_done(done: asyncio.Future[None]) -> None:
        if done.cancelled() or done.exception() is not None:
            return
        exchange.disconnected = True
        if exchange.task is not None:
            exchange.task.cancel()

    watcher.add_done_callback(on_done)


class DisconnectSweeper:
    """Hot path: ``active.add(exchange)``, ``ensure_running()`` only when ``task is None``,
    then :meth:`leave`. (The dispatcher inlines the first two.)"""

    __slots__ = ("_idle_sweeps", "active", "period", "task")

    def __init__(self, period: float = 0.05) -> None:
        self.period = period
        self.active: set[Exchange] = set()
        self.task: asyncio.Task[None] | None = None
        """The sweeper's task; None when it is not running (it stops when idle, and when its
        event loop shuts down and cancels it)."""
        self._idle_sweeps = 0

    def __repr__(self) -> str:
        return f"<DisconnectSweeper active={len(self.active)} running={self.task is not None}>"

    def enter(self, watched: Exchange) -> None:
        self.active.add(watched)
        if self.task is None:
            self.ensure_running()

    def ensure_running(self) -> None:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._sweep())

    def leave(self, watched: Exchange) -> None:
        self.active.discard(watched)
        if watched.watcher is not None:
            watched.watcher.cancel()

    async def _sweep(self) -> None:
        try:
            while True:
                await asyncio.sleep(self.period)
                if not self.active:
                    self._idle_sweeps += 1
                    if self._idle_sweeps > 20:
                        return  # idle: stop; the next request starts a new sweeper
                    continue
                self._idle_sweeps = 0
                for watched in tuple(self.active):
                    if watched.watcher is None:
                        if watched.age:
                            _start_watching(watched)
                        else:
                            watched.age = 1
        finally:
            with contextlib.suppress(RuntimeError):
                if self.task is asyncio.current_task():
                    self.task = None

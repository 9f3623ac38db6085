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
    __slots__ = ("_active", "_idle_sweeps", "_loop", "_task", "period")

    def __init__(self, period: float = 0.05) -> None:
        self.period = period
        self._active: set[Exchange] = set()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle_sweeps = 0

    def __repr__(self) -> str:
        return f"<DisconnectSweeper active={len(self._active)} running={self._task is not None}>"

    def enter(self, watched: Exchange) -> None:
        self._active.add(watched)
        if self._task is None or self._loop is not asyncio.get_running_loop():
            self._loop = asyncio.get_running_loop()
            self._task = self._loop.create_task(self._sweep())

    def leave(self, watched: Exchange) -> None:
        self._active.discard(watched)
        if watched.watcher is not None:
            watched.watcher.cancel()

    async def _sweep(self) -> None:
        try:
            while True:
                await asyncio.sleep(self.period)
                if not self._active:
                    self._idle_sweeps += 1
                    if self._idle_sweeps > 20:
                        return  # idle: stop; the next request starts a new sweeper
                    continue
                self._idle_sweeps = 0
                for watched in tuple(self._active):
                    if watched.watcher is None:
                        if watched.age:
                            _start_watching(watched)
                        else:
                            watched.age = 1
        finally:
            with contextlib.suppress(RuntimeError):
                if self._task is asyncio.current_task():
                    self._task = None

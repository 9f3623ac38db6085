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

from millimcp.session.inflight import Call

__all__ = ["DisconnectSweeper"]


def _start_watching(call: Call) -> None:
    assert call.disconnect is not None
    watcher = asyncio.ensure_future(call.disconnect.wait_disconnect())
    call.watcher = watcher

    def on_done(done: asyncio.Future[None]) -> None:
        if done.cancelled() or done.exception() is not None:
            return
        call.disconnected = True
        if call.task is not None:
            call.task.cancel()

    watcher.add_done_callback(on_done)


class DisconnectSweeper:
    """Hot path: :meth:`enter` (a set insertion; the sweeper starts when it is not running),
    then :meth:`leave`."""

    __slots__ = ("_idle_sweeps", "active", "period", "task")

    def __init__(self, period: float = 0.05) -> None:
        self.period = period
        self.active: set[Call] = set()
        self.task: asyncio.Task[None] | None = None
        """The sweeper's task; None when it is not running (it stops when idle, and when its
        event loop shuts down and cancels it)."""
        self._idle_sweeps = 0

    def __repr__(self) -> str:
        return f"<DisconnectSweeper active={len(self.active)} running={self.task is not None}>"

    def enter(self, call: Call) -> None:
        """Watch ``call`` (it has a ``disconnect`` to wait on) while it runs."""
        self.active.add(call)
        if self.task is None:
            self.start()

    def start(self) -> None:
        """Start sweeping (when not running already)."""
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._sweep())

    def leave(self, call: Call) -> None:
        self.active.discard(call)
        if call.watcher is not None:
            call.watcher.cancel()

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
                for call in tuple(self.active):
                    if call.watcher is None:
                        if call.age:
                            _start_watching(call)
                        else:
                            call.age = 1
        finally:
            with contextlib.suppress(RuntimeError):
                if self.task is asyncio.current_task():
                    self.task = None

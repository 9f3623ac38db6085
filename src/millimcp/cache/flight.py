"""Single-flight: identical concurrent calls share one execution.

The execution runs in its own task so that one caller going away (a client disconnect
cancels its request) does not cancel it for the others; it is cancelled only when every
caller has gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["Flights"]

T = TypeVar("T")


class _Flight(Generic[T]):
    __slots__ = ("task", "waiters")

    def __init__(self, task: asyncio.Task[T]) -> None:
        self.task = task
        self.waiters = 0


class Flights(Generic[T]):
    """The executions in progress, by key."""

    __slots__ = ("_running",)

    def __init__(self) -> None:
        self._running: dict[Hashable, _Flight[T]] = {}

    def __len__(self) -> int:
        return len(self._running)

    def __repr__(self) -> str:
        return f"<Flights running={len(self._running)}>"

    def running(self, key: Hashable) -> bool:
        return key in self._running

    async def run(self, key: Hashable, make: Coroutine[Any, Any, T] | None) -> T:
        """Join the execution of ``key``, starting ``make`` if none runs.

        Pass ``make=None`` only to join one known to be running.
        """
        flight = self._running.get(key)
        if flight is None:
            if make is None:
                raise KeyError(key)
            flight = _Flight(asyncio.get_running_loop().create_task(make))
            self._running[key] = flight
            flight.task.add_done_callback(lambda task: self._landed(key, task))
        elif make is not None:
            make.close()
        flight.waiters += 1
        try:
            return await asyncio.shield(flight.task)
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                flight.task.cancel()

    def _landed(self, key: Hashable, task: asyncio.Task[T]) -> None:
        if self._running.get(key) is not None and self._running[key].task is task:
            del self._running[key]
        if not task.cancelled():
            task.exception()  # retrieved: nobody may be left to await it

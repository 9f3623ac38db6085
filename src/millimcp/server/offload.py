"""Running handlers off the event loop: sync ones on threads, CPU-bound ones in processes.

A sync handler on the event loop stalls every other call (SEEDS S2.4, S5.1), so sync handlers
run on the server's bounded thread pool. A thread cannot be stopped from outside: a sync tool
past its timeout is answered as timed out at once, but keeps its thread until it returns.

CPU-bound tools (``@server.tool(executor="process")``) run in a process pool, outside the
GIL. Their function and arguments cross the process boundary by pickling, so the function
must be a module-level (importable) sync function and take no ``Context``. Workers start with
``forkserver`` where available (a fork of a threaded server process can deadlock).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import multiprocessing
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from millimcp.errors import ConfigurationError

__all__ = [
    "Pools",
    "check_process_safe",
    "new_process_pool",
    "run_in_process",
    "run_sync",
    "stop_process_pool",
]


def run_sync(
    executor: Executor | None, fn: Callable[..., Any], kwargs: dict[str, Any]
) -> asyncio.Future[Any]:
    """Schedule ``fn(**kwargs)`` on ``executor``; the future resolves on the event loop."""
    call = functools.partial(contextvars.copy_context().run, fn, **kwargs)
    return asyncio.get_running_loop().run_in_executor(executor, call)


def run_in_process(
    executor: Executor, fn: Callable[..., Any], kwargs: dict[str, Any]
) -> asyncio.Future[Any]:
    """Schedule ``fn(**kwargs)`` in a process pool (no context variables cross over)."""
    return asyncio.get_running_loop().run_in_executor(executor, functools.partial(fn, **kwargs))


def check_process_safe(fn: Callable[..., Any]) -> None:
    """Refuse, at registration, a function that cannot run in a worker process."""
    where = getattr(fn, "__qualname__", repr(fn))
    if inspect.iscoroutinefunction(fn):
        raise ConfigurationError(f"{where}: executor='process' needs a sync function")
    if "<locals>" in where or "<lambda>" in where or not getattr(fn, "__module__", None):
        raise ConfigurationError(
            f"{where}: executor='process' needs a module-level function (it is pickled by name)"
        )


def new_process_pool(workers: int) -> ProcessPoolExecutor:
    methods = multiprocessing.get_all_start_methods()
    method = "forkserver" if "forkserver" in methods else "spawn"
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method))


def stop_process_pool(pool: ProcessPoolExecutor) -> None:
    """Stop the pool and its workers now, without waiting for calls still running.

    ``shutdown(wait=False)`` alone leaves the workers to be told at interpreter exit, which
    never comes when the HTTP server ends the process by re-raising SIGTERM (uvicorn does):
    the workers, and the forkserver they keep alive, would be orphaned. By the time the
    lifespan ends, requests are finished; a call still running here was abandoned (timed out).
    """
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14+: shuts down too
    if terminate is not None:
        terminate()
        return
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        worker.terminate()


class Pools:
    """A server's thread pool (sync handlers) and process pool (``executor="process"``
    tools), each started on first use and stopped by :meth:`close` (a later use starts a new
    one)."""

    __slots__ = ("_processes", "_threads", "process_workers", "thread_workers")

    def __init__(self, thread_workers: int, process_workers: int) -> None:
        self.thread_workers = thread_workers
        self.process_workers = process_workers
        self._threads: ThreadPoolExecutor | None = None
        self._processes: ProcessPoolExecutor | None = None

    def __repr__(self) -> str:
        return (
            f"<Pools threads={'on' if self._threads else 'off'} "
            f"processes={'on' if self._processes else 'off'}>"
        )

    @property
    def threads(self) -> ThreadPoolExecutor:
        threads = self._threads
        if threads is None:
            threads = self._threads = ThreadPoolExecutor(
                self.thread_workers, thread_name_prefix="millimcp-sync"
            )
        return threads

    @property
    def processes(self) -> ProcessPoolExecutor:
        processes = self._processes
        if processes is None:
            processes = self._processes = new_process_pool(self.process_workers)
        return processes

    @property
    def started_processes(self) -> ProcessPoolExecutor | None:
        """The process pool if it has been started, else None (nothing is started)."""
        return self._processes

    def close(self) -> None:
        """Stop both pools without waiting for calls still running."""
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None
        if self._processes is not None:
            stop_process_pool(self._processes)
            self._processes = None

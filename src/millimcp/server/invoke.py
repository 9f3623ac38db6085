"""Running a registered function, the same way for tools, resources, prompts and completions.

An async function is awaited on the event loop, inside ``asyncio.timeout`` when it has a
timeout. A sync function never runs on the event loop: it runs on the server's thread pool
(with a copy of the caller's context variables), or in its process pool for
``executor="process"`` tools; past its timeout the call raises ``TimeoutError`` at once, while
the thread keeps running until the function returns (see :mod:`millimcp.server.offload`).
A parameter annotated ``Context`` receives the request's context.
"""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from millimcp.errors import ConfigurationError
from millimcp.server.offload import Pools, check_process_safe, run_in_process, run_sync
from millimcp.session import Context

__all__ = ["Invoker", "context_parameter"]


class Invoker:
    """How one registered function runs: where (loop, threads, processes), for how long at
    most, and which parameter, if any, gets the :class:`Context`."""

    __slots__ = ("context_param", "fn", "is_async", "process", "timeout")

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        context_param: str | None,
        timeout: float | None = None,
        process: bool = False,
    ) -> None:
        if process:
            check_process_safe(fn)
            if context_param is not None:
                raise ConfigurationError(f"{fn.__qualname__}: a process tool cannot take a Context")
        self.fn = fn
        self.context_param = context_param
        self.timeout = timeout
        self.process = process
        self.is_async = inspect.iscoroutinefunction(fn)

    def __repr__(self) -> str:
        where = "async" if self.is_async else "process" if self.process else "thread"
        return f"<Invoker {getattr(self.fn, '__qualname__', self.fn)!r} {where}>"

    def __call__(self, kwargs: dict[str, Any], ctx: Context, pools: Pools) -> Awaitable[Any]:
        """Start ``fn(**kwargs)``; awaiting the result gives its value or raises what it raised
        (``TimeoutError`` past the timeout). ``kwargs`` is the caller's to give away: the
        context is added to it."""
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        if self.is_async:
            call: Coroutine[Any, Any, Any] = self.fn(**kwargs)
            return call if self.timeout is None else _within(self.timeout, call)
        if self.process:
            future = run_in_process(pools.processes, self.fn, kwargs)
        else:
            future = run_sync(pools.threads, self.fn, kwargs)
        return future if self.timeout is None else asyncio.wait_for(future, self.timeout)


async def _within(seconds: float, call: Coroutine[Any, Any, Any]) -> Any:
    async with asyncio.timeout(seconds):
        return await call


def context_parameter(fn: Callable[..., Any]) -> str | None:
    """The name of ``fn``'s parameter annotated ``Context`` (or a subclass), or None.

    String annotations are resolved as ``typing.get_type_hints`` does; where a name cannot be
    resolved, the annotation is read as written (``"Context"`` still counts)."""
    try:
        hints = typing.get_type_hints(fn)
    except (AttributeError, NameError, SyntaxError, TypeError):
        hints = {}
    for name, param in inspect.signature(fn).parameters.items():
        annotation = hints.get(name, param.annotation)
        if annotation == "Context" or (
            isinstance(annotation, type) and issubclass(annotation, Context)
        ):
            return name
    return None

"""Running a sync handler off the event loop, with the caller's context variables."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

__all__ = ["run_sync"]


def run_sync(
    executor: Executor | None, fn: Callable[..., Any], kwargs: dict[str, Any]
) -> asyncio.Future[Any]:
    """Schedule ``fn(**kwargs)`` on ``executor``; the future resolves on the event loop."""
    call = functools.partial(contextvars.copy_context().run, fn, **kwargs)
    return asyncio.get_running_loop().run_in_executor(executor, call)

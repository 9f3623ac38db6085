"""millimcp.server.invoke: one way to run a registered function (loop, threads, timeout,
the Context parameter)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from millimcp import ConfigurationError, Context
from millimcp.server.invoke import Invoker, context_parameter
from millimcp.server.offload import Pools


class Sub(Context):
    pass


def context() -> Context:
    return Context(request_id=1, method="tools/call", meta=None)


@pytest.fixture
def pools() -> Iterator[Pools]:
    pools = Pools(thread_workers=2, process_workers=1)
    yield pools
    pools.close()


async def on_loop(n: int) -> tuple[int, str]:
    return n, threading.current_thread().name


def on_thread(n: int) -> tuple[int, str]:
    return n, threading.current_thread().name


async def test_async_functions_run_on_the_loop_and_sync_ones_on_the_pool(pools: Pools) -> None:
    assert await Invoker(on_loop, context_param=None)({"n": 1}, context(), pools) == (
        1,
        threading.current_thread().name,
    )
    n, thread = await Invoker(on_thread, context_param=None)({"n": 2}, context(), pools)
    assert n == 2
    assert thread.startswith("millimcp-sync")


async def test_the_context_parameter_gets_the_request_context(pools: Pools) -> None:
    ctx = context()

    async def async_fn(ctx: Context) -> Context:
        return ctx

    def sync_fn(x: int, request: Context) -> tuple[int, Context]:
        return x, request

    assert context_parameter(async_fn) == "ctx"
    assert context_parameter(sync_fn) == "request"
    assert await Invoker(async_fn, context_param="ctx")({}, ctx, pools) is ctx
    assert await Invoker(sync_fn, context_param="request")({"x": 3}, ctx, pools) == (3, ctx)


def test_a_context_parameter_is_found_by_type_or_by_its_string_annotation() -> None:
    def by_string(a: int, c: Context) -> None: ...  # a string: from __future__ import annotations

    def without(a: int, b: str) -> None: ...

    def unresolvable(a: Missing, c: Context) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    def by_subclass(c: Sub) -> None: ...

    assert context_parameter(by_string) == "c"
    assert context_parameter(without) is None
    assert context_parameter(by_subclass) == "c"
    assert context_parameter(unresolvable) == "c"


async def test_past_the_timeout_the_call_raises_timeout_error(pools: Pools) -> None:
    release = threading.Event()

    async def slow_async() -> None:
        await asyncio.sleep(30)

    def slow_sync() -> None:
        release.wait(30)

    with pytest.raises(TimeoutError):
        await Invoker(slow_async, context_param=None, timeout=0.05)({}, context(), pools)
    with pytest.raises(TimeoutError):
        await Invoker(slow_sync, context_param=None, timeout=0.05)({}, context(), pools)
    release.set()


async def test_exceptions_come_through(pools: Pools) -> None:
    async def fails_async() -> None:
        raise LookupError("async")

    def fails_sync() -> None:
        raise LookupError("sync")

    for fn in (fails_async, fails_sync):
        with pytest.raises(LookupError):
            await Invoker(fn, context_param=None)({}, context(), pools)


def module_level(n: int) -> int:
    return n


def test_process_functions_are_checked_when_the_invoker_is_made() -> None:
    assert Invoker(module_level, context_param=None, process=True).process
    with pytest.raises(ConfigurationError, match="sync function"):
        Invoker(on_loop, context_param=None, process=True)
    with pytest.raises(ConfigurationError, match="cannot take a Context"):
        Invoker(module_level, context_param="ctx", process=True)

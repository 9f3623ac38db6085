"""The task runtime: start a handler as a task, serve ``tasks/get|update|cancel``.

:meth:`TaskManager.start` keeps a new task in the store (so that ``tasks/get`` finds it as
soon as the client has its id), then runs the handler in the background, in a fresh context
(no trace record or deadline of the request that started it) and under the task's own
deadline. A handler that asks the client for input (``ctx.elicit``...) parks the task in
``input_required`` with its requests; ``tasks/update`` delivers the answers and the handler
goes on where it waited. The handler's end sets the final status: ``completed`` with the
result (a tool error included), ``failed`` with the JSON-RPC error a protocol error carries,
``cancelled`` after ``tasks/cancel``.

A task belongs to the identity that created it (:func:`owner_of`): for any other, it does
not exist. With a shared store (Redis) any replica serves any task; a cancel that reaches
another replica is seen by the one running the handler at its next poll of the store.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec

from millimcp.errors import InternalError, InvalidParams, ProtocolError
from millimcp.protocol.types import (
    CallToolResult,
    CreateTaskResult,
    EmptyResult,
    GetTaskResult,
    InputRequest,
    TextContent,
)
from millimcp.session import Context, InputRequired
from millimcp.tasks.config import TaskConfig
from millimcp.tasks.record import TaskRecord, new_record
from millimcp.tasks.store import MemoryTaskStore, TaskStore

__all__ = ["TaskManager", "owner_of"]

log: Final = logging.getLogger("millimcp.tasks")

Handler = Callable[[Context], Awaitable[CallToolResult]]
"""Runs the work of one task (a tool call with its arguments bound) with its context."""
Watcher = Callable[[TaskRecord], None]
"""Told of every change a task goes through in this process (status notifications)."""

_NOT_FOUND: Final = "Failed to retrieve task: Task not found"
_MIN_WAIT_S: Final = 0.05


def owner_of(ctx: Context) -> str | None:
    """The identity a task is bound to: the request's principal when authorization gives
    one (``ctx.principal``), else None (then anyone holding the id may use the task)."""
    principal = getattr(ctx, "principal", None)
    if principal is None:
        return None
    subject = getattr(principal, "subject", None)
    return str(subject if subject is not None else principal)


class TaskManager:
    """The tasks of one server: their store and the handlers running here."""

    def __init__(self, config: TaskConfig | None = None, store: TaskStore | None = None) -> None:
        self.config = config or TaskConfig()
        self._store = store
        self.running: dict[str, asyncio.Task[None]] = {}
        """Handlers running in this process, by task id."""
        self.watchers: list[Watcher] = []

    def __repr__(self) -> str:
        return f"<TaskManager running={len(self.running)} store={self._store!r}>"

    @property
    def store(self) -> TaskStore:
        """The store (``TaskConfig.redis_url``: Redis; else memory), made on first use."""
        if self._store is None:
            config = self.config
            if config.redis_url is not None:
                from millimcp.tasks.redis_store import RedisTaskStore

                self._store = RedisTaskStore(
                    config.redis_url, config.namespace, timeout_s=config.redis_timeout_s
                )
            else:
                self._store = MemoryTaskStore(config.max_tasks)
        return self._store

    # -- starting -------------------------------------------------------------------------

    async def start(self, handler: Handler, ctx: Context) -> CreateTaskResult:
        """Keep a new task, start ``handler(ctx)`` in the background; the task's seed state.

        The context is the request's: it keeps the request's ``_meta`` (capabilities) and
        the input answered so far, and loses its stream (a task sends no notifications on
        the request that started it) and its binary attachment.
        """
        config = self.config
        record = new_record(owner_of(ctx), config.ttl_ms, config.poll_interval_ms)
        await self.store.create(record)
        task_id = record.task_id
        ctx._emit = None
        ctx._source = None
        ctx._attachments = None
        ctx._task_input = self._asker(task_id)
        deadline = config.ttl_ms / 1000
        if config.timeout_s is not None:
            deadline = min(deadline, config.timeout_s)
        loop = asyncio.get_running_loop()
        runner = loop.create_task(
            self._run(task_id, handler, ctx, deadline), context=contextvars.Context()
        )
        self.running[task_id] = runner
        runner.add_done_callback(lambda _: self.running.pop(task_id, None))
        return record.created()

    async def _run(self, task_id: str, handler: Handler, ctx: Context, seconds: float) -> None:
        """Run the handler to its end and keep how it ended (unless it was cancelled)."""
        status: Any = "completed"
        result: Any = None
        error: dict[str, Any] | None = None
        message: str | None = None
        try:
            async with asyncio.timeout(seconds):
                value = await self._watched(task_id, handler(ctx))
            result = msgspec.to_builtins(value)
        except asyncio.CancelledError:
            status, message = "cancelled", "The task was cancelled."
        except TimeoutError:
            text = f"The task did not finish within its deadline of {seconds:g} s"
            result = msgspec.to_builtins(
                CallToolResult(content=[TextContent(text=text)], is_error=True)
            )
        except ProtocolError as exc:
            status, error, message = "failed", _wire_error(exc), str(exc)
        except InputRequired:
            log.error("task %s: a handler raised InputRequired itself inside a task", task_id)
            status, error, message = "failed", _wire_error(InternalError("Internal error")), None
        except Exception:
            log.exception("task %s: the handler failed", task_id)
            status, error, message = "failed", _wire_error(InternalError("Internal error")), None

        def finish(record: TaskRecord) -> bool:
            if record.terminal:
                return False  # cancelled meanwhile: the cancel stands
            record.input_requests.clear()
            record.answers.clear()
            record.result = result
            record.error = error
            record.touch(status, message)
            return True

        await self._change(task_id, finish)

    async def _watched(self, task_id: str, work: Awaitable[CallToolResult]) -> CallToolResult:
        """Await ``work``; with a shared store, stop it when the task is cancelled or gone
        (on another replica, the cancel only reaches the store)."""
        if not self.store.shared:
            return await work
        inner = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({inner}, timeout=self._poll_s())
                if done:
                    return inner.result()
                record = await self.store.get(task_id)
                if record is None or record.cancel_requested or record.terminal:
                    inner.cancel()
                    raise asyncio.CancelledError
        finally:
            if not inner.done():
                inner.cancel()

    def _poll_s(self) -> float:
        return max(_MIN_WAIT_S, self.config.poll_interval_ms / 1000 / 5)

    # -- input from the client, inside a task ---------------------------------------------

    def _asker(self, task_id: str) -> Callable[[dict[str, InputRequest]], Awaitable[Any]]:
        async def ask(requests: dict[str, InputRequest]) -> dict[str, msgspec.Raw]:
            """Park the task with ``requests`` until ``tasks/update`` answered them all."""

            def park(record: TaskRecord) -> bool:
                for key, request in requests.items():
                    if key not in record.asked:
                        record.asked.append(key)
                        record.input_requests[key] = request
                if record.input_requests and not record.terminal:
                    record.touch("input_required", "Waiting for input from the client.")
                return True

            await self._change(task_id, park)
            store = self.store
            while True:
                record = await store.get(task_id)
                if record is None or record.terminal or record.cancel_requested:
                    raise asyncio.CancelledError
                if all(key in record.answers for key in requests):
                    break
                await store.wait(task_id, self._poll_s() if store.shared else 60.0)
            taken: dict[str, msgspec.Raw] = {}

            def take(record: TaskRecord) -> bool:
                for key in requests:
                    taken[key] = record.answers.pop(key)
                if not record.input_requests and record.status == "input_required":
                    record.touch("working")
                return True

            await self._change(task_id, take)
            return taken

        return ask

    # -- the methods ----------------------------------------------------------------------

    async def get(self, task_id: str, ctx: Context) -> GetTaskResult:
        """``tasks/get``: the detailed task; -32602 when it is unknown, expired or not the
        caller's."""
        record = await self._find(task_id, ctx)
        return record.detailed()

    async def update(
        self, task_id: str, responses: dict[str, msgspec.Raw], ctx: Context
    ) -> EmptyResult:
        """``tasks/update``: deliver answers to outstanding requests; others are ignored.
        When none is left outstanding, the task is ``working`` again."""
        await self._find(task_id, ctx)

        def deliver(record: TaskRecord) -> bool:
            delivered = False
            for key, answer in responses.items():
                if key in record.input_requests:
                    del record.input_requests[key]
                    record.answers[key] = answer
                    delivered = True
            if delivered:
                if record.input_requests or record.terminal:
                    record.touch(record.status, record.status_message)
                else:
                    record.touch("working")
            return delivered

        await self._change(task_id, deliver)
        return EmptyResult()

    async def cancel(self, task_id: str, ctx: Context) -> EmptyResult:
        """``tasks/cancel``: a task not yet ended is ``cancelled`` and its handler stopped;
        an ended one is left as it is (the same empty acknowledgement)."""
        await self._find(task_id, ctx)

        def mark(record: TaskRecord) -> bool:
            if record.terminal:
                return False
            record.cancel_requested = True
            record.input_requests.clear()
            record.touch("cancelled", "The task was cancelled.")
            return True

        await self._change(task_id, mark)
        runner = self.running.get(task_id)
        if runner is not None:
            runner.cancel()
        return EmptyResult()

    async def owns(self, task_id: str, ctx: Context) -> bool:
        """Whether the task exists and is the caller's."""
        record = await self.store.get(task_id)
        return record is not None and record.owner == owner_of(ctx)

    async def _find(self, task_id: str, ctx: Context) -> TaskRecord:
        record = await self.store.get(task_id)
        if record is None or record.owner != owner_of(ctx):
            raise InvalidParams(_NOT_FOUND)
        return record

    async def _change(self, task_id: str, change: Callable[[TaskRecord], bool]) -> None:
        changed = False

        def tracked(record: TaskRecord) -> bool:
            nonlocal changed
            changed = change(record)
            return changed

        record = await self.store.update(task_id, tracked)
        if record is not None and changed:
            for watcher in self.watchers:
                try:
                    watcher(record)
                except Exception:
                    log.exception("task watcher %r failed", watcher)

    async def close(self) -> None:
        """Stop the handlers running here (their tasks end ``cancelled``) and the store."""
        runners = list(self.running.values())
        for runner in runners:
            runner.cancel()
        if runners:
            await asyncio.gather(*runners, return_exceptions=True)
        if self._store is not None:
            await self._store.close()


def _wire_error(exc: ProtocolError) -> dict[str, Any]:
    error: dict[str, Any] = {"code": exc.code, "message": str(exc)}
    data = getattr(exc, "data", None)
    if data is not None:
        error["data"] = data
    return error

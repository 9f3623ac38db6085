"""A tool call running as a task on the server (the ``io.modelcontextprotocol/tasks`` extension).

``await client.call_tool(name, args, as_task=True)`` returns a :class:`Task` as soon as the
server has created it (or a finished one, when the server chose to answer at once)::

    task = await client.call_tool("analyze_orders", {"days": 30}, as_task=True)
    ...                                  # other work meanwhile
    async for update in task.updates():  # optional: every status change
        print(update.status, update.status_message)
    result = await task.result()         # the ToolResult, as call_tool would have returned

Polling follows the server's ``pollIntervalMs`` hint: the first poll after one interval,
then, while nothing changes, each wait 1.25 times the last, up to four intervals; a change
brings it back to one interval. Input the task asks for (``input_required``) is answered
with the client's elicitation, sampling and roots handlers, each request once, through
``tasks/update``. Every request declares the extension and names the task in ``Mcp-Name``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final

import msgspec

from millimcp.client.handlers import Handlers
from millimcp.client.pipeline import Pipeline
from millimcp.client.results import ToolResult
from millimcp.errors import CallTimeout, ClientError, MissingClientCapability
from millimcp.protocol.jsonrpc import decode_error
from millimcp.protocol.methods import ReplyDecoder, reply_decoder
from millimcp.protocol.types import (
    TASKS_EXTENSION,
    TERMINAL_STATUSES,
    CallToolResult,
    CreateTaskResult,
    GetTaskResult,
    narrow_blocks,
)
from millimcp.resilience.policy import Timeout

__all__ = ["Task", "TaskCancelled", "needs_tasks", "tool_result", "wait_for_task"]

_GET: Final[ReplyDecoder[GetTaskResult]] = reply_decoder("tasks/get")
_ACK: Final[ReplyDecoder[Any]] = reply_decoder("tasks/update")
_BACKOFF: Final = 1.25
_MAX_INTERVALS: Final = 4
_DEFAULT_POLL_S: Final = 0.5
_MIN_POLL_S: Final = 0.001
_RESULT: Final = msgspec.json.Decoder(CallToolResult)


class TaskCancelled(ClientError):
    """The task ended ``cancelled``: it has no result."""


def tool_result(data: Any) -> ToolResult:
    """A task's inlined ``result`` (a ``CallToolResult`` object) as a :class:`ToolResult`."""
    fields = dict(data) if isinstance(data, dict) else {}
    fields["resultType"] = "complete"  # inlined results need not carry the discriminator
    result = _RESULT.decode(msgspec.json.encode(fields))
    return ToolResult(
        narrow_blocks(result.content),
        result.structured_content,
        bool(result.is_error),
        result.meta,
    )


class Task:
    """One task: its last known state, and how to follow, answer, cancel or finish it."""

    def __init__(
        self,
        pipeline: Pipeline,
        seed: CreateTaskResult | GetTaskResult,
        *,
        timeout: Timeout | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._handlers: Handlers = pipeline.handlers
        self._timeout = timeout
        self.task_id = seed.task_id
        self.state: GetTaskResult = _as_detailed(seed)
        """The last state the server reported."""
        self._answered: set[str] = set()
        self._polls = 0
        self._final: ToolResult | None = None

    @classmethod
    def resume(cls, pipeline: Pipeline, task_id: str) -> Task:
        """A task known by its id only (its state is unknown until :meth:`refresh`)."""
        return cls(
            pipeline,
            GetTaskResult(
                task_id=task_id, status="working", created_at="", last_updated_at="", ttl_ms=None
            ),
        )

    @classmethod
    def finished(cls, pipeline: Pipeline, result: ToolResult) -> Task:
        """A task the server never created: it answered the call at once with ``result``."""
        now = ""
        task = cls(
            pipeline,
            GetTaskResult(
                task_id="", status="completed", created_at=now, last_updated_at=now, ttl_ms=None
            ),
        )
        task._final = result
        return task

    def __repr__(self) -> str:
        return f"<Task {self.task_id[:8]}… {self.status}>"

    @property
    def status(self) -> str:
        return self.state.status

    @property
    def status_message(self) -> str | None:
        return self.state.status_message

    @property
    def done(self) -> bool:
        return self.state.status in TERMINAL_STATUSES

    @property
    def polls(self) -> int:
        """``tasks/get`` requests sent so far."""
        return self._polls

    def _poll_s(self) -> float:
        hint = self.state.poll_interval_ms
        return max(_MIN_POLL_S, hint / 1000 if hint else _DEFAULT_POLL_S)

    async def refresh(self) -> GetTaskResult:
        """Ask the server for the task's state now (``tasks/get``)."""
        self._polls += 1
        state: GetTaskResult = await self._pipeline.call(
            "tasks/get",
            {"taskId": self.task_id},
            _GET,
            name=self.task_id,
            timeout=self._timeout,
            tasks=True,
        )
        self.state = state
        return state

    async def updates(self) -> AsyncIterator[GetTaskResult]:
        """Every new state of the task until it ends (the last one yielded is terminal).

        Input requests are answered on the way (each once), with the client's handlers.
        """
        last = _fingerprint(self.state)
        if self.done:
            yield self.state
            return
        delay = self._poll_s()
        while True:
            if self.state.status == "input_required":
                await self._answer(self.state)
            await asyncio.sleep(delay)
            state = await self.refresh()
            mark = _fingerprint(state)
            if mark != last:
                last = mark
                delay = self._poll_s()
                yield state
                if state.status in TERMINAL_STATUSES:
                    return
            else:
                delay = min(delay * _BACKOFF, self._poll_s() * _MAX_INTERVALS)

    async def result(self) -> ToolResult:
        """Wait for the end and return the tool's result (``isError`` results included).

        A task that failed raises the JSON-RPC error it carries (a :class:`ProtocolError`);
        a cancelled one raises :class:`TaskCancelled`.
        """
        if self._final is not None:
            return self._final
        if not self.done:
            async for _ in self.updates():
                pass
        state = self.state
        if state.status == "completed":
            return tool_result(state.result)
        if state.status == "failed":
            raise decode_error(msgspec.json.encode(state.error or {})).exception()
        raise TaskCancelled(f"task {self.task_id} was cancelled")

    async def cancel(self) -> None:
        """Ask the server to cancel the task (``tasks/cancel``); it may still end otherwise."""
        if self._final is not None:
            return
        await self._pipeline.call(
            "tasks/cancel",
            {"taskId": self.task_id},
            _ACK,
            name=self.task_id,
            timeout=self._timeout,
            tasks=True,
        )

    async def _answer(self, state: GetTaskResult) -> None:
        requests = {
            key: request
            for key, request in (state.input_requests or {}).items()
            if key not in self._answered
        }
        if not requests:
            return
        answers = {
            key: msgspec.Raw(await self._handlers.answer(request))
            for key, request in requests.items()
        }
        self._answered.update(answers)
        await self._pipeline.call(
            "tasks/update",
            {"taskId": self.task_id, "inputResponses": answers},
            _ACK,
            name=self.task_id,
            timeout=self._timeout,
            tasks=True,
        )


def needs_tasks(error: MissingClientCapability) -> bool:
    """Whether a -32021 names the tasks extension among the capabilities it requires."""
    data = error.data
    if not isinstance(data, dict):
        return False
    required = data.get("requiredCapabilities")
    extensions = required.get("extensions") if isinstance(required, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


async def wait_for_task(task: Task, timeout: Timeout | None) -> ToolResult:
    """The task's result within ``timeout.total`` (the call's deadline); past it the task is
    cancelled on the server and :class:`CallTimeout` raised."""
    total = None if timeout is None else timeout.total
    if total is None:
        return await task.result()
    try:
        async with asyncio.timeout(total):
            return await task.result()
    except TimeoutError:
        with contextlib.suppress(Exception):
            await task.cancel()
        raise CallTimeout(
            f"tools/call: the task {task.task_id} did not end within {total} s"
        ) from None


def _as_detailed(seed: CreateTaskResult | GetTaskResult) -> GetTaskResult:
    if isinstance(seed, GetTaskResult):
        return seed
    return GetTaskResult(
        task_id=seed.task_id,
        status=seed.status,
        status_message=seed.status_message,
        created_at=seed.created_at,
        last_updated_at=seed.last_updated_at,
        ttl_ms=seed.ttl_ms,
        poll_interval_ms=seed.poll_interval_ms,
    )


def _fingerprint(state: GetTaskResult) -> tuple[Any, ...]:
    return (state.status, state.last_updated_at, tuple(state.input_requests or ()))

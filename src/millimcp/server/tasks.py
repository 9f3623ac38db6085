"""Tools as tasks: when a ``tools/call`` becomes a task, and the ``tasks/*`` methods.

A tool registered with ``task="optional"`` becomes a task when the client negotiated the
extension on the call (``_meta.clientCapabilities.extensions``), and runs synchronously
otherwise; ``task="required"`` always becomes a task, and a client without the extension
gets -32021 naming it. Handshake-era calls (a session) always run synchronously: the
extension is a 2026-07-28 one. A tool's ``ask_first`` requests are asked through MRTR on
the call itself before the task exists (the spec's "resolve MRTR synchronously before
creating the task"); input asked inside the handler afterwards parks the task.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from millimcp.errors import MissingClientCapability
from millimcp.protocol.types import (
    TASKS_EXTENSION,
    CallToolParams,
    CallToolResult,
    CancelTaskParams,
    CreateTaskResult,
    EmptyResult,
    GetTaskParams,
    GetTaskResult,
    InputRequest,
    UpdateTaskParams,
)
from millimcp.session import Context, InputRequired, RequestHandler
from millimcp.tasks import TaskConfig, TaskManager

__all__ = ["TaskMethods", "declares_tasks"]

_REQUIRED: Final[dict[str, Any]] = {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


def declares_tasks(ctx: Context) -> bool:
    """Whether the request negotiated the tasks extension (its own ``_meta``)."""
    extensions = ctx.client_capabilities.extensions
    return extensions is not None and TASKS_EXTENSION in extensions


def _missing() -> MissingClientCapability:
    return MissingClientCapability(
        f"Missing required client capability: the {TASKS_EXTENSION} extension", _REQUIRED
    )


class TaskMethods:
    """The tasks of one server: starting tool calls as tasks, and ``tasks/*``."""

    __slots__ = ("manager", "result_meta")

    def __init__(self, config: TaskConfig, result_meta: dict[str, Any] | None) -> None:
        self.manager = TaskManager(config)
        self.result_meta = result_meta

    def __repr__(self) -> str:
        return f"<TaskMethods {self.manager!r}>"

    def handlers(self) -> dict[str, RequestHandler]:
        return {
            "tasks/get": self._get,
            "tasks/update": self._update,
            "tasks/cancel": self._cancel,
        }

    async def start(
        self,
        mode: str,
        ask_first: dict[str, InputRequest] | None,
        params: CallToolParams,
        ctx: Context,
        run: Callable[[bytes, Context], Awaitable[CallToolResult]],
    ) -> CreateTaskResult | None:
        """Start the call as a task; None when it runs synchronously instead."""
        if ctx.session is not None:
            return None
        if not declares_tasks(ctx):
            if mode == "required":
                raise _missing()
            return None
        if ask_first:
            answers = ctx.answers
            missing = {key: req for key, req in ask_first.items() if key not in answers}
            if missing:
                raise InputRequired(missing, ctx.state)
        arguments = params.arguments

        def handler(task_ctx: Context) -> Awaitable[CallToolResult]:
            return run(arguments, task_ctx)

        created = await self.manager.start(handler, ctx)
        created.meta = self.result_meta
        return created

    async def agreed(self, task_ids: list[str], ctx: Context) -> list[str] | None:
        """The tasks of ``task_ids`` a ``subscriptions/listen`` stream gets status
        notifications for: the caller's own (-32021 without the extension)."""
        if not declares_tasks(ctx):
            raise _missing()
        manager = self.manager
        mine = [task_id for task_id in task_ids if await manager.owns(task_id, ctx)]
        return mine or None

    async def _get(self, params: GetTaskParams, ctx: Context) -> GetTaskResult:
        if not declares_tasks(ctx):
            raise _missing()
        result = await self.manager.get(params.task_id, ctx)
        result.meta = self.result_meta
        return result

    async def _update(self, params: UpdateTaskParams, ctx: Context) -> EmptyResult:
        if not declares_tasks(ctx):
            raise _missing()
        result = await self.manager.update(params.task_id, params.input_responses, ctx)
        result.meta = self.result_meta
        return result

    async def _cancel(self, params: CancelTaskParams, ctx: Context) -> EmptyResult:
        if not declares_tasks(ctx):
            raise _missing()
        result = await self.manager.cancel(params.task_id, ctx)
        result.meta = self.result_meta
        return result

"""The tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663): a call answered later.

A server that negotiated the extension on a request (the client lists it under
``_meta.clientCapabilities.extensions``) may answer ``tools/call`` with a
:class:`CreateTaskResult` (``resultType: "task"``) instead of the tool's result. The client
then polls ``tasks/get`` (a :class:`GetTaskResult`, ``resultType: "complete"``, that inlines
``result``, ``error`` or ``inputRequests`` by status), answers input requests with
``tasks/update`` and may ``tasks/cancel``; both acknowledge with an empty result.
``notifications/tasks`` carries the same detailed task on a ``subscriptions/listen`` stream.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

import msgspec

from millimcp.protocol.types.base import JSONObject, McpStruct, RequestParams
from millimcp.protocol.types.client_features import InputRequest
from millimcp.protocol.types.results import Result

__all__ = [
    "TASKS_EXTENSION",
    "TERMINAL_STATUSES",
    "CancelTaskParams",
    "CreateTaskResult",
    "GetTaskParams",
    "GetTaskResult",
    "TaskStatus",
    "TaskStatusParams",
    "UpdateTaskParams",
]

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
"""The extension's identifier, in ``capabilities.extensions`` of either side."""

TaskStatus: TypeAlias = Literal["working", "input_required", "completed", "cancelled", "failed"]
TERMINAL_STATUSES: Final = frozenset({"completed", "cancelled", "failed"})


class CreateTaskResult(Result, tag="task", kw_only=True):
    """The seed state of a task, flat (``Result & Task``): what ``tools/call`` answers."""

    task_id: str
    status: TaskStatus
    created_at: str
    """ISO 8601."""
    last_updated_at: str
    ttl_ms: int | None
    """Integer milliseconds from creation; null for unlimited (always on the wire)."""
    status_message: str | None = None
    poll_interval_ms: int | None = None


class GetTaskResult(Result, kw_only=True):
    """A detailed task (``tasks/get``): the task plus what its status carries."""

    task_id: str
    status: TaskStatus
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    status_message: str | None = None
    poll_interval_ms: int | None = None
    input_requests: dict[str, InputRequest] | None = None
    """``input_required``: every outstanding request, by a key unique over the task's life."""
    result: JSONObject | None = None
    """``completed``: the result the original request would have had."""
    error: JSONObject | None = None
    """``failed``: the JSON-RPC error (``code``, ``message``, ``data``)."""


class TaskStatusParams(McpStruct, kw_only=True):
    """``notifications/tasks`` params: the detailed task, as ``tasks/get`` would return it."""

    task_id: str
    status: TaskStatus
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    status_message: str | None = None
    poll_interval_ms: int | None = None
    input_requests: dict[str, InputRequest] | None = None
    result: JSONObject | None = None
    error: JSONObject | None = None
    meta: JSONObject | None = msgspec.field(default=None, name="_meta")


class GetTaskParams(RequestParams, kw_only=True):
    task_id: str


class CancelTaskParams(RequestParams, kw_only=True):
    task_id: str


class UpdateTaskParams(RequestParams, kw_only=True):
    task_id: str
    input_responses: dict[str, msgspec.Raw]
    """Answers to outstanding ``inputRequests``, by key, raw until the handler reads them."""


def detailed(result: GetTaskResult) -> TaskStatusParams:
    """The notification params of a detailed task."""
    fields: dict[str, Any] = {f: getattr(result, f) for f in TaskStatusParams.__struct_fields__}
    fields["meta"] = None
    return TaskStatusParams(**fields)

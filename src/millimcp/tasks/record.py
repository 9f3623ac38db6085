"""One task as it is stored: status, input requests and answers, result or error.

A :class:`TaskRecord` is what every store keeps (as JSON in Redis), and what the wire shapes
are made from (:meth:`TaskRecord.detailed`, :meth:`TaskRecord.created`). Times are seconds
since the epoch; the wire has ISO 8601 strings.
"""

from __future__ import annotations

import datetime
import secrets
import time
from typing import Any, Final

import msgspec

from millimcp.protocol.types import (
    TERMINAL_STATUSES,
    CreateTaskResult,
    GetTaskResult,
    InputRequest,
    TaskStatus,
)

__all__ = ["TaskRecord", "iso", "new_task_id"]

_TASK_ID_BYTES: Final = 24
"""192 bits of randomness: a task id is a bearer token for the task's state."""


def new_task_id() -> str:
    """An unguessable task id (URL-safe base64 of 24 random bytes)."""
    return secrets.token_urlsafe(_TASK_ID_BYTES)


def iso(seconds: float) -> str:
    """``seconds`` since the epoch as ISO 8601 in UTC, to the millisecond."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TaskRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One task. ``owner`` is who created it (None without authorization): only the same
    identity can read, update or cancel it."""

    task_id: str
    owner: str | None = None
    status: TaskStatus = "working"
    status_message: str | None = None
    created_at: float
    updated_at: float
    ttl_ms: int
    poll_interval_ms: int
    input_requests: dict[str, InputRequest] = msgspec.field(default_factory=dict)
    """Outstanding requests to the client, by key."""
    answers: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict)
    """Answers the client sent that the handler has not taken yet."""
    asked: list[str] = msgspec.field(default_factory=list)
    """Every key ever asked (a key is never asked twice over a task's life)."""
    result: Any = None
    error: dict[str, Any] | None = None
    cancel_requested: bool = False

    @property
    def expires_at(self) -> float:
        return self.created_at + self.ttl_ms / 1000

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def expired(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) >= self.expires_at

    def touch(self, status: TaskStatus, message: str | None = None) -> None:
        self.status = status
        self.status_message = message
        self.updated_at = time.time()

    def created(self) -> CreateTaskResult:
        """The seed state ``tools/call`` answers with."""
        return CreateTaskResult(
            task_id=self.task_id,
            status=self.status,
            status_message=self.status_message,
            created_at=iso(self.created_at),
            last_updated_at=iso(self.updated_at),
            ttl_ms=self.ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
        )

    def detailed(self) -> GetTaskResult:
        """The detailed task of ``tasks/get``: what its status carries and nothing else."""
        status = self.status
        return GetTaskResult(
            task_id=self.task_id,
            status=status,
            status_message=self.status_message,
            created_at=iso(self.created_at),
            last_updated_at=iso(self.updated_at),
            ttl_ms=self.ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
            input_requests=dict(self.input_requests) if status == "input_required" else None,
            result=self.result if status == "completed" else None,
            error=self.error if status == "failed" else None,
        )


def new_record(owner: str | None, ttl_ms: int, poll_interval_ms: int) -> TaskRecord:
    """A fresh ``working`` task with a new id."""
    now = time.time()
    return TaskRecord(
        task_id=new_task_id(),
        owner=owner,
        created_at=now,
        updated_at=now,
        ttl_ms=ttl_ms,
        poll_interval_ms=poll_interval_ms,
    )

"""Task settings as one small frozen value object (``ServerConfig.tasks``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from millimcp.errors import ConfigurationError

__all__ = ["TaskConfig", "TaskMode"]

TaskMode: TypeAlias = Literal["never", "optional", "required"]
"""How a tool runs as a task: ``never`` (always synchronous), ``optional`` (a task when the
client negotiated the extension on the call, else synchronous), ``required`` (a task; a
client without the extension gets -32021)."""


@dataclass(frozen=True, slots=True)
class TaskConfig:
    """Where tasks are kept, for how long, and what clients are told about polling."""

    default: TaskMode = "never"
    """The mode of every tool registered without its own ``task=``."""
    ttl_ms: int = 3_600_000
    """How long a task is kept after its creation (``ttlMs``); then it is gone (its handler,
    if still running, is stopped)."""
    poll_interval_ms: int = 500
    """The ``pollIntervalMs`` hint sent with every task."""
    timeout_s: float | None = None
    """The deadline of a task's handler (its own, not the request's); ``None``: the TTL.
    Past it the task completes with a tool error, as a tool ``timeout=`` does."""
    max_tasks: int = 10_000
    """Tasks kept at most by one in-memory store; beyond it, new tasks are refused (503)."""
    redis_url: str | None = None
    """Keep tasks in Redis (``redis://host:port/db``) so that every replica serves every task;
    None: in this process's memory."""
    namespace: str = "millimcp:task"
    """Prefix of the Redis keys."""
    redis_timeout_s: float = 1.0
    """Timeout of one Redis operation."""

    def __post_init__(self) -> None:
        if self.default not in ("never", "optional", "required"):
            raise ConfigurationError(f"task mode must be never, optional or required: {self!r}")
        if self.ttl_ms <= 0 or self.poll_interval_ms <= 0 or self.max_tasks <= 0:
            raise ConfigurationError(f"task TTL, poll interval and cap must be positive: {self!r}")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ConfigurationError(f"task timeout_s must be positive seconds: {self!r}")

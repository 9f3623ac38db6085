"""Tasks (the ``io.modelcontextprotocol/tasks`` extension): a tool call answered later.

:class:`TaskManager` runs a handler in the background as a task and serves ``tasks/get``,
``tasks/update`` and ``tasks/cancel``; the tasks are kept in a :class:`MemoryTaskStore`
(one process) or a :class:`RedisTaskStore` (every replica), with a TTL. Settings:
:class:`TaskConfig` (``ServerConfig.tasks``). The server room wires it to
``@server.tool(task=...)``.
"""

from millimcp.tasks.config import TaskConfig, TaskMode
from millimcp.tasks.manager import TaskManager, owner_of
from millimcp.tasks.record import TaskRecord, iso, new_task_id
from millimcp.tasks.store import MemoryTaskStore, TaskStore

__all__ = [
    "MemoryTaskStore",
    "TaskConfig",
    "TaskManager",
    "TaskMode",
    "TaskRecord",
    "TaskStore",
    "iso",
    "new_task_id",
    "owner_of",
]

"""The MCP client: ``Client.over_http(url)``, ``Client.over_stdio(command, args)``.

Both protocol eras, pooled connections, per-call deadlines, safe retries and a concurrency
cap; see ``docs/client.md``. aiohttp (the ``client`` extra) is imported when an HTTP client
is made. ``millimcp.testing.connect`` wires one to a ``Server`` in memory.
"""

from millimcp.client.client import Client
from millimcp.client.handlers import ElicitationHandler, RootsSource, SamplingHandler
from millimcp.client.options import ClientOptions
from millimcp.client.results import ClientStats, Notification, ToolResult
from millimcp.client.subscription import Subscription
from millimcp.client.tasks import Task, TaskCancelled

__all__ = [
    "Client",
    "ClientOptions",
    "ClientStats",
    "ElicitationHandler",
    "Notification",
    "RootsSource",
    "SamplingHandler",
    "Subscription",
    "Task",
    "TaskCancelled",
    "ToolResult",
]

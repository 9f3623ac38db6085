"""Server settings as one small frozen value object."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from millimcp.cache import CacheConfig
from millimcp.resilience import ConcurrencyLimit
from millimcp.session import SessionConfig
from millimcp.tasks import TaskConfig

__all__ = ["ServerConfig"]


@dataclass(frozen=True, slots=True)
class ServerConfig:
    page_size: int = 100
    """Items per page of ``tools/list``, ``resources/list``, ``prompts/list``."""
    list_ttl_ms: int = 60_000
    """``ttlMs`` on list results and ``server/discover``: how long clients may reuse them."""
    list_cache_scope: Literal["public", "private"] = "public"
    """``cacheScope`` on list results and ``server/discover``: ``private`` when lists differ by
    caller."""
    sync_workers: int = min(32, (os.cpu_count() or 1) + 4)
    """Threads for sync handlers; they never run on the event loop. A sync tool past its
    timeout cannot be stopped in its thread: it keeps its thread until it returns, so the pool
    is bounded and the in-flight limit (``limit``) bounds what queues for it."""
    process_workers: int = os.cpu_count() or 1
    """Processes for ``@server.tool(executor="process")`` tools (the pool starts on first use)."""
    limit: ConcurrencyLimit | None = field(default_factory=ConcurrencyLimit)
    """Backpressure on work methods (``tools/call``, ``resources/read``, ``prompts/get``,
    ``completion/complete``): calls in flight and queued; beyond both, HTTP 503 with
    ``Retry-After``. Lists, discovery, notifications and ping are never limited. ``None``: no
    limit (an unbounded queue; not recommended)."""
    tool_timeout_s: float | None = None
    """Timeout of every tool registered without its own ``timeout=``; ``None``: none."""
    state_key: bytes | None = None
    """Key that seals MRTR ``requestState``. None: ``MILLIMCP_STATE_KEY`` from the environment
    (hex), else a random per-process key (then every worker of a deployment needs the same
    key: ``millimcp serve`` hands one to all its workers)."""
    state_ttl_s: float = 600.0
    server_info_in_results: bool = True
    """Put ``io.modelcontextprotocol/serverInfo`` in every result's ``_meta`` (a SHOULD)."""
    listener_queue: int = 1024
    """Notifications buffered per ``subscriptions/listen`` stream before it is closed."""
    sessions: SessionConfig = field(default_factory=SessionConfig)
    """The handshake era (``initialize``, ``Mcp-Session-Id``); ``SessionConfig(enabled=False)``
    serves only the stateless revisions."""
    cache: CacheConfig = field(default_factory=CacheConfig)
    """The tool-result cache: L1 size, the Redis URL of the shared tier (None: L1 only)."""
    server_timing: bool = False
    """Send ``Server-Timing`` (decode, validate, cache, handler, encode, compress, total) on
    every JSON response. Off by default: it tells clients how long the server worked."""
    metrics_path: str | None = None
    """Serve Prometheus metrics at this path (``"/metrics"``) next to the MCP endpoint; needs
    the ``metrics`` extra. With ``PROMETHEUS_MULTIPROC_DIR`` set, every worker's metrics are
    aggregated (``millimcp serve --workers N``)."""
    opentelemetry: bool = False
    """Trace every request as an OpenTelemetry span after the MCP semantic conventions,
    parented on ``_meta.traceparent`` (extra ``otel``; the global tracer provider)."""
    tasks: TaskConfig = field(default_factory=TaskConfig)
    """Tools as tasks (the tasks extension): the default mode of a tool, the TTL and polling
    hint of a task, its deadline, and the store (memory, or Redis for several replicas)."""

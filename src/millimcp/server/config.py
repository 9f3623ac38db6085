"""Server settings as one small frozen value object."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from millimcp.session import SessionConfig

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
    """Threads for sync handlers; they never run on the event loop."""
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

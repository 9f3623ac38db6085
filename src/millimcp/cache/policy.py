"""What to cache: the per-tool policy and the store-wide settings (no heavy imports)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Cache", "CacheConfig"]


@dataclass(frozen=True, slots=True)
class Cache:
    """How the results of one tool are cached: ``@server.tool(cache=Cache(ttl=30))``.

    Only successful results are cached (never ``isError`` results nor exceptions).
    Identical concurrent calls run once (single-flight).
    """

    ttl: float = 30.0
    """Seconds an entry lives in the in-process tier (L1)."""
    scope: Literal["public", "private"] = "public"
    """``public``: one entry for every caller, shared through Redis. ``private``: one entry
    per principal (see ``principal``), kept in this process only, never sent to Redis."""
    shared_ttl: float | None = None
    """Seconds an entry lives in the shared tier (Redis); None: the same as ``ttl``."""
    key: Callable[..., Any] | None = None
    """Called with the tool's arguments (keywords), returns what identifies the result
    (anything msgspec encodes). None: all the arguments, defaults filled in."""
    tags: Sequence[str] = ()
    """Tags the entry carries, formatted from the arguments (``"orders:{user_id}"``);
    invalidating a tag drops every entry that carries it, in every process."""
    principal: Callable[[Any], str | None] | None = None
    """``principal(ctx) -> str | None`` for ``private`` entries; None: the default (a digest
    of the ``Authorization`` header, else the ``Mcp-Session-Id`` header). A call without a
    principal is not cached."""

    def __post_init__(self) -> None:
        if self.ttl <= 0 or (self.shared_ttl is not None and self.shared_ttl <= 0):
            raise ValueError("cache ttl must be positive")
        if self.scope not in ("public", "private"):
            raise ValueError("cache scope must be 'public' or 'private'")


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """The server's cache store: ``ServerConfig(cache=CacheConfig(redis_url=...))``."""

    max_entries: int = 10_000
    """Entries in the in-process tier (LRU beyond that)."""
    redis_url: str | None = None
    """The shared tier and invalidation fan-out (``redis://host:port/db``); None: L1 only."""
    namespace: str = "millimcp"
    """Prefix of every Redis key and of the invalidation channel."""
    redis_timeout_s: float = 0.25
    """Connect and command timeout; past it the call goes on without Redis."""
    retry_after_s: float = 1.0
    """After a Redis failure, how long the store uses L1 only before trying Redis again."""
